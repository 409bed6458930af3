"""The `raven-backend` Source: one Raven `MemoryBackend` as routed recall, store and feedback."""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import anyio

from mnemon import (
    DefinitionError,
    Evidence,
    EvidenceItem,
    FactsRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    memory_text_schema,
    read_configuration,
    source_data_directory,
    truncate_text,
)

from ._config import RavenConfiguration
from ._contract import BackendContext, BackendServices, Memory, MemoryBackend
from ._failures import backend_call
from ._resolve import resolve_backend_factory

__all__ = ["RAVEN_SOURCE", "RavenSource", "apply", "backend_identity", "memory_plugin"]

PACKAGE = "mnemon-source-raven"
TYPE_ID = "raven-backend"
MAX_TEXT = 20_000
_log = logging.getLogger("mnemon.sources.raven")
# the host's switches for external memory (`HostSettings.switches`), as the Nexent Source has
SEARCH_SWITCH = "external-memory.search"
INGEST_SWITCH = "external-memory.ingest"

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Raven memory backend",
    description="A Raven MemoryBackend hosted unchanged: recall by user or agent, store, feedback.",
    roles=["source"],
    provides=["memory.raven"],
)

_OPTIONAL_ID = {"type": "string", "minLength": 1, "maxLength": 300}
# Raven's contract leaves a signal's keys to the backend: this is the one kind the model may send
SIGNAL_TYPES = ("memory_usage",)
# (identity, memory id) pairs recall returned, newest last; a digest each keeps this small
RECALLED_KEPT = 10_000
NOT_RECALLED = "memory-not-recalled"
MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": "durable-evidence",
    "capabilities": ["recall", "write"],
    # the backend reads live: a grant pins whose memory is read, not a snapshot of it
    "consistency": "namespace-pinned-live-read",
    "routes": [
        {
            "id": "recall",
            "description": "Recall memories relevant to a query, best first.",
            "capability": "recall",
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
            "id": "store",
            "description": "Hand this conversation's messages to long-term memory.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {
                    "messages": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {
                                "role": {"enum": ["user", "assistant", "tool", "system"]},
                                "content": memory_text_schema(MAX_TEXT),
                            },
                            "required": ["role", "content"],
                            "additionalProperties": False,
                        },
                    },
                    "app_id": _OPTIONAL_ID,
                    "project_id": _OPTIONAL_ID,
                    "is_final": {"type": "boolean"},
                },
                "required": ["messages"],
                "additionalProperties": False,
            },
        },
        {
            "id": "feedback",
            "description": "Tell the memory which recalled items helped: one signal per item, "
            "naming the id recall gave it.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {
                    "signals": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {
                                "type": {"enum": list(SIGNAL_TYPES)},
                                "memory_id": {"type": "string", "minLength": 1, "maxLength": 512},
                                "helpful": {"type": "boolean"},
                            },
                            "required": ["type", "memory_id", "helpful"],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["signals"],
                "additionalProperties": False,
            },
        },
    ],
}


def backend_identity(scope: Scope, track: str) -> str | None:
    """The one id a backend receives for `scope` on `track`, or None when the scope lacks it.

    Without a tenant it is the scope's own user or agent id, so memory a backend already holds
    stays reachable. With a tenant it is `tenant=<tenant>;<track>=<id>` (both percent-encoded),
    so the same user in two tenants, or with and without one, never shares memory; an id
    without a tenant that itself starts with `tenant=` has no identity, for the same reason.
    """
    value = scope.user_id if track == "user" else scope.agent_id
    if value is None:
        return None
    if scope.tenant_id is None:
        return None if value.startswith("tenant=") else value
    return f"tenant={quote(scope.tenant_id, safe='')};{track}={quote(value, safe='')}"


class RavenSource:
    """One Raven backend behind mnemon's Source contract; started once, stopped at dispose."""

    def __init__(
        self,
        key: str,
        settings: RavenConfiguration,
        backend: MemoryBackend,
        name: str,
        switches: Mapping[str, bool] | None = None,
    ) -> None:
        self._key = key
        # the host's deployment-wide switches: external memory's reads and writes
        self._switches = dict(switches or {})
        self._settings = settings
        self._backend = backend
        self._name = name
        self._lock = anyio.Lock()
        # what recall returned to whom: feedback may name only those memories
        self._recalled: OrderedDict[bytes, None] = OrderedDict()
        self._started = False
        self._start_failed = False
        self._stopped = False

    async def _ensure_started(self) -> bool:
        """Start the backend on first use (never for a trial build); False when it failed."""
        if self._started:
            return True
        async with self._lock:
            if not self._started and not self._start_failed:
                try:
                    await backend_call(self._backend.start, subject="the Raven backend start")
                    self._started = True
                except SourceError:
                    self._start_failed = True
                    _log.warning("Memory Source %s: its Raven backend failed to start", self._key)
        return self._started

    def _identity(self, scope: Scope) -> str | None:
        return backend_identity(scope, self._settings.track)

    def _unavailable(self, reason: str) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role="durable-evidence",
            availability="unavailable",
            reason=reason,
        )

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Ready when the scope carries the track's id and the backend started."""
        identity = self._identity(request.scope)
        if identity is None:
            return self._unavailable("missing-identity")  # the backend is never called
        search = self._switches.get(SEARCH_SWITCH, True)
        ingest = self._switches.get(INGEST_SWITCH, True)
        if not search and not ingest:
            return self._unavailable("external-memory-switched-off")  # never started for it
        if not await self._ensure_started():
            if self._settings.on_failure == "reject":
                raise SourceError("provider_error", "the Raven backend failed to start")
            return self._unavailable("backend-start-failed")
        off = "search" if not search else "ingest" if not ingest else None
        offered: tuple[tuple[Literal["recall", "write"], bool], ...] = (
            ("recall", search),
            ("write", ingest),
        )
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role="durable-evidence",
            availability="degraded" if off else "ready",
            reason=f"{off}-switched-off" if off else None,
            revision="live:" + hashlib.sha256(identity.encode()).hexdigest()[:32],
            capabilities=tuple(capability for capability, on in offered if on),
            route_ids=("recall",) if search else (),
            action_ids=("store", "feedback") if ingest else (),
            hints={"track": self._settings.track},
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Nothing eager: recall needs a query. The grant pins whose memory routes read."""
        identity = self._identity(request.scope)
        if identity is None:
            raise SourceError("invalid_payload", "the scope lacks the track's id")
        return ViewContribution(
            grant=ReadGrant(source_key=self._key, value={"identity": identity}),
            revision=request.expected_revision,
        )

    async def query(self, request: QueryRequest) -> Evidence:
        """Recall from the backend for the pinned identity; results become evidence items."""
        identity = str(request.grant.value["identity"])
        top_k = min(int(request.input.get("top_k", self._settings.top_k)), self._settings.top_k)
        if request.route.max_results is not None:
            top_k = min(top_k, request.route.max_results)
        ids = {"user_id": identity} if self._settings.track == "user" else {"agent_id": identity}
        await self._require_started()
        found = await backend_call(
            _recall,
            self._backend,
            str(request.input["query"]),
            ids,
            top_k,
            subject="the Raven backend recall",
        )
        items = [self._item(memory, request.route.max_characters) for memory in found[:top_k]]
        for item in items:
            self._note_recalled(identity, item.id)
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(items),
        )

    def _item(self, memory: Memory, max_characters: int | None) -> EvidenceItem:
        stated = memory.metadata.get("id")
        if isinstance(stated, str | int) and not isinstance(stated, bool) and str(stated):
            item_id = str(stated)[:512]
        else:
            item_id = "sha256:" + hashlib.sha256(memory.text.encode()).hexdigest()[:32]
        text = memory.text if max_characters is None else truncate_text(memory.text, max_characters)
        return EvidenceItem(
            id=item_id,
            text=text,
            provenance={
                "backend": self._name,
                "track": self._settings.track,
                "score": float(memory.score),
                "score_scale": "normalized",
            },
        )

    def _note_recalled(self, identity: str, memory_id: str) -> None:
        key = _recalled_key(identity, memory_id)
        self._recalled[key] = None
        self._recalled.move_to_end(key)
        while len(self._recalled) > RECALLED_KEPT:
            self._recalled.popitem(last=False)

    def _feedback_signals(self, request: MutationRequest) -> list[dict[str, Any]]:
        """The signals to hand on, each bound to this scope's identity, or a refusal.

        The backend's `feedback(signals)` learns no identity, and its memory ids are its own
        (two users' stores may both hold `m0`), so it cannot tell whose memory a signal means:
        the host admits only ids this identity's recall returned, and names the identity.
        """
        identity = self._identity(request.view.scope)
        if identity is None:
            raise SourceError("invalid_payload", "the scope lacks the track's id")
        signals = []
        for index, signal in enumerate(request.input["signals"]):
            memory_id = str(signal["memory_id"])
            if _recalled_key(identity, memory_id) not in self._recalled:
                # the id is never quoted: it is the model's text
                raise SourceError(
                    NOT_RECALLED,
                    f"feedback signals[{index}].memory_id: recall did not return this memory "
                    "to this identity; only memories recall returned can be given feedback",
                    nothing_written=True,
                )
            signals.append(
                {
                    "type": str(signal["type"]),
                    "memory_id": memory_id,
                    "helpful": bool(signal["helpful"]),
                    f"{self._settings.track}_id": identity,  # from the scope, never the input
                }
            )
        return signals

    async def _require_started(self) -> None:
        if not await self._ensure_started():
            raise SourceError("provider_error", "the Raven backend failed to start")

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Store messages (receipt `accepted`: indexing is asynchronous) or pass feedback on."""
        value = request.input
        if request.offer.action_id == "feedback":
            signals = self._feedback_signals(request)  # refused whole: the backend sees none
            await self._require_started()
            await backend_call(self._feedback, signals, subject="the Raven backend feedback")
            return create_mutation_receipt(request, completion="accepted")
        await self._require_started()
        scope = request.view.scope
        identity = self._identity(scope)
        if identity is None:
            raise SourceError("invalid_payload", "the scope lacks the track's id")
        metadata: dict[str, Any] = {f"{self._settings.track}_id": identity}
        for name in ("app_id", "project_id", "is_final"):
            if name in value:
                metadata[name] = value[name]
        messages = [{"role": m["role"], "content": m["content"]} for m in value["messages"]]
        # a scope without a session still groups one View's writes together
        session_id = scope.session_id or request.view.id
        await backend_call(
            self._store, session_id, messages, metadata, subject="the Raven backend store"
        )
        # store() returns nothing and indexes later: never more than `accepted`
        return create_mutation_receipt(request, completion="accepted")

    async def _store(
        self, session_id: str, messages: list[dict[str, Any]], metadata: dict[str, Any]
    ) -> None:
        await self._backend.store(session_id, messages, metadata=metadata)

    async def _feedback(self, signals: list[dict[str, Any]]) -> None:
        await self._backend.feedback(signals)

    async def dispose(self) -> None:
        """Stop the backend once, if a start was tried (stop is safe after a failed start)."""
        if self._stopped or not (self._started or self._start_failed):
            return
        self._stopped = True
        try:
            await backend_call(self._backend.stop, subject="the Raven backend stop")
        except SourceError:
            _log.warning("Memory Source %s: its Raven backend failed to stop", self._key)


def _recalled_key(identity: str, memory_id: str) -> bytes:
    return hashlib.sha256(json.dumps([identity, memory_id]).encode()).digest()


async def _recall(
    backend: MemoryBackend, query: str, ids: Mapping[str, str], top_k: int
) -> list[Memory]:
    found = await backend.recall(query, top_k=top_k, **ids)
    if not isinstance(found, list) or not all(isinstance(m, Memory) for m in found):
        raise SourceError("schema_mismatch", "recall() must return a list of Memory")
    if not all(isinstance(m.text, str) and isinstance(m.score, int | float) for m in found):
        raise SourceError("schema_mismatch", "a Memory must have str text and a numeric score")
    return found


async def _create(init: SourceInit) -> RavenSource:
    settings = read_configuration(RavenConfiguration, init, subject=TYPE_ID)
    project = Path(init.config_dir) if init.config_dir is not None else None
    factory = resolve_backend_factory(settings.backend, project_dir=project)
    data_dir = None if settings.data_dir is None else str(settings.data_dir)
    context = BackendContext(
        config=dict(settings.backend_config),
        services=BackendServices(workspace=source_data_directory(init, data_dir)),
        logger=logging.getLogger(f"mnemon.sources.raven.{settings.backend.partition(':')[0]}"),
    )
    try:
        made = factory(context)
        backend = await made if inspect.isawaitable(made) else made
    except DefinitionError:
        raise  # written on purpose: it names the `backend_config` key at fault
    except Exception:
        raise DefinitionError(
            f"{TYPE_ID} configuration.backend: the factory failed to make a backend"
        ) from None
    if not isinstance(backend, MemoryBackend):
        raise DefinitionError(
            f"{TYPE_ID} configuration.backend: the factory's result is not a MemoryBackend "
            "(recall, store, feedback, start, stop)"
        )
    name = settings.backend.rpartition(":")[2] if ":" in settings.backend else settings.backend
    return RavenSource(init.instance_key, settings, backend, name, init.switches)


RAVEN_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one `raven-backend` Source for this entry."""
    install_memory(ctx, sources=[RAVEN_SOURCE])
