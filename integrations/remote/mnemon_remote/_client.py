"""The client Source `remote`: a Source served by a plugin over protocol v0.

Before its first call, and again after any outage, it checks `GET /v0/discovery` against the
manifest (digest, id, version, plugin API, contributions). Every call has a deadline of
`timeout_ms` (the host's own deadline still applies and cancels the request), answers are read
no further than `max_response_bytes`, and then judged by the core's own validators exactly as
an in-process Source's answers are.
"""

from __future__ import annotations

import json
import logging
import os
import secrets as _secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import anyio
import httpx
import orjson
from jsonschema import Draft202012Validator
from pydantic import BeforeValidator, Field, model_validator

from mnemon.sdk import (
    ConfigPath,
    Configuration,
    DefinitionError,
    FactsRequest,
    MnemonError,
    PluginContext,
    RevisionConflict,
    SourceDefinition,
    SourceError,
    SourceFacts,
    SourceInit,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    read_configuration,
)

from ._answers import AnswerTooLarge, InvalidAnswer, Redactor, decode_answer, read_bounded
from ._launch import (
    CONFIGURATION_VARIABLE,
    MNEMON_RUN,
    LaunchedPlugin,
    PluginUnavailable,
    launch_plugin,
)
from ._manifest import ManifestReport, inspect_manifest, load_schema, require_valid
from ._wire import CALLS, DISCOVERY, parse_envelope, source_error_from

__all__ = [
    "DiscoveryMismatch",
    "RemoteConfiguration",
    "RemoteSettings",
    "RemoteSource",
    "define_remote_source",
]

PACKAGE = "mnemon-remote"
_log = logging.getLogger("mnemon.remote")
#: the most a host reads of one answer unless its configuration says otherwise, whatever the
#: plugin declares (up to 64 MiB): a plugin's declaration is its wish, not the host's budget
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Remote Source",
    description="A Source served by a plugin over HTTP (mnemon remote plugin protocol v0).",
    roles=["source"],
    provides=["source.remote"],
)


class DiscoveryMismatch(MnemonError):
    """The plugin's discovery answer disagrees with the manifest the host holds."""


# what a key missing from the configuration is, until its own rule says why it is needed
_MISSING = object()


def _manifest_given(value: object) -> object:
    if value is _MISSING or value == "":
        raise ValueError("a manifest path is required")
    return value


def _endpoint(value: object) -> object:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError("must be an http(s) URL")
    return value


def _flag(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _mapping(value: object) -> object:
    if not isinstance(value, Mapping):
        raise ValueError("must be a mapping")
    return value


def _secret_values(value: object) -> object:
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and isinstance(given, str) for name, given in value.items()
    ):
        raise ValueError("must map names to strings")
    return value


def _variable(value: object) -> object:
    if not isinstance(value, str) or not value:
        raise ValueError("an environment variable")
    return value


def _seconds(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 300:
        raise ValueError("0 to 300 seconds")
    return value


def _response_bytes(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 64 << 20:
        raise ValueError("1 KiB to 64 MiB")
    return value


class RemoteConfiguration(Configuration):
    """What a profile may say about a `remote` entry (see the README's table)."""

    # each key is checked on its own here; RemoteSettings then checks how they go together
    # (an endpoint or a launch) and against the plugin's manifest (its secrets, its schema)

    manifest: Annotated[ConfigPath, BeforeValidator(_manifest_given)] = Field(
        description="The plugin's mnemon-source.yaml; a relative path is the profile's."
    )
    endpoint: Annotated[str, BeforeValidator(_endpoint)] | None = Field(
        default=None,
        description="The base URL of a plugin already running (or launch = true).",
        json_schema_extra={"pattern": "^https?://"},
    )
    launch: Annotated[bool, BeforeValidator(_flag)] = Field(
        default=False, description="Start the plugin's run.command, and stop it at unmount."
    )
    configuration: Annotated[dict[str, Any], BeforeValidator(_mapping)] | None = Field(
        default=None,
        description="With launch: the plugin's own configuration, checked by its schema.",
    )
    secrets: Annotated[dict[str, str], BeforeValidator(_secret_values)] = Field(
        default_factory=dict,
        description="Values of the manifest's declared secrets, given to a launched plugin.",
    )
    token_env: Annotated[str, BeforeValidator(_variable)] | None = Field(
        default=None,
        description=(
            "With endpoint: the variable holding the plugin's caller secret "
            f"(default: {MNEMON_RUN.token_variable})."
        ),
    )
    startup_timeout: Annotated[float, Field(gt=0, le=300), BeforeValidator(_seconds)] = Field(
        default=10.0, description="Seconds a launched plugin may take to answer."
    )
    max_response_bytes: Annotated[
        int, Field(ge=1024, le=64 << 20), BeforeValidator(_response_bytes)
    ] = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        description="The most read of one answer; the plugin's own limit applies when lower.",
    )

    @model_validator(mode="before")
    @classmethod
    def _name_what_is_missing(cls, data: Any) -> Any:
        # a missing manifest says what is needed, not only that a field is required
        if isinstance(data, Mapping) and "manifest" not in data:
            return {**data, "manifest": _MISSING}
        return data


class RemoteSettings:
    """A `remote` entry's configuration, checked: where the plugin is and what it gets.

    Args:
        configuration: `{manifest, endpoint | launch: true, configuration?, secrets?,
            startup_timeout?, token_env?, max_response_bytes?}` (`RemoteConfiguration`).
        config_dir: the folder a relative `manifest` is taken from (the profile's folder,
            `PluginContext.config_dir`); without one, the manifest path must be absolute.
        token: the caller secret of a plugin at `endpoint` (one the host did not launch); by
            default it is read from the environment variable `token_env` names
            (`MNEMON_PLUGIN_TOKEN`).

    Raises:
        DefinitionError: naming the key at fault (never a value).
    """

    def __init__(
        self,
        configuration: Mapping[str, Any],
        *,
        config_dir: str | Path | None = None,
        token: str | None = None,
    ) -> None:
        read = read_configuration(
            RemoteConfiguration, configuration, subject="remote", config_dir=config_dir
        )
        endpoint, launch = read.endpoint, read.launch
        if (endpoint is None) == (not launch):
            raise DefinitionError("remote configuration: give either endpoint or launch: true")
        self.report = require_valid(inspect_manifest(read.manifest))
        self.endpoint: str | None = endpoint
        self.launch = launch
        if endpoint is not None and read.configuration is not None:
            # a plugin takes its configuration only from whoever starts it
            raise DefinitionError(
                "remote configuration.configuration: a running plugin has the configuration it "
                "was started with; give configuration only with launch: true"
            )
        self.token: str | None = None
        if endpoint is not None:
            variable = read.token_env or MNEMON_RUN.token_variable
            self.token = token if token is not None else os.environ.get(variable)
            if not self.token:
                raise DefinitionError(
                    f"remote configuration.token_env: {variable} holds no caller secret; set it "
                    "to the value the plugin at endpoint was started with"
                )
        elif read.token_env is not None:
            raise DefinitionError(
                "remote configuration.token_env: a launched plugin gets a fresh caller secret"
            )
        self.configuration = json.loads(json.dumps(read.configuration or {}))
        schema = self.report.configuration_schema
        if schema is not None:
            error = next(Draft202012Validator(schema).iter_errors(self.configuration), None)
            if error is not None:
                where = ".".join(map(str, error.absolute_path)) or "(root)"
                raise DefinitionError(
                    f"remote configuration.configuration.{where}: does not match the "
                    "plugin's configuration schema"
                )
        given = read.secrets
        declared = self.report.secret_names
        for name in given:
            if name not in declared:
                raise DefinitionError(f"remote configuration.secrets: {name!r} is not declared")
        for secret in (self.report.manifest or {}).get("secrets", []):
            if secret.get("required") and secret["name"] not in given:
                raise DefinitionError(
                    f"remote configuration.secrets: {secret['name']!r} is required"
                )
        self.secrets = dict(given)
        self.startup_timeout = float(read.startup_timeout)
        #: the most read of one answer: the plugin's own limit, or the host's if lower
        self.max_response_bytes = min(read.max_response_bytes, self.report.max_response_bytes)


def _loopback_transport() -> httpx.AsyncHTTPTransport:
    return httpx.AsyncHTTPTransport(
        # headers and body leave in separate segments: without TCP_NODELAY, Nagle's algorithm
        # and the peer's delayed ACK add about 40 ms to every call
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        # HTTP/1.1 keep-alive, one connection per concurrent call; an idle connection is closed
        # before the 5 s after which common servers (uvicorn, Node.js) close it themselves, so
        # a call never races a server closing the connection it is about to reuse
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16, keepalive_expiry=4),
    )


# answers are read as they come, up to max_response_bytes: no compression is asked for
_GET_HEADERS = [
    ("Accept", "application/json"),
    ("Accept-Encoding", "identity"),
    ("User-Agent", "mnemon-remote"),
]


class _Connection:
    """A plugin's endpoint over a pooled httpx transport, its URLs parsed once.

    Requests go to the transport itself: `httpx.AsyncClient` would add URL merging, cookies,
    authentication and redirect handling to every call, which the protocol uses none of and
    which cost a third of the CPU of a loopback call.
    """

    def __init__(
        self, endpoint: str, token: str, transport: httpx.AsyncBaseTransport, *, owned: bool
    ) -> None:
        self.transport = transport
        self._owned = owned
        # every request carries the caller secret; the plugin refuses any other
        self.get_headers = [*_GET_HEADERS, ("Authorization", f"Bearer {token}")]
        self.post_headers = [*self.get_headers, ("Content-Type", "application/json")]
        base = endpoint.rstrip("/")  # a path prefix in the endpoint is kept
        paths = [DISCOVERY, *(call.path for call in CALLS.values())]
        self._urls = {path: httpx.URL(base + path) for path in paths}

    def url(self, path: str) -> httpx.URL:
        """The absolute URL of one of the protocol's routes."""
        return self._urls[path]

    async def aclose(self) -> None:
        """Close the pooled connections, unless the transport was given to us."""
        if self._owned:
            await self.transport.aclose()


class RemoteSource:
    """One Source instance served by a remote plugin, with pooled connections.

    Args:
        init: what the factory received.
        settings: the checked configuration.
        transport: an httpx transport (for an in-process ASGI app), or None for the network.
    """

    def __init__(
        self,
        init: SourceInit,
        settings: RemoteSettings,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._init = init
        self._settings = settings
        self._report: ManifestReport = settings.report
        self._transport = transport
        self._client: _Connection | None = None
        self._launched: LaunchedPlugin | None = None
        self._checked = False
        self._lock = anyio.Lock()
        self._provenance = orjson.Fragment(init.provenance.model_dump_json())
        # the values the host gave the plugin never leave it through an answer
        self._redactor = Redactor([*settings.secrets.values(), *filter(None, [settings.token])])
        self._envelopes = Draft202012Validator(load_schema("error.schema.json"))
        self._discovery = Draft202012Validator(load_schema("discovery.schema.json"))

    def _ready(self) -> _Connection | None:
        """The pooled connection when nothing needs doing first (the common case: no lock)."""
        client = self._client
        if client is None or not self._checked:
            return None
        if self._settings.launch and (self._launched is None or not self._launched.running):
            return None
        return client

    async def _connect(self) -> _Connection:
        """The pooled connection, after (re)launching the plugin and checking its discovery."""
        ready = self._ready()
        if ready is not None:
            return ready
        async with self._lock:
            if self._settings.launch and (self._launched is None or not self._launched.running):
                await self._drop()
                command = [str(p) for p in (self._report.manifest or {})["run"]["command"]]
                try:
                    self._launched = await launch_plugin(
                        self._report.path,
                        command,
                        secrets=self._settings.secrets,
                        variables={
                            CONFIGURATION_VARIABLE: json.dumps(self._settings.configuration)
                        },
                        startup_timeout=self._settings.startup_timeout,
                    )
                except PluginUnavailable as failed:
                    # the launcher's own words (an exit status, a time), never the plugin's
                    _log.warning(
                        "remote plugin %s could not be launched: %s", self._report.plugin_id, failed
                    )
                    raise
                assert self._launched.token is not None  # the convention gives one
                self._redactor = Redactor([*self._settings.secrets.values(), self._launched.token])
            if self._client is None:
                launched = self._launched
                endpoint = launched.endpoint if launched else self._settings.endpoint
                token = launched.token if launched else self._settings.token
                # the settings checked both: an endpoint comes with its caller secret
                assert endpoint is not None
                assert token is not None
                self._client = _Connection(
                    endpoint,
                    token,
                    self._transport or _loopback_transport(),
                    owned=self._transport is None,
                )
            if not self._checked:
                await self._check_discovery(self._client)
                self._checked = True
            return self._client

    async def _check_discovery(self, client: _Connection) -> None:
        raw, status = await self._get(client, DISCOVERY)
        try:
            value = orjson.loads(raw)
        except ValueError:
            value = None
        if status != 200 or not self._discovery.is_valid(value):
            raise DiscoveryMismatch("the plugin's discovery answer is not valid")
        expected = {
            "plugin_api": self._report.plugin_api,
            "plugin": {"id": self._report.plugin_id, "version": self._report.version},
            "manifest_digest": self._report.digest,
        }
        for key, wanted in expected.items():
            if value[key] != wanted:
                raise DiscoveryMismatch(f"discovery.{key} differs from the manifest")
        if "source" not in value["contributions"]:
            raise DiscoveryMismatch("discovery.contributions does not list source")

    async def _get(self, client: _Connection, path: str) -> tuple[bytes, int]:
        return await self._exchange(client, "GET", path, None)

    async def _exchange(
        self, client: _Connection, method: str, path: str, content: bytes | None
    ) -> tuple[bytes, int]:
        limit = self._settings.max_response_bytes
        headers = client.post_headers if content is not None else client.get_headers
        request = httpx.Request(method, client.url(path), headers=headers, content=content)
        # the deadline is ours (anyio's scope): the transport is given no timeout of its own
        with anyio.fail_after(self._report.timeout_seconds):
            response = await client.transport.handle_async_request(request)
            response.request = request
            try:
                return await read_bounded(response.aiter_bytes(), limit), response.status_code
            finally:
                await response.aclose()

    async def _drop(self) -> None:
        """Forget the connection (and the process): the next call reconnects and re-checks."""
        self._checked = False
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
        if self._launched is not None:
            launched, self._launched = self._launched, None
            await launched.stop()

    async def _call(self, name: str, request: Any) -> Any:
        write = name == "mutate"
        # the body is encoded in one pass: the parts that never change were encoded once, the
        # request by its own model (the server validates all of it, strictly)
        content = orjson.dumps(
            {
                "invocation_id": _secrets.token_hex(16),
                "instance_key": self._init.instance_key,
                "provenance": self._provenance,
                "request": orjson.Fragment(request.model_dump_json()),
            }
        )
        try:
            client = await self._connect()
            raw, status = await self._exchange(client, "POST", CALLS[name].path, content)
        except TimeoutError:
            raise SourceError(
                "timeout", "the remote plugin did not answer in time", nothing_written=False
            ) from None
        except (httpx.HTTPError, PluginUnavailable, OSError):
            _log.debug("remote plugin %s unreachable", self._report.plugin_id, exc_info=True)
            await self._drop()
            raise SourceError(
                "provider_error", "the remote plugin is unavailable", nothing_written=False
            ) from None
        except DiscoveryMismatch:
            await self._drop()
            raise SourceError("discovery_mismatch", "the plugin is not the one declared") from None
        except AnswerTooLarge:
            raise SourceError(
                "response_too_large",
                "the answer exceeded max_response_bytes",
                kind="terminal",
                nothing_written=not write,
            ) from None
        if 200 <= status < 300:
            try:
                # parsed, scrubbed and validated by mnemon's own model (off the event loop when
                # large): what reaches the core is a checked result, or nothing
                return await decode_answer(
                    raw, CALLS[name].answer.model_validate, redactor=self._redactor
                )
            except InvalidAnswer:
                raise SourceError(
                    "invalid_response",
                    "the answer is not a valid result",
                    kind="terminal",
                    nothing_written=not write,
                ) from None
        envelope = parse_envelope(raw, self._envelopes, self._redactor)
        if envelope is None:
            # a 5xx (or any non-2xx) without a valid envelope is unavailability, not a decision
            await self._drop()
            raise SourceError(
                "provider_error",
                "the remote plugin answered without an envelope",
                nothing_written=False,
            )
        if name == "manage" and envelope.code == "revision_conflict":
            # the plugin re-checked the fence under its own lock: the same conflict an
            # in-process Source raises, so the person is told the data moved, not that it failed
            raise RevisionConflict(
                "revision conflict: the remote plugin's data moved since its revision was read"
            )
        raise source_error_from(envelope, write=write)

    def _unavailable(self, request: FactsRequest, reason: str) -> SourceFacts:
        manifest = self._report.source
        assert manifest is not None
        return SourceFacts(
            instance_key=request.instance_key,
            type_id=manifest.type_id,
            role=manifest.role,
            availability="unavailable",
            reason=reason,
        )

    async def facts(self, request: FactsRequest) -> Any:
        """The plugin's facts, or `unavailable` with why (`plugin-unavailable`, ...)."""
        try:
            return await self._call("facts", request)
        except SourceError as error:
            reasons = {
                "provider_error": "plugin-unavailable",
                "timeout": "plugin-timeout",
                "discovery_mismatch": "discovery-mismatch",
            }
            if error.code not in reasons:
                raise
            return self._unavailable(request, reasons[error.code])

    async def project(self, request: Any) -> Any:
        """The plugin's projection."""
        return await self._call("project", request)

    async def query(self, request: Any) -> Any:
        """The plugin's evidence for one route read."""
        return await self._call("query", request)

    async def mutate(self, request: Any) -> Any:
        """The plugin's receipt for one write."""
        return await self._call("mutate", request)

    async def manage(self, request: Any) -> Any:
        """The plugin's management result (the core checks a record operation's shape).

        Raises:
            RevisionConflict: the plugin found the expected revision stale (HTTP 409).
            SourceError: the plugin refused the call, failed or could not be reached.
        """
        return await self._call("manage", request)

    async def dispose(self) -> None:
        """Close the connections and stop a launched plugin."""
        await self._drop()


def define_remote_source(
    settings: RemoteSettings, transport: httpx.AsyncBaseTransport | None = None
) -> SourceDefinition:
    """The Source definition of a remote plugin: its manifest's Source fields, served remotely.

    `transport` routes every request elsewhere (for example `httpx.ASGITransport(app)` to
    talk to an app in the same process, as the tests and benchmarks do).
    """
    manifest = settings.report.source
    assert manifest is not None  # require_valid checked it

    def create(init: SourceInit) -> RemoteSource:
        return RemoteSource(init, settings, transport)

    return define_memory_source(manifest, create)


def apply(ctx: PluginContext) -> None:
    """Install the remote Source this entry's configuration names."""
    settings = RemoteSettings(ctx.configuration, config_dir=ctx.config_dir)
    install_memory(ctx, plugin=memory_plugin, sources=[define_remote_source(settings)])
