"""The `nexent-provider` Source: one Nexent provider as a `search` route and an `ingest` action.

As in Nexent, a provider instance belongs to a tenant: each tenant the scopes name gets its own
instance, built from the entry's parameters and the tenant's own (`tenants`), with its own
`enabled` switch and its own access state.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
from pydantic import ValidationError

from mnemon.sdk import (
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
    SourceTelemetry,
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
from mnemon.sdk.storage import write_atomically

from . import models
from ._config import NexentConfiguration, mask_secret, read_settings
from ._failures import ProviderFailure, provider_failure, source_error
from ._loader import PluginRecord, ProviderDirectory, build_provider, config_problems
from ._shim import install_nexent_shim

__all__ = ["NEXENT_SOURCE", "NexentSource", "apply", "memory_plugin", "switched_on"]

PACKAGE = "mnemon-source-nexent"
TYPE_ID = "nexent-provider"
SEARCH_SWITCH = "EXTERNAL_MEMORY_SEARCH_ENABLED"
INGEST_SWITCH = "EXTERNAL_MEMORY_INGEST_ENABLED"
# the same two switches as host settings (`HostSettings.switches`, a profile's `[switches]`)
SEARCH_HOST_SWITCH = "external-memory.search"
INGEST_HOST_SWITCH = "external-memory.ingest"
#: The span name (and metric prefix) of every provider call, as Nexent names it.
SPAN_NAME = "nexent.memory.external_provider"
_OFF = {"0", "false", "no", "off", "disabled"}
# a unit's `unit_type` from the role of the message it carries, in Nexent's vocabulary
_UNIT_TYPE_OF_ROLE = {"user": "user", "assistant": "agent", "tool": "tool", "system": "summary"}
_INGEST_STATUSES = ("ok", "partial", "degraded", "error")
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
    # Nexent's requests always name a user
    "partition_keys": ["user_id"],
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
                    "filters": {
                        "type": "object",
                        "description": "Provider-specific filters, passed on as they are.",
                        "maxProperties": 16,
                        "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"},
                        "additionalProperties": {
                            "anyOf": [
                                {"type": ["string", "number", "boolean"]},
                                {
                                    "type": "array",
                                    "maxItems": 32,
                                    "items": {"type": ["string", "number", "boolean"]},
                                },
                            ]
                        },
                    },
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
                                "event_type": {"type": "string", "pattern": "^[a-z_.]{1,64}$"},
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
        # what `mnemon import` can hand over; the provider's memory cannot be listed back
        "records": [
            {
                "id": "memory",
                "label": "Memory handed to the provider",
                "description": "A memory ingested as one unit; the provider decides what it keeps.",
                "record_schema": {
                    "type": "object",
                    "properties": {
                        "text": memory_text_schema(20_000),
                        "unit_type": {"type": "string", "pattern": "^[a-z_]{1,32}$"},
                    },
                    "required": ["text"],
                },
                "writable": True,
                "key_fields": ["text"],
            }
        ],
    },
}  # fmt: skip


def switched_on(variable: str) -> bool:
    """Whether a deployment-wide switch (`EXTERNAL_MEMORY_*_ENABLED`) leaves its side on."""
    return os.environ.get(variable, "true").strip().lower() not in _OFF


def _identity(scope: Scope) -> dict[str, str] | None:
    """The request ids of `scope`, as Nexent's requests carry them; None without a user.

    Nexent's requests always name a tenant and a user: a scope without a tenant sends an empty
    `tenant_id`, and its instance is the entry's own.
    """
    if scope.user_id is None:
        return None
    ids = {
        "tenant_id": scope.tenant_id or "",
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "conversation_id": scope.session_id,
    }
    return {name: value for name, value in ids.items() if value is not None}


def _wire_models() -> Any:
    """The models requests are built from: the real Nexent's when installed, else these."""
    try:
        return importlib.import_module("nexent.memory.models")
    except ImportError:
        return models


def _accepts(method: Any, name: str) -> bool:
    """Whether `method` takes the keyword argument `name` (or any keyword)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _read_state(path: Path) -> dict[str, Any]:
    try:
        value = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    return value if isinstance(value, dict) else {}


def _instance_state(state: Mapping[str, Any], tenant: str) -> dict[str, Any]:
    """One instance's state: its own, or a refusal recorded when one state served every tenant."""
    instances = state.get("instances")
    own = instances.get(tenant) if isinstance(instances, dict) else None
    if isinstance(own, dict):
        return own
    if "disabled" in state:  # one state for every tenant, from an earlier version
        return {"disabled": state["disabled"], "at": state.get("at")}
    return {}


def _revision(state: dict[str, Any]) -> str:
    """An instance's revision: its own state (the provider's data is read live)."""
    canonical = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
    return "state:" + hashlib.sha256(canonical).hexdigest()[:32]


def _write_state(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)


def _event_id(key: str, index: int) -> str:
    """A unit's `event_id`: the same for the same write and unit, so a retry deduplicates."""
    return "evt-" + hashlib.sha256(f"{key}\0{index}".encode()).hexdigest()[:32]


def _answer_error(message: str) -> SourceError:
    """A provider answer that breaks the contract; the provider ran, so a write may have landed."""
    return SourceError(
        "schema_mismatch", message, nothing_written=False, origin_code="schema_mismatch"
    )


def _search_results(found: Any) -> list[models.MemorySearchResult]:
    """The provider's results read by attribute, or a `schema_mismatch`."""
    if not isinstance(found, list | tuple):
        raise _answer_error("search must return a list of MemorySearchResult")
    try:
        return [
            models.MemorySearchResult.model_validate(result, from_attributes=True)
            for result in found
        ]
    except ValidationError:
        raise _answer_error(
            "a search result lacks a field of MemorySearchResult or has the wrong type"
        ) from None


def _ingest_result(result: Any, units: list[Any]) -> models.MemoryIngestResult:
    """The provider's answer read by attribute and checked against the units it was given.

    One `UnitIngestResult` per unit, each naming a unit by its `event_id` once, and
    `accepted_count`/`rejected_count` equal to what the unit results say.
    """
    try:
        read = models.MemoryIngestResult.model_validate(result, from_attributes=True)
    except ValidationError:
        raise _answer_error(
            "ingest must return a MemoryIngestResult (provider, status, counts, unit_results)"
        ) from None
    if read.status not in _INGEST_STATUSES:
        raise _answer_error("ingest status must be ok, partial, degraded or error")
    named = [unit.unit_id for unit in read.unit_results]
    if sorted(named) != sorted(unit.event_id for unit in units):
        raise _answer_error(
            f"ingest must return one unit result per unit, named by its event_id "
            f"({len(units)} sent, {len(named)} returned)"
        )
    accepted = sum(u.status == models.UnitIngestStatus.ACCEPTED for u in read.unit_results)
    rejected = sum(u.status == models.UnitIngestStatus.REJECTED for u in read.unit_results)
    if (read.accepted_count, read.rejected_count) != (accepted, rejected):
        raise _answer_error(
            "ingest counts disagree with its unit results "
            f"(accepted_count {read.accepted_count} for {accepted} accepted, "
            f"rejected_count {read.rejected_count} for {rejected} rejected)"
        )
    return read


@dataclass
class _Instance:
    """One tenant's provider, built from one version of the plugin folder and parameters."""

    fingerprint: str
    provider: Any
    problem: str | None
    enabled: bool = True
    timeout: float = 10.0


class NexentSource:
    """One provider of one plugin folder: an instance per tenant, rebuilt as the folder changes."""

    def __init__(
        self,
        key: str,
        settings: NexentConfiguration,
        state_file: Path,
        switches: Mapping[str, bool] | None = None,
        telemetry: SourceTelemetry | None = None,
    ) -> None:
        self._key = key
        self._settings = settings
        self._host_switches = dict(switches or {})
        self._telemetry = telemetry
        self._name = str(settings.plugin.get("name", ""))
        self._directory = ProviderDirectory(settings.plugin_dir)
        self._state_file = state_file
        self._lock = anyio.Lock()
        self._instances: dict[str, _Instance] = {}
        self._wire: Any = None

    # ------------------------------------------------------------------ provider

    async def _instance(self, tenant: str) -> tuple[_Instance | None, PluginRecord | None, str]:
        """`tenant`'s instance built from the plugin folder as it is now, or why there is none."""
        served = self._settings.instance(tenant or None)
        if served is None:
            return None, None, "tenant-not-configured"
        parameters, enabled, timeout = served
        async with self._lock:
            await run_blocking(self._directory.refresh)
            record = self._directory.plugins.get(self._name)
            if record is None:
                self._instances.pop(tenant, None)
                # a plugin folder of that name that is broken says why, with its own code
                broken = [p for p in self._directory.problems if self._name in (p.name, p.folder)]
                if broken:
                    return None, None, "provider-" + broken[0].code.replace("_", "-")
                return None, None, "provider-not-found"
            config = {
                **{f.key: f.default for f in record.config_schema if f.default is not None},
                **{k: v for k, v in parameters.items() if k != "name"},
                # as Nexent's build_provider does: the instance's own limit
                "timeout_seconds": timeout,
            }
            fingerprint = (
                record.fingerprint
                + hashlib.sha256(
                    orjson.dumps(config, option=orjson.OPT_SORT_KEYS, default=str)
                ).hexdigest()
            )
            known = self._instances.get(tenant)
            if known is None or known.fingerprint != fingerprint:
                known = await self._build(record, config, fingerprint)
                self._instances[tenant] = known
            known.enabled, known.timeout = enabled, timeout
            return known, record, known.problem or ""

    async def _build(
        self, record: PluginRecord, config: dict[str, Any], fingerprint: str
    ) -> _Instance:
        problems = config_problems(record, config)
        if problems:
            # the keys, never their values
            _log.warning(
                "Memory Source %s: the Nexent plugin %s is misconfigured: %s",
                self._key, self._name, "; ".join(problems),
            )  # fmt: skip
            return _Instance(fingerprint, None, "provider-misconfigured")
        if self._settings.nexent_shim:
            install_nexent_shim()
        if self._wire is None:
            self._wire = await run_blocking(_wire_models)
        try:
            provider, problems = await run_blocking(build_provider, record, config)
        except Exception:
            _log.debug("Nexent plugin %s failed to load", self._name, exc_info=True)
            return _Instance(fingerprint, None, "provider-invalid")
        if problems:
            _log.warning(
                "Memory Source %s: the Nexent plugin %s cannot be used (%s)",
                self._key, self._name, ", ".join(problems),
            )  # fmt: skip
            return _Instance(fingerprint, None, "provider-invalid")
        return _Instance(fingerprint, provider, None)

    async def _state(self, tenant: str) -> dict[str, Any]:
        return _instance_state(await run_blocking(_read_state, self._state_file), tenant)

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
        """What this tenant's provider offers now: switches, access state and the plugin's state."""
        ids = _identity(request.scope)
        if ids is None:
            return self._facts("unavailable", "missing-scope")
        tenant = ids["tenant_id"]
        instance, record, problem = await self._instance(tenant)
        if instance is not None and not instance.enabled:
            return self._facts("unavailable", "provider-disabled")
        state = await self._state(tenant)
        if state.get("disabled"):
            # with the revision management fences `enable` on
            return self._facts("unavailable", "provider-access-revoked", revision=_revision(state))
        if instance is None or instance.provider is None or record is None:
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
            raise SourceError("invalid_payload", "the scope has no user")
        return ViewContribution(
            grant=ReadGrant(source_key=self._key, value=ids), revision=request.expected_revision
        )

    async def _provider(self, tenant: str) -> _Instance:
        """The tenant's instance with its provider built, or a `provider_error`."""
        instance, _, problem = await self._instance(tenant)
        if instance is None or instance.provider is None:
            raise SourceError("provider_error", f"the Nexent provider is unavailable ({problem})")
        return instance

    async def _call(
        self, instance: _Instance, tenant: str, method: str, payload: Any, **arguments: Any
    ) -> tuple[Any, float]:
        """Call the tenant's provider within its timeout; its failures by Nexent's table."""
        subject = f"the Nexent provider {method}"
        function = getattr(instance.provider, method)

        async def call() -> Any:
            try:
                return await function(payload, **arguments)
            except Exception as exc:
                failure = provider_failure(exc)
                if failure is None:
                    raise
                # the class and the code, never the provider's message
                _log.debug(
                    "%s raised %s (origin code %s)", subject, failure.class_name, failure.code.value
                )
                # passes `guarded_call` as it is; the failure read rides along as its cause
                raise source_error(failure, subject) from _NexentFailure(failure)

        started = time.perf_counter()
        try:
            answer = await guarded_call(call, subject=subject, timeout=instance.timeout)
        except SourceError as error:
            self._observe(method, started, error)
            if error.kind == "access":
                await self._disable(tenant, error.origin_code or error.code)
            raise
        return answer, started

    def _observe(
        self,
        operation: str,
        started: float,
        error: SourceError | None = None,
        counts: Mapping[str, int] | None = None,
    ) -> None:
        if self._telemetry is None:
            return
        attributes = {"provider": self._name} if _LABEL.fullmatch(self._name) else {}
        self._telemetry.record(
            SPAN_NAME,
            operation=operation,
            outcome="ok" if error is None else "failed",
            error_code=None if error is None else (error.origin_code or error.code),
            duration=time.perf_counter() - started,
            counts=counts,
            attributes=attributes,
        )

    async def _disable(self, tenant: str, code: str) -> None:
        """An access refusal disables the tenant's instance until an operator re-enables it."""
        async with self._lock:
            state = await run_blocking(_read_state, self._state_file)
            instances = dict(state.get("instances") or {})
            instances[tenant] = {"disabled": code, "at": datetime.now(UTC).isoformat()}
            data = orjson.dumps({**state, "instances": instances}, option=orjson.OPT_SORT_KEYS)
            try:
                await run_blocking(_write_state, self._state_file, data)
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
        wire = self._wire or models
        search = wire.MemorySearchRequest(
            query=str(request.input["query"]), top_k=top_k, limit=top_k, **ids
        )
        tenant = ids.get("tenant_id", "")
        instance = await self._provider(tenant)
        arguments: dict[str, Any] = {"limit": top_k}
        filters = request.input.get("filters")
        if _accepts(instance.provider.search, "filters"):
            arguments["filters"] = dict(filters) if filters is not None else None
        elif filters is not None:
            raise SourceError(
                "invalid_payload", "this provider's search takes no filters; search without"
            )
        found, started = await self._call(instance, tenant, "search", search, **arguments)
        try:
            results = _search_results(found)
        except SourceError as error:
            self._observe("search", started, error)
            # this package's own words (counts, field names), never the provider's data
            _log.warning("Memory Source %s: the Nexent provider's answer: %s", self._key, error)
            raise
        self._observe("search", started, counts={"results": len(results)})
        # each item within the route's per-item ceiling: an excerpt says so, a longer item
        # would be left out whole
        limit = request.route.max_item_characters
        items = [
            EvidenceItem(
                id=_item_id(result),
                text=truncate_text(result.content, limit),
                provenance={
                    "provider": self._name,
                    "source": result.source[:128],
                    "is_external": result.is_external,
                    "external_id": result.external_id,
                    "score": result.score,
                    # never compared with another Source's scores
                    "score_scale": "provider-native",
                }
                | ({"excerpt": True} if len(result.content) > limit else {}),
            )
            for result in results[:top_k]
        ]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(items),
        )

    async def _ingest(
        self, ids: dict[str, str], key: str, units_in: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> tuple[str, dict[str, str]]:
        """Ingest `(event_id, unit)` pairs under `key`: the provider's status, and each unit's.

        A degradable failure naming the units the provider cannot take sends the rest once
        more, with the same key, as Nexent does; the dropped ones are `degraded`.

        Raises:
            SourceError: the provider failed, or its answer breaks the contract.
        """
        wire = self._wire or models
        units = [
            wire.MemoryIngestUnit(
                event_id=event_id,
                event_type=unit.get("event_type", "message"),
                unit_type=unit.get("unit_type")
                or _UNIT_TYPE_OF_ROLE.get(unit.get("role", "user"), "user"),
                unit_content=unit["content"],
                unit_index=index,
                metadata={"role": unit["role"]} if "role" in unit else {},
            )
            for index, (event_id, unit) in enumerate(units_in)
        ]
        ingest = wire.MemoryIngestRequest(idempotency_key=key, units=units, **ids)
        tenant = ids["tenant_id"]
        instance = await self._provider(tenant)
        dropped: list[str] = []
        try:
            answer, started = await self._call(instance, tenant, "ingest", ingest)
        except SourceError as error:
            failure = getattr(error.__cause__, "failure", None)
            if not isinstance(failure, ProviderFailure) or not failure.removable_units:
                raise
            dropped = [u.event_id for u in units if u.event_id in failure.removable_units]
            units = [u for u in units if u.event_id not in failure.removable_units]
            if not units or not dropped:
                raise
            ingest = wire.MemoryIngestRequest(idempotency_key=key, units=units, **ids)
            answer, started = await self._call(instance, tenant, "ingest", ingest)
        try:
            result = _ingest_result(answer, units)
        except SourceError as error:
            self._observe("ingest", started, error)
            # this package's own words (counts, field names), never the provider's data
            _log.warning("Memory Source %s: the Nexent provider's answer: %s", self._key, error)
            raise
        outcomes = {u.unit_id: u.status.value for u in result.unit_results}
        outcomes.update(dict.fromkeys(dropped, "degraded"))
        counted = _counted(outcomes)
        self._observe("ingest", started, counts={f"units_{k}": v for k, v in counted.items()})
        return result.status, outcomes

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Ingest units; the receipt never says more than every unit's result does."""
        ids = _identity(request.view.scope)
        if ids is None:
            raise SourceError("invalid_payload", "the scope has no user")
        key = (
            request.idempotency_key
            or "mnemon:"
            + hashlib.sha256(
                orjson.dumps(
                    [request.view.id, request.offer.id, request.input], option=orjson.OPT_SORT_KEYS
                )
            ).hexdigest()
        )
        given = request.input["units"]
        status, outcomes = await self._ingest(
            ids, key, [(_event_id(key, index), unit) for index, unit in enumerate(given)]
        )
        events = [_event_id(key, index) for index in range(len(given))]
        counted = _counted(outcomes)
        detail: dict[str, Any] = {
            "provider": self._name,
            "status": status,
            "accepted_count": counted["accepted"],
            "rejected_count": counted["rejected"],
            "units": [
                {"unit_index": index, "event_id": event_id, "status": outcomes[event_id]}
                for index, event_id in enumerate(events)
            ],
        }
        if counted["accepted"] == len(events):
            # the provider took every unit; how far it indexes them is its own affair
            return create_mutation_receipt(request, completion="accepted", detail=detail)
        if counted["accepted"] or counted["degraded"]:
            return create_mutation_receipt(
                request, completion="partial", status="partial", detail=detail
            )
        return create_mutation_receipt(request, completion="failed", detail=detail)

    async def _write_records(self, request: ManageRequest) -> ManagementResult:
        """`records-write` of `memory` records: one ingest, a unit per record, keyed by it.

        Each unit's `event_id` comes from its record's idempotency key, so importing the same
        records again names the same events. An accepted unit is `accepted` (the provider does
        not confirm durability); a rejected or degraded one is refused with that code.
        """
        ids = _identity(request.scope)
        if ids is None:
            raise SourceError("invalid_payload", "the scope has no user")
        items = request.input["records"]
        keys = [str(item["idempotency_key"]) for item in items]
        units = [
            (_event_id(key, 0), {"content": item["record"]["text"]} | _unit_type(item["record"]))
            for key, item in zip(keys, items, strict=True)
        ]
        batch = "records:" + hashlib.sha256("\0".join(keys).encode()).hexdigest()
        _, outcomes = await self._ingest(ids, batch, units)
        results: list[dict[str, Any]] = []
        for index, (event_id, _) in enumerate(units):
            status = outcomes[event_id]
            if status == "accepted":
                results.append({"index": index, "completion": "accepted"})
            else:
                message = f"the provider's answer for this record: {status}"
                results.append(
                    {"index": index, "completion": "refused", "code": status, "message": message}
                )
        return ManagementResult(
            source_key=self._key, operation="records-write", output={"results": results}
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """`status` (secrets masked), `enable` (revision-fenced), or `records-write`.

        `enable` clears an access refusal; `records-write` hands memories over as ingest units.
        """
        if request.operation.id == "records-write":
            return await self._write_records(request)
        tenant = request.scope.tenant_id or ""
        async with self._lock:
            whole = await run_blocking(_read_state, self._state_file)
            state = _instance_state(whole, tenant)
            revision = _revision(state)
            if request.operation.id == "enable":
                if request.expected_revision != revision:
                    raise RevisionConflict(f"revision conflict: the state is at {revision}")
                instances = dict(whole.get("instances") or {})
                instances[tenant] = {}
                data = orjson.dumps({"instances": instances}, option=orjson.OPT_SORT_KEYS)
                await run_blocking(_write_state, self._state_file, data)
                state = {}
                revision = _revision(state)
        instance, record, problem = await self._instance(tenant)
        parameters = (self._settings.instance(tenant or None) or ({}, False, 0.0))[0]
        output = {
            "plugin": self._name,
            "version": record.version if record else None,
            "problem": problem or None,
            "enabled": instance.enabled if instance is not None else None,
            "disabled": state.get("disabled"),
            "config": _shown(parameters, record),
            "problems": [
                {"folder": p.folder, "code": p.code, "field": p.field}
                for p in self._directory.problems
            ],
        }
        return ManagementResult(
            source_key=self._key, operation=request.operation.id, output=output, revision=revision
        )


_UNIT_STATUSES = ("accepted", "rejected", "degraded")


def _counted(outcomes: Mapping[str, str]) -> dict[str, int]:
    """How many units ended in each status."""
    return {status: sum(s == status for s in outcomes.values()) for status in _UNIT_STATUSES}


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class _NexentFailure(Exception):
    """What a provider's Nexent exception said: the cause of the `SourceError` it became."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.code.value)
        self.failure = failure


def _unit_type(record: Mapping[str, Any]) -> dict[str, str]:
    return {"unit_type": str(record["unit_type"])} if "unit_type" in record else {}


def _item_id(result: models.MemorySearchResult) -> str:
    if result.external_id:
        return result.external_id[:512]
    if result.memory_id is not None:
        return f"memory-{result.memory_id}"
    return "sha256:" + hashlib.sha256(result.content.encode()).hexdigest()[:32]


def _shown(parameters: Mapping[str, Any], record: PluginRecord | None) -> dict[str, Any]:
    """The parameters as a person may see them: only declared, non-secret values in clear.

    Without the plugin's schema (a broken `plugin.yaml`, a misspelt `plugin.name`) nothing says
    which value is a credential, so every value is masked.
    """
    clear = {f.key for f in record.config_schema if not f.secret} if record else set()
    clear.add("name")
    return {key: value if key in clear else mask_secret(value) for key, value in parameters.items()}


async def _create(init: SourceInit) -> NexentSource:
    settings = read_settings(init)
    if not isinstance(settings.plugin.get("name"), str) or not settings.plugin["name"]:
        raise DefinitionError("nexent-provider configuration.plugin.name: the plugin's name")
    data_dir = None if settings.data_dir is None else str(settings.data_dir)
    state_file = source_data_directory(init, data_dir) / "state.json"
    telemetry = init.telemetry if isinstance(init.telemetry, SourceTelemetry) else None
    return NexentSource(init.instance_key, settings, state_file, init.switches, telemetry)


NEXENT_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one `nexent-provider` Source for this entry."""
    install_memory(ctx, sources=[NEXENT_SOURCE])
