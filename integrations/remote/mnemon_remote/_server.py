"""The server SDK: any in-process `SourceDefinition` served over protocol v0 as an ASGI app.

What the server trusts, and why:

- **Its caller, only with the caller secret.** The launching host hands the plugin a fresh
  secret (`MNEMON_PLUGIN_TOKEN`); every request must carry it as `Authorization: Bearer`,
  compared in constant time, or it is refused with 401. Any other local process, and any web
  page a browser on the machine shows, is a stranger.
- **Only loopback names in `Host`,** so a web page cannot reach the server through a DNS name
  it controls that resolves to 127.0.0.1 (DNS rebinding), and **only `application/json`
  bodies**, which a page cannot send without the preflight a server never answers.
- **The configuration it was started with,** never one a request carries: a caller cannot point
  the Source at another file, database or account.
- **Nothing the Source answers, unchecked:** inputs are checked against the manifest's own
  schemas before the Source runs, and answers against the contract before they leave.

Each call carries the rest (the scope, the request with its grant), so the server keeps no
session. It keeps two caches that change no answer: the Source runtimes it built (one per
instance), and the receipts of recent writes by idempotency key, so a write retried over the
network is answered with its first receipt instead of being written twice.
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import orjson
from jsonschema import Draft202012Validator
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mnemon.sdk import (
    DefinitionError,
    MnemonError,
    RevisionConflict,
    SourceDefinition,
    SourceError,
    SourceInit,
    SourceManifest,
)

from ._launch import CONFIGURATION_VARIABLE, MNEMON_RUN
from ._manifest import ManifestReport, inspect_manifest
from ._wire import CALLS, DISCOVERY, HEALTH, Envelope, Invocation, envelope_for

__all__ = ["LOOPBACK_HOSTS", "create_app", "serve"]

_log = logging.getLogger("mnemon.remote")
_RECEIPTS = 1_024
_RUNTIMES = 64
#: the `Host` names a loopback server answers to
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: the largest request body read; a route's or action's input is far smaller
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: the shortest caller secret accepted: a guessable one protects nothing
SHORTEST_TOKEN = 16


def _envelope(status: int, code: str, message: str, *, error_class: str = "source") -> Response:
    envelope = Envelope(
        code=code,
        message=message,
        retryable=error_class == "transient",
        error_class=error_class,  # type: ignore[arg-type]
    )
    return Response(
        envelope.model_dump_json(exclude_none=True).encode(),
        status_code=status,
        media_type="application/json",
        headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
    )


def _json(content: bytes, status: int = 200) -> Response:
    return Response(content, status_code=status, media_type="application/json")


def _host_name(value: bytes | None) -> str | None:
    """The name in a `Host` header, without its port; None when there is none."""
    if not value:
        return None
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):  # an IPv6 literal: [::1]:8400
        end = text.find("]")
        return None if end < 0 else text[1:end]
    name, _, port = text.rpartition(":")
    return name if name and port.isdigit() else text


class _Guard:
    """Refuses a request before any route sees it.

    A foreign `Host`, no caller secret, or a body that is not JSON or is too large.
    """

    def __init__(self, app: ASGIApp, token: str, hosts: frozenset[str]) -> None:
        self._app = app
        self._token = f"Bearer {token}".encode()
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        refusal = self._refusal(scope["method"], headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _refusal(self, method: str, headers: Mapping[bytes, bytes]) -> Response | None:
        if _host_name(headers.get(b"host")) not in self._hosts:
            return _envelope(403, "forbidden_host", "the Host header names no loopback address")
        given = headers.get(b"authorization", b"")
        # constant time: how much of a guess was right must not show in the answer's timing
        if not hmac.compare_digest(given, self._token):
            return _envelope(
                401, "unauthorized", "the caller secret is missing or wrong", error_class="access"
            )
        if method == "POST":
            media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if media != b"application/json":
                return _envelope(415, "unsupported_media_type", "the body must be application/json")
            length = headers.get(b"content-length", b"0")
            if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
                return _envelope(413, "request_too_large", "the body is too large")
        return None


def _check_definition(definition: SourceDefinition, report: ManifestReport) -> SourceManifest:
    if report.source is None:
        issue = report.issues[0] if report.issues else None
        where = f"{issue.path}: {issue.message}" if issue else "no Source fields"
        raise DefinitionError(f"remote manifest {report.path.name}: {where}")
    served = definition.manifest.model_dump(exclude={"package_name"})
    declared = report.source.model_dump(exclude={"package_name"})
    for name, value in served.items():
        if declared.get(name) != value:
            raise DefinitionError(
                f"remote manifest source.{name}: differs from the served Source's manifest"
            )
    return report.source


def _checked_configuration(report: ManifestReport, configuration: Any) -> dict[str, Any]:
    if not isinstance(configuration, Mapping):
        raise DefinitionError("remote plugin configuration: must be a JSON object")
    value: dict[str, Any] = json.loads(json.dumps(dict(configuration)))  # a private copy
    schema = report.configuration_schema
    if schema is not None:
        error = next(Draft202012Validator(schema).iter_errors(value), None)
        if error is not None:
            where = ".".join(map(str, error.absolute_path)) or "(root)"
            raise DefinitionError(
                f"remote plugin configuration.{where}: does not match the configuration schema "
                f"({error.validator})"
            )
    return value


# a request's input arrives parsed into the core's frozen JSON, whose arrays are tuples: they
# are JSON arrays too (the plain validator took them for another type and refused every input
# holding an array: a `records-write` batch, a list of messages)
_FrozenInputValidator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "array", lambda checker, instance: isinstance(instance, (list, tuple))
    ),
)


def _input_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator of one manifest input schema (a plain copy of it), for frozen inputs."""
    validator: Draft202012Validator = _FrozenInputValidator(orjson.loads(orjson.dumps(schema)))
    return validator


def _input_problem(validator: Draft202012Validator, value: Any) -> str | None:
    """Where and which rule an input breaks, never the value itself."""
    error = next(validator.iter_errors(value), None)
    if error is None:
        return None
    where = ".".join(map(str, error.absolute_path)) or "(root)"
    return f"{where} ({error.validator})"


def _broken_rule(name: str, manifest: SourceManifest, request: Any, answer: Any) -> str | None:
    """The contract rule an answer breaks, named without quoting it; None when it keeps all."""
    if name == "facts":
        if answer.instance_key != request.instance_key:
            return "facts name another instance"
        if (answer.type_id, answer.role) != (manifest.type_id, manifest.role):
            return "facts name another type or role than the manifest"
        if not set(answer.capabilities) <= set(manifest.capabilities):
            return "facts claim an undeclared capability"
        if not set(answer.route_ids) <= {route.id for route in manifest.routes}:
            return "facts claim an undeclared route"
        if not set(answer.action_ids) <= {action.id for action in manifest.actions}:
            return "facts claim an undeclared action"
    elif name == "project":
        if any(f.source_key != request.instance_key for f in answer.fragments):
            return "a fragment of another instance"
        if any(f.mode != request.mode for f in answer.fragments):
            return "a fragment in another mode than the one requested"
        if sum(len(f.text) for f in answer.fragments) > request.max_characters:
            return "fragments over max_characters"
        if answer.grant is not None and answer.grant.source_key != request.instance_key:
            return "a grant of another instance"
    elif name == "query":
        if (answer.view_id, answer.route_id, answer.source_key) != (
            request.view.id,
            request.route.id,
            request.route.source_key,
        ):
            return "evidence for another view, route or Source"
    elif name == "mutate":
        if (answer.view_id, answer.offer_id, answer.source_key) != (
            request.view.id,
            request.offer.id,
            request.offer.source_key,
        ):
            return "a receipt for another view, offer or Source"
    elif (answer.source_key, answer.operation) != (request.instance_key, request.operation.id):
        return "a result for another Source or operation"
    return None


class _SourceServer:
    def __init__(
        self,
        definition: SourceDefinition,
        report: ManifestReport,
        configuration: dict[str, Any],
        data_dir: str | None,
    ) -> None:
        self._definition = definition
        self._manifest = _check_definition(definition, report)
        self._configuration = configuration
        self._data_dir = data_dir
        self._runtimes: OrderedDict[bytes, Any] = OrderedDict()
        self._receipts: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = anyio.Lock()
        manifest = self._manifest
        management = manifest.management
        # the record operations the core derives from declared record kinds are served too
        operations = (*management.operations, *management.record_operations()) if management else ()
        # the manifest's own input schemas, never the ones a request carries
        self._inputs: dict[tuple[str, str], Draft202012Validator] = {
            **{("query", r.id): _input_validator(r.input_schema) for r in manifest.routes},
            **{("mutate", a.id): _input_validator(a.input_schema) for a in manifest.actions},
            **{("manage", o.id): _input_validator(o.input_schema) for o in operations},
        }

        # the answers that never change are encoded once
        self._discovery = json.dumps(
            {
                "plugin_api": report.plugin_api,
                "plugin": {"id": report.plugin_id, "version": report.version},
                "manifest_digest": report.digest,
                "contributions": ["source"],
            }
        ).encode()

    async def discovery(self, request: Request) -> Response:
        return _json(self._discovery)

    async def health(self, request: Request) -> Response:
        return _json(b'{"status":"ok"}')

    @staticmethod
    def _instance(invocation: Invocation) -> bytes:
        """The runtime cache key: one runtime per instance and provenance."""
        return json.dumps(
            [invocation.instance_key, invocation.provenance.model_dump()], sort_keys=True
        ).encode()

    async def _runtime(self, invocation: Invocation, key: bytes) -> Any:
        runtime = self._runtimes.get(key)
        if runtime is not None:  # the common case: no lock, nothing to build
            return runtime
        async with self._lock:
            runtime = self._runtimes.get(key)
            if runtime is None:
                init = SourceInit(
                    instance_key=invocation.instance_key,
                    provenance=invocation.provenance,
                    configuration=self._configuration,
                    data_dir=self._data_dir,
                )
                created: Any = self._definition.create(init)
                runtime = await created if inspect.isawaitable(created) else created
                self._runtimes[key] = runtime
                while len(self._runtimes) > _RUNTIMES:
                    _, old = self._runtimes.popitem(last=False)
                    dispose = getattr(old, "dispose", None)
                    if dispose is not None:
                        await dispose()
            return runtime

    @staticmethod
    def _target(name: str, request: Any) -> tuple[str, str] | None:
        """The manifest entry a call names: (call, route, action or operation id)."""
        if name == "query":
            return name, request.route.route_id
        if name == "mutate":
            return name, request.offer.action_id
        if name == "manage":
            return name, request.operation.id
        return None

    async def _body(self, request: Request) -> bytes | None:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_REQUEST_BYTES:
                return None
        return bytes(body)

    async def call(self, request: Request) -> Response:
        name = request.path_params["call"]
        call = CALLS.get(name)
        if call is None:
            return _envelope(404, "unknown_call", "no such contribution call")
        body = await self._body(request)
        if body is None:
            return _envelope(413, "request_too_large", "the body is too large")
        try:
            # strict JSON: NaN, Infinity and nesting past 1,024 levels are refused
            invocation = Invocation.model_validate(orjson.loads(body))
            parsed = call.request.model_validate(invocation.request)
        except ValueError as exc:  # not JSON, or a ValidationError (also a ValueError)
            where = "(body)"
            if isinstance(exc, ValidationError):
                where = ".".join(str(part) for part in exc.errors()[0]["loc"]) or where
            return _envelope(400, "invalid_request", f"the request is invalid at {where}")
        target = self._target(name, parsed)
        if target is not None:
            validator = self._inputs.get(target)
            if validator is None:
                code = {"query": "unknown_route", "mutate": "unknown_action"}
                return _envelope(
                    404,
                    code.get(name, "unknown_operation"),
                    f"the manifest declares no such {name} target",
                )
            problem = _input_problem(validator, parsed.input)
            if problem is not None:
                return _envelope(
                    400, "invalid_input", f"the input breaks the manifest's schema at {problem}"
                )
        replay_key = self._replay_key(invocation, parsed) if name == "mutate" else None
        if replay_key is not None and replay_key in self._receipts:
            return _json(self._receipts[replay_key])
        try:
            runtime = await self._runtime(invocation, self._instance(invocation))
            method = getattr(runtime, name, None)
            if method is None:
                return _envelope(404, "unsupported_call", f"the Source does not implement {name}")
            answer = call.answer.model_validate(await method(parsed))
        except DefinitionError:
            return _envelope(400, "invalid_configuration", "the Source refused its configuration")
        except RevisionConflict:
            return _envelope(409, "revision_conflict", "the expected revision is not current")
        except SourceError as error:
            status, envelope = envelope_for(error)
            return _json(envelope.model_dump_json(exclude_none=True).encode(), status)
        except (MnemonError, ValidationError, Exception):
            # the exception text may carry paths or secrets: it is logged only at DEBUG
            _log.debug("remote Source %s failed", name, exc_info=True)
            return _envelope(500, "internal_error", "the Source failed", error_class="transient")
        broken = _broken_rule(name, self._manifest, parsed, answer)
        if broken is not None:
            # the rule, never the answer: the Source's author fixes it from this line
            _log.warning("remote Source %s answer broke the contract: %s", name, broken)
            return _envelope(500, "invalid_output", "the Source's answer broke the contract")
        content = answer.model_dump_json().encode()
        if replay_key is not None:
            self._receipts[replay_key] = content
            while len(self._receipts) > _RECEIPTS:
                self._receipts.popitem(last=False)
        return _json(content)

    @staticmethod
    def _replay_key(invocation: Invocation, request: Any) -> bytes | None:
        if request.idempotency_key is None:
            return None
        return json.dumps(
            [
                invocation.instance_key,
                request.view.scope.model_dump(),
                request.offer.action_id,
                request.idempotency_key,
            ],
            sort_keys=True,
        ).encode()


def create_app(
    definition: SourceDefinition,
    manifest_path: Path | str,
    *,
    token: str,
    configuration: Mapping[str, Any] | None = None,
    data_dir: str | None = None,
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """Wrap `definition` as an ASGI app speaking protocol v0 for the manifest at `manifest_path`.

    Args:
        definition: the in-process Source to serve.
        manifest_path: its `mnemon-source.yaml` (the file or its folder); its Source fields must
            equal the definition's manifest (the plugin id stands for the package name).
        token: the caller secret every request must carry (`Authorization: Bearer <token>`);
            at least 16 characters.
        configuration: the Source's configuration, checked against the manifest's schema; no
            request can change it.
        data_dir: the folder given to the Source factory as the host's data folder.
        allowed_hosts: `Host` names to answer besides the loopback ones (for a server bound to
            another interface on purpose).

    Raises:
        DefinitionError: the manifest is invalid or disagrees with `definition`, the token is
            too short, or the configuration breaks the manifest's schema.
    """
    if not isinstance(token, str) or len(token) < SHORTEST_TOKEN:
        raise DefinitionError(
            f"remote plugin token: a caller secret of at least {SHORTEST_TOKEN} characters "
            "is required"
        )
    report = inspect_manifest(Path(manifest_path))
    _check_definition(definition, report)
    server = _SourceServer(
        definition, report, _checked_configuration(report, configuration or {}), data_dir
    )
    app = Starlette(
        routes=[
            Route(DISCOVERY, server.discovery, methods=["GET"]),
            Route(HEALTH, server.health, methods=["GET"]),
            Route("/v0/contributions/source/{call}", server.call, methods=["POST"]),
        ]
    )
    hosts = LOOPBACK_HOSTS | {host.lower() for host in allowed_hosts}
    app.add_middleware(_Guard, token=token, hosts=hosts)
    return app


def _environment_configuration() -> dict[str, Any]:
    text = os.environ.get(CONFIGURATION_VARIABLE)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise DefinitionError(f"{CONFIGURATION_VARIABLE}: not JSON") from None
    if not isinstance(value, dict):
        raise DefinitionError(f"{CONFIGURATION_VARIABLE}: must be a JSON object")
    return value


def serve(
    definition: SourceDefinition,
    manifest_path: Path | str,
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: str | None = None,
    token: str | None = None,
    configuration: Mapping[str, Any] | None = None,
) -> None:
    """Serve `definition` over HTTP until SIGTERM or Ctrl-C (blocking).

    Launched by a host, a plugin gets everything from its environment (the run convention):
    the address from `MNEMON_PLUGIN_HOST`/`MNEMON_PLUGIN_PORT` (else 127.0.0.1 on port 8400),
    the caller secret from `MNEMON_PLUGIN_TOKEN` and the configuration from
    `MNEMON_PLUGIN_CONFIGURATION` (JSON). Started by hand, set them, or pass `token` and
    `configuration`; the host then needs the same token.

    Raises:
        DefinitionError: no caller secret, or the manifest, token or configuration is invalid.
    """
    import uvicorn

    token = token if token is not None else os.environ.get(MNEMON_RUN.token_variable)
    if not token:
        raise DefinitionError(
            f"remote plugin: no caller secret; set {MNEMON_RUN.token_variable} (the host sends "
            "the same value on every call)"
        )
    bind = host or os.environ.get("MNEMON_PLUGIN_HOST", "127.0.0.1")
    app = create_app(
        definition,
        manifest_path,
        token=token,
        configuration=configuration if configuration is not None else _environment_configuration(),
        data_dir=data_dir,
        allowed_hosts=() if bind in ("0.0.0.0", "::") else (bind,),
    )
    uvicorn.run(
        app,
        host=bind,
        port=port if port is not None else int(os.environ.get("MNEMON_PLUGIN_PORT", "8400")),
        # httptools parses in C where h11 parses in Python; uvloop serves when the `fast`
        # extra installed it ("auto"), the standard asyncio loop otherwise
        http="httptools",
        loop="auto",
        lifespan="off",
        # a loopback plugin has no proxy in front, and no client reads these headers
        proxy_headers=False,
        server_header=False,
        date_header=False,
        log_level="warning",
        access_log=False,
    )
