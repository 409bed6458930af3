"""The `nexent-provider` Source: one Nexent provider as a `search` route and an `ingest` action."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson

from mnemon import (
    DefinitionError,
    Evidence,
    EvidenceItem,
    FactsRequest,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    RevisionConflict,
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    guarded_call,
    install_memory,
    memory_text_schema,
    run_blocking,
    source_data_directory,
    truncate_text,
)
from mnemon.storage import write_atomically

from ._config import NexentConfiguration, mask_secret, read_settings
from ._failures import source_error
from ._loader import PluginRecord, ProviderDirectory, build_provider
from ._shim import install_nexent_shim
from .models import (
    DegradableProviderError,
    MemoryIngestRequest,
    MemoryIngestResult,
    MemoryIngestUnit,
    MemorySearchRequest,
    MemorySearchResult,
    UnitIngestResult,
    UnitIngestStatus,
    _ProviderException,
)

__all__ = ["NEXENT_SOURCE", "NexentSource", "apply", "memory_plugin", "switched_on"]

PACKAGE = "mnemon-source-nexent"
TYPE_ID = "nexent-provider"
SEARCH_SWITCH = "EXTERNAL_MEMORY_SEARCH_ENABLED"
INGEST_SWITCH = "EXTERNAL_MEMORY_INGEST_ENABLED"
# the same two switches as host settings (`HostSettings.switches`, a profile's `[switches]`)
SEARCH_HOST_SWITCH = "external-memory.search"
INGEST_HOST_SWITCH = "external-memory.ingest"
_OFF = {"0", "false", "no", "off", "disabled"}
_log = logging.getLogger("mnemon.sources.nexent")

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Nexent memory provider",
    description="A Nexent external memory provider (plugin.yaml folder) hosted unchanged.",
    roles=["source"],
    provides=["memory.nexent"],
)

_EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": "durable-evidence",
    "capabilities": ["search", "write"],
    "consistency": "namespace-pinned-live-read",
    "routes": [
        {
            "id": "search",
            "description": "Search the external memory provider, best first.",
            "capability": "search",
            "input_schema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2_000},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            "max_calls": 3,
            "max_results": 100,
        }
    ],
    "actions": [
        {
            "id": "ingest",
            "description": "Hand memory units (messages, facts) to the external memory provider.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {
                    "units": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": memory_text_schema(20_000),
                                "unit_type": {"type": "string", "pattern": "^[a-z_]{1,32}$"},
                                "role": {"enum": ["user", "assistant", "tool", "system"]},
                            },
                            "required": ["content"],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["units"],
                "additionalProperties": False,
            },
        }
    ],
    "management": {
        "label": "Nexent memory provider",
        "description": "See the provider's state (secrets masked), re-enable it after a refusal.",
        "operations": [
            {"id": "status", "kind": "read", "description": "The provider's state.",
             "input_schema": _EMPTY},
            {"id": "enable", "kind": "mutate",
             "description": "Re-enable the provider after an access refusal disabled it.",
             "input_schema": _EMPTY},
        ],
    },
}  # fmt: skip


def switched_on(variable: str) -> bool:
    """Whether a deployment-wide switch (`EXTERNAL_MEMORY_*_ENABLED`) leaves its side on."""
    return os.environ.get(variable, "true").strip().lower() not in _OFF


def _identity(scope: Scope) -> dict[str, str] | None:
    """The request ids of `scope`; None when it has neither a tenant nor a user."""
    if scope.tenant_id is None and scope.user_id is None:
        return None
    ids = {
        "tenant_id": scope.tenant_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "conversation_id": scope.session_id,
    }
    return {name: value for name, value in ids.items() if value is not None}


def _read_state(path: Path) -> dict[str, Any]:
    try:
        value = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    return value if isinstance(value, dict) else {}


def _revision(state: dict[str, Any]) -> str:
    """The instance's revision: its own state (the provider's data is read live)."""
    canonical = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
    return "state:" + hashlib.sha256(canonical).hexdigest()[:32]


def _write_state(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)


class NexentSource:
    """One provider of one plugin folder; rebuilt when its folder changes, no restart needed."""

    def __init__(
        self,
        key: str,
        settings: NexentConfiguration,
        state_file: Path,
        switches: Mapping[str, bool] | None = None,
    ) -> None:
        self._key = key
        self._settings = settings
        self._host_switches = dict(switches or {})
        self._name = str(settings.plugin.get("name", ""))
        self._plugin_config = {k: v for k, v in settings.plugin.items() if k != "name"}
        self._directory = ProviderDirectory(settings.plugin_dir)
        self._state_file = state_file
        self._lock = anyio.Lock()
        self._record: PluginRecord | None = None
        self._provider: Any = None
        self._problem: str | None = None

    # ------------------------------------------------------------------ provider

    async def _current(self) -> tuple[Any, PluginRecord | None, str | None]:
        """The provider built from the plugin folder as it is now, or why there is none."""
        async with self._lock:
            await run_blocking(self._directory.refresh)
            record = self._directory.plugins.get(self._name)
            if record is None:
                self._record, self._provider = None, None
                return None, None, "provider-not-found"
            if self._record is None or record.fingerprint != self._record.fingerprint:
                self._record, self._provider, self._problem = record, None, None
                missing = [
                    f.key for f in record.config_schema
                    if f.required and f.key not in self._plugin_config and f.default is None
                ]  # fmt: skip
                if missing:
                    self._problem = "provider-misconfigured"
                else:
                    config = {
                        **{f.key: f.default for f in record.config_schema if f.default is not None},
                        **self._plugin_config,
                    }
                    if self._settings.nexent_shim:
                        install_nexent_shim()
                    try:
                        provider, problems = await run_blocking(build_provider, record, config)
                    except Exception:
                        _log.debug("Nexent plugin %s failed to load", self._name, exc_info=True)
                        provider, problems = None, ["import_failed"]
                    self._provider = provider
                    self._problem = "provider-invalid" if problems else None
            return self._provider, self._record, self._problem

    async def _state(self) -> dict[str, Any]:
        return await run_blocking(_read_state, self._state_file)

    def _switches(self, record: PluginRecord) -> tuple[bool, bool]:
        settings = self._settings
        host = self._host_switches
        search = (
            "searchable" in record.implements
            and settings.search_enabled
            and switched_on(SEARCH_SWITCH)
            and host.get(SEARCH_HOST_SWITCH, True)
        )
        ingest = (
            "ingestible" in record.implements
            and settings.ingest_enabled
            and switched_on(INGEST_SWITCH)
            and host.get(INGEST_HOST_SWITCH, True)
        )
        return search, ingest

    # ------------------------------------------------------------------ Source

    def _facts(self, availability: str, reason: str | None = None, **extra: Any) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role="durable-evidence",
            availability=availability,  # type: ignore[arg-type]
            reason=reason,
            **extra,
        )

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """What this provider offers now: switches, access state and the plugin's own state."""
        if not self._settings.enabled:
            return self._facts("unavailable", "provider-disabled")
        ids = _identity(request.scope)
        if ids is None:
            return self._facts("unavailable", "missing-scope")
        state = await self._state()
        if state.get("disabled"):
            # with the revision management fences `enable` on
            return self._facts("unavailable", "provider-access-revoked", revision=_revision(state))
        provider, record, problem = await self._current()
        if provider is None or record is None:
            return self._facts("unavailable", problem or "provider-invalid")
        search, ingest = self._switches(record)
        if not search and not ingest:
            return self._facts("unavailable", "external-memory-switched-off")
        offered = {"search": search, "ingest": ingest}
        implemented = {
            "search": "searchable" in record.implements,
            "ingest": "ingestible" in record.implements,
        }
        off = [name for name in ("search", "ingest") if implemented[name] and not offered[name]]
        return self._facts(
            "degraded" if off else "ready",
            f"{off[0]}-switched-off" if off else None,
            revision=_revision(state),
            capabilities=tuple(c for c, on in (("search", search), ("write", ingest)) if on),
            route_ids=("search",) if search else (),
            action_ids=("ingest",) if ingest else (),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Nothing eager; the grant pins whose memory the route reads."""
        ids = _identity(request.scope)
        if ids is None:
            raise SourceError("invalid_payload", "the scope has neither a tenant nor a user")
        return ViewContribution(
            grant=ReadGrant(source_key=self._key, value=ids), revision=request.expected_revision
        )

    async def _call(self, method: str, payload: Any) -> Any:
        provider, _, problem = await self._current()
        if provider is None:
            raise SourceError("provider_error", f"the Nexent provider is unavailable ({problem})")

        async def call() -> Any:
            try:
                return await getattr(provider, method)(payload)
            except _ProviderException as failure:
                raise source_error(failure, f"the Nexent provider {method}") from None

        try:
            return await guarded_call(
                call,
                subject=f"the Nexent provider {method}",
                timeout=self._settings.timeout_seconds,
            )
        except SourceError as error:
            if error.kind == "access":
                await self._disable(error.origin_code or error.code)
            raise

    async def _disable(self, code: str) -> None:
        """An access refusal disables the instance until an operator re-enables it."""
        state = orjson.dumps({"disabled": code, "at": datetime.now(UTC).isoformat()})
        try:
            await run_blocking(_write_state, self._state_file, state)
        except OSError:
            # the refusal itself is what the caller must see; the next refusal tries again
            _log.warning("Memory Source %s could not record its access refusal", self._key)
            return
        _log.warning("Memory Source %s disabled after an access refusal (%s)", self._key, code)

    async def query(self, request: QueryRequest) -> Evidence:
        """Search for the pinned identity; results keep the provider's own score scale."""
        ids = {k: str(v) for k, v in request.grant.value.items()}
        top_k = int(request.input.get("top_k", 10))
        if request.route.max_results is not None:
            top_k = min(top_k, request.route.max_results)
        search = MemorySearchRequest.model_validate(
            {"query": str(request.input["query"]), "top_k": top_k, **ids}
        )
        found = await self._call("search", search)
        if not isinstance(found, list | tuple) or not all(
            isinstance(r, MemorySearchResult) for r in found
        ):
            raise SourceError(
                "schema_mismatch", "search must return MemorySearchResult items",
                origin_code="schema_mismatch",
            )  # fmt: skip
        items = [
            EvidenceItem(
                id=result.external_id[:512] or "unnamed",
                text=(
                    result.content
                    if request.route.max_characters is None
                    else truncate_text(result.content, request.route.max_characters)
                ),
                provenance={
                    "provider": self._name,
                    "external_id": result.external_id,
                    "score": result.score,
                    # never compared with another Source's scores
                    "score_scale": "provider-native",
                },
            )
            for result in found[:top_k]
        ]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(items),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Ingest units; per-unit outcomes go into the receipt's detail."""
        ids = _identity(request.view.scope)
        if ids is None:
            raise SourceError("invalid_payload", "the scope has neither a tenant nor a user")
        units = tuple(
            MemoryIngestUnit(
                unit_id=f"u{index}",
                content=unit["content"],
                unit_type=unit.get("unit_type", "message"),
                role=unit.get("role"),
            )
            for index, unit in enumerate(request.input["units"])
        )
        key = (
            request.idempotency_key
            or "mnemon:"
            + hashlib.sha256(
                orjson.dumps(
                    [request.view.id, request.offer.id, request.input], option=orjson.OPT_SORT_KEYS
                )
            ).hexdigest()
        )
        ingest = MemoryIngestRequest(idempotency_key=key, units=units, **ids)
        removed: tuple[str, ...] = ()
        try:
            result = await self._call("ingest", ingest)
        except SourceError as error:
            # a degradable failure (whatever its code) names the units the provider refuses
            cause = error.__context__
            if not isinstance(cause, DegradableProviderError) or not cause.removable_units:
                raise
            # the provider named the units it cannot take: the rest go ahead once, same key
            removed = cause.removable_units
            kept = tuple(u for u in units if u.unit_id not in removed)
            if not kept:
                raise
            result = await self._call("ingest", ingest.model_copy(update={"units": kept}))
        if not isinstance(result, MemoryIngestResult):
            raise SourceError("schema_mismatch", "ingest must return a MemoryIngestResult")
        outcomes = list(result.units) + [
            UnitIngestResult(unit_id=unit_id, status=UnitIngestStatus.DEGRADED)
            for unit_id in removed
        ]
        detail: dict[str, Any] = {
            "provider": self._name,
            "units": [
                {"unit_id": u.unit_id, "status": u.status.value}
                | ({"error_code": u.error.code.value} if u.error is not None else {})
                for u in outcomes
            ],
        }
        if result.error is not None:
            detail["origin_code"] = result.error.code.value
        status = "partial" if removed and result.status == "ok" else result.status
        if status == "ok":
            return create_mutation_receipt(
                request,
                completion="committed",
                committed_at=datetime.now(UTC).isoformat(),
                detail=detail,
            )
        if status == "partial":
            return create_mutation_receipt(
                request, completion="partial", status="partial", detail=detail
            )
        return create_mutation_receipt(request, completion="failed", detail=detail)

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """`status` (secrets masked) or `enable` (clears an access refusal, revision-fenced)."""
        async with self._lock:
            state = await self._state()
            revision = _revision(state)
            if request.operation.id == "enable":
                if request.expected_revision != revision:
                    raise RevisionConflict(f"revision conflict: the state is at {revision}")
                await run_blocking(_write_state, self._state_file, b"{}")
                state = {}
                revision = _revision(state)
        _, record, problem = await self._current()
        secrets = {f.key for f in record.config_schema if f.type == "secret"} if record else set()
        config = {
            key: mask_secret(value) if key in secrets else value
            for key, value in self._plugin_config.items()
        }
        output = {
            "plugin": self._name,
            "version": record.version if record else None,
            "problem": problem,
            "disabled": state.get("disabled"),
            "config": config,
            "problems": [
                {"folder": p.folder, "code": p.code, "field": p.field}
                for p in self._directory.problems
            ],
        }
        return ManagementResult(
            source_key=self._key, operation=request.operation.id, output=output, revision=revision
        )


async def _create(init: SourceInit) -> NexentSource:
    settings = read_settings(init)
    if not isinstance(settings.plugin.get("name"), str) or not settings.plugin["name"]:
        raise DefinitionError("nexent-provider configuration.plugin.name: the plugin's name")
    data_dir = None if settings.data_dir is None else str(settings.data_dir)
    state_file = source_data_directory(init, data_dir) / "state.json"
    return NexentSource(init.instance_key, settings, state_file, init.switches)


NEXENT_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one `nexent-provider` Source for this entry."""
    install_memory(ctx, sources=[NEXENT_SOURCE])
