"""The server SDK: any in-process `SourceDefinition` served over protocol v0 as an ASGI app.

Each call carries everything the Source needs (configuration, provenance, the request with its
grant), so the server keeps no session. It does keep two caches that change no answer: the
Source runtimes it built (one per instance and configuration), and the receipts of recent
writes by idempotency key, so a write retried over the network is answered with its first
receipt instead of being written twice.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
from jsonschema import Draft202012Validator
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mnemon import (
    DefinitionError,
    MnemonError,
    RevisionConflict,
    SourceDefinition,
    SourceError,
    SourceInit,
)

from ._manifest import ManifestReport, inspect_manifest
from ._wire import CALLS, DISCOVERY, HEALTH, Envelope, Invocation, envelope_for

__all__ = ["create_app", "serve"]

_log = logging.getLogger("mnemon.remote")
_RECEIPTS = 1_024
_RUNTIMES = 64


def _json(content: bytes, status: int = 200) -> Response:
    return Response(content, status_code=status, media_type="application/json")


def _refuse(status: int, code: str, message: str, *, error_class: str = "source") -> Response:
    envelope = Envelope(
        code=code,
        message=message,
        retryable=error_class == "transient",
        error_class=error_class,  # type: ignore[arg-type]
    )
    return _json(envelope.model_dump_json(exclude_none=True).encode(), status)


def _check_definition(definition: SourceDefinition, report: ManifestReport) -> None:
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


class _SourceServer:
    def __init__(
        self, definition: SourceDefinition, report: ManifestReport, data_dir: str | None
    ) -> None:
        self._definition = definition
        self._report = report
        self._data_dir = data_dir
        schema = report.configuration_schema
        self._configuration = None if schema is None else Draft202012Validator(schema)
        self._runtimes: OrderedDict[bytes, Any] = OrderedDict()
        self._receipts: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = anyio.Lock()
        manifest = report.source
        assert manifest is not None  # checked by _check_definition
        self._routes = {route.id for route in manifest.routes}
        self._actions = {action.id for action in manifest.actions}
        operations = manifest.management.operations if manifest.management else ()
        self._operations = {operation.id for operation in operations}

        # the answers that never change are encoded once
        self._discovery = json.dumps(
            {
                "plugin_api": report.plugin_api or "0.1.0",
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
        """The runtime cache key: one runtime per instance, provenance and configuration."""
        return json.dumps(
            [invocation.instance_key, invocation.provenance.model_dump(), invocation.configuration],
            sort_keys=True,
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
                    configuration=invocation.configuration,
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

    def _undeclared(self, name: str, request: Any) -> str | None:
        if name == "query" and request.route.route_id not in self._routes:
            return "unknown_route"
        if name == "mutate" and request.offer.action_id not in self._actions:
            return "unknown_action"
        if name == "manage" and request.operation.id not in self._operations:
            return "unknown_operation"
        return None

    async def call(self, request: Request) -> Response:
        name = request.path_params["call"]
        call = CALLS.get(name)
        if call is None:
            return _refuse(404, "unknown_call", "no such contribution call")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _refuse(400, "invalid_request", "the body is not JSON")
        try:
            invocation = Invocation.model_validate(body)
            parsed = call.request.model_validate(invocation.request)
        except ValidationError as exc:
            where = ".".join(str(part) for part in exc.errors()[0]["loc"]) or "(body)"
            return _refuse(400, "invalid_request", f"the request is invalid at {where}")
        key = self._instance(invocation)
        # a configuration is checked when its runtime is built: a cached one was valid
        if (
            key not in self._runtimes
            and self._configuration is not None
            and not self._configuration.is_valid(invocation.configuration)
        ):
            return _refuse(400, "invalid_configuration", "the configuration is invalid")
        undeclared = self._undeclared(name, parsed)
        if undeclared is not None:
            return _refuse(404, undeclared, f"the manifest declares no such {name} target")
        replay_key = self._replay_key(invocation, parsed) if name == "mutate" else None
        if replay_key is not None and replay_key in self._receipts:
            return _json(self._receipts[replay_key])
        try:
            runtime = await self._runtime(invocation, key)
            method = getattr(runtime, name, None)
            if method is None:
                return _refuse(404, "unsupported_call", f"the Source does not implement {name}")
            answer = await method(parsed)
            content = call.answer.model_validate(answer).model_dump_json().encode()
        except DefinitionError:
            return _refuse(400, "invalid_configuration", "the Source refused its configuration")
        except RevisionConflict:
            return _refuse(409, "revision_conflict", "the expected revision is not current")
        except SourceError as error:
            status, envelope = envelope_for(error)
            return _json(envelope.model_dump_json(exclude_none=True).encode(), status)
        except (MnemonError, ValidationError, Exception):
            # the exception text may carry paths or secrets: it is logged only at DEBUG
            _log.debug("remote Source %s failed", name, exc_info=True)
            return _refuse(500, "internal_error", "the Source failed", error_class="transient")
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
                invocation.configuration,
                request.view.scope.model_dump(),
                request.offer.action_id,
                request.idempotency_key,
            ],
            sort_keys=True,
        ).encode()


def create_app(
    definition: SourceDefinition, manifest_path: Path | str, *, data_dir: str | None = None
) -> Starlette:
    """Wrap `definition` as an ASGI app speaking protocol v0 for the manifest at `manifest_path`.

    Args:
        definition: the in-process Source to serve.
        manifest_path: its `mnemon-source.yaml` (the file or its folder); its Source fields must
            equal the definition's manifest (the plugin id stands for the package name).
        data_dir: the folder given to the Source factory as the host's data folder.

    Raises:
        DefinitionError: the manifest is invalid or disagrees with `definition`.
    """
    report = inspect_manifest(Path(manifest_path))
    _check_definition(definition, report)
    server = _SourceServer(definition, report, data_dir)
    return Starlette(
        routes=[
            Route(DISCOVERY, server.discovery, methods=["GET"]),
            Route(HEALTH, server.health, methods=["GET"]),
            Route("/v0/contributions/source/{call}", server.call, methods=["POST"]),
        ]
    )


def serve(
    definition: SourceDefinition,
    manifest_path: Path | str,
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: str | None = None,
) -> None:
    """Serve `definition` over HTTP until SIGTERM or Ctrl-C (blocking).

    The address is `host`/`port`, else `MNEMON_PLUGIN_HOST`/`MNEMON_PLUGIN_PORT` (the run
    convention), else 127.0.0.1 on port 8400: loopback unless asked otherwise.

    Raises:
        DefinitionError: the manifest is invalid or disagrees with `definition`.
    """
    import uvicorn

    app = create_app(definition, manifest_path, data_dir=data_dir)
    uvicorn.run(
        app,
        host=host or os.environ.get("MNEMON_PLUGIN_HOST", "127.0.0.1"),
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
