"""The `raven-backend` Source: a Raven `MemoryBackend` as routed recall, store and feedback.

Each identity (tenant, user, agent) gets a backend of its own, made with that identity's ids in
`ctx.config` and its own workspace folder (see `_instances`). People import memories into it
through the core's records contract: a write-only `memory` kind, each record handed to `store`
once (see `_ledger`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from mnemon.sdk import (
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
    Scope,
    ScopePartition,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    check_memory_text,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    memory_text_schema,
    read_configuration,
    run_blocking,
    scope_partition,
    source_data_directory,
    truncate_text,
)

from ._config import RavenConfiguration
from ._contract import BackendContext, BackendFactory, BackendServices, MemoryBackend
from ._failures import backend_call
from ._instances import BackendInstance, IdentityBackends
from ._ledger import ImportLedger
from ._resolve import BackendImportFailed, check_backend_config, resolve_backend_factory
from ._shim import install_raven_shim

__all__ = ["RAVEN_SOURCE", "RavenSource", "apply", "memory_plugin"]

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


_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 512}
# the one kind of usage signal the model may send; Raven leaves a signal's keys to the backend
SIGNAL_TYPE = "memory_usage"
# (identity, memory id) pairs recall returned, newest last; a digest each keeps this small
RECALLED_KEPT = 10_000
NOT_RECALLED = "memory-not-recalled"
# why an imported record was not stored
NOT_STORED = "not-stored"
INGEST_OFF = "ingest-switched-off"
# why a backend serves nothing, as the facts' reason
IMPORT_FAILED = "backend-import-failed"
FACTORY_FAILED = "backend-factory-failed"
START_FAILED = "backend-start-failed"
_REASON = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
_IDS = ("user_id", "agent_id")
# the folder of the entry's data folder holding one import ledger per identity
LEDGERS = "imports"
# the role an imported memory is stored under: Raven's dual-track backends file what the user
# says under the user's memory, what the assistant says under the agent's
_ROLE_OF_TRACK = {"user": "user", "agent": "assistant"}
MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": "durable-evidence",
    "capabilities": ["recall", "write"],
    # the backend reads live: a grant pins whose memory is read, not a snapshot of it
    "consistency": "namespace-pinned-live-read",
    # the default track's id; an instance tracking agents reports its own
    "partition_keys": ["user_id"],
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
                },
                "required": ["messages"],
                "additionalProperties": False,
            },
        },
        {
            "id": "feedback",
            "description": "Tell the memory which recalled memories helped: one item each, "
            "naming the id recall gave it.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "properties": {
                                "memory_id": _ID_SCHEMA,
                                "helpful": {"type": "boolean"},
                            },
                            "required": ["memory_id", "helpful"],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["items"],
                "additionalProperties": False,
            },
        },
    ],
    "management": {
        "label": "Raven memory backend",
        "description": "Import memories into the backend; it cannot list or delete them.",
        # what `mnemon import` can hand over: a backend has no way to list or delete, so the
        # kind is write-only, and an export file's `memory` records (the spaces Source's,
        # whose other fields are ignored) come here when no other Source takes them
        "records": [
            {
                "id": "memory",
                "label": "Memory handed to the backend",
                "description": (
                    "A memory stored once through the backend's store(), as one message of a "
                    "session of its own; the backend decides what it keeps."
                ),
                "record_schema": {
                    "type": "object",
                    "properties": {"text": memory_text_schema(MAX_TEXT)},
                    "required": ["text"],
                },
                "writable": True,
                # a backend keeps no spaces or tags: the same text is the same memory
                "key_fields": ["text"],
            }
        ],
    },
}


class RavenSource:
    """Raven backends behind mnemon's Source contract: one per identity, stopped at dispose."""

    def __init__(
        self,
        key: str,
        settings: RavenConfiguration,
        factory: BackendFactory | None,
        name: str,
        workspace: Path,
        *,
        problem: str | None = None,
        switches: Mapping[str, bool] | None = None,
    ) -> None:
        self._key = key
        # the host's deployment-wide switches: external memory's reads and writes
        self._switches = dict(switches or {})
        self._settings = settings
        self._factory = factory
        self._problem = problem
        self._name = name
        self._workspace = workspace
        self._ledgers = workspace / LEDGERS
        self._track_id = f"{settings.track}_id"
        #: the scope id this instance needs: its track's, which tools name to the user
        self.partition_keys = (self._track_id,)
        logger_name = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        self._logger = logging.getLogger(f"mnemon.sources.raven.{logger_name}")
        self._backends = IdentityBackends(self._build, settings.max_backends, key)
        # what recall returned to whom: feedback may name only those memories
        self._recalled: OrderedDict[bytes, None] = OrderedDict()

    def _partition(self, scope: Scope) -> ScopePartition | None:
        """The identity a backend serves: the track's id (required), the other id and tenant."""
        other = "agent_id" if self._track_id == "user_id" else "user_id"
        return scope_partition(scope, [self._track_id], when_present=[other])

    async def _build(self, partition: ScopePartition) -> tuple[MemoryBackend | None, str | None]:
        """Make the identity's backend: its ids in `ctx.config`, a workspace of its own."""
        if self._factory is None:
            return None, self._problem or IMPORT_FAILED
        ids = {name: partition.values[name] for name in _IDS if name in partition.values}
        # the identity comes from the scope: a static id in backend_config never applies
        config = {k: v for k, v in self._settings.backend_config.items() if k not in _IDS}
        workspace = self._workspace / partition.folder_name("id-")
        await run_blocking(_make_folder, workspace)
        context = BackendContext(
            config={**config, **ids},
            services=BackendServices(
                workspace=workspace,
                user_id=ids.get("user_id"),
                agent_id=ids.get("agent_id"),
                tenant_id=partition.values.get("tenant_id"),
            ),
            logger=self._logger,
        )
        try:
            made = self._factory(context)
            backend = await made if inspect.isawaitable(made) else made
        except Exception as exc:
            _log.debug("Memory Source %s: the Raven factory failed", self._key, exc_info=True)
            _log.warning(
                "Memory Source %s: its Raven backend factory failed (%s)",
                self._key,
                type(exc).__name__,
            )
            return None, FACTORY_FAILED
        if not isinstance(backend, MemoryBackend):
            _log.warning(
                "Memory Source %s: its Raven factory returned no MemoryBackend "
                "(recall, store, feedback, start, stop)",
                self._key,
            )
            return None, FACTORY_FAILED
        # mnemon's addition for backends that serve nothing (a missing substrate): say why
        reason = getattr(backend, "unavailable_reason", None)
        if isinstance(reason, str) and _REASON.fullmatch(reason):
            return backend, reason
        return backend, None

    def _unavailable(self, reason: str) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role="durable-evidence",
            availability="unavailable",
            reason=reason,
        )

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Ready when the scope carries the track's id and that identity's backend started."""
        partition = self._partition(request.scope)
        if partition is None:
            return self._unavailable("missing-scope")  # no backend is made for it
        search = self._switches.get(SEARCH_SWITCH, True)
        ingest = self._switches.get(INGEST_SWITCH, True)
        if not search and not ingest:
            return self._unavailable("external-memory-switched-off")  # never made for it
        async with self._backends.use(partition) as instance:
            reason = None if instance.ready else instance.reason or START_FAILED
        if reason is not None:
            if self._settings.on_failure == "reject":
                raise SourceError("provider_error", f"the Raven backend is unavailable ({reason})")
            return self._unavailable(reason)
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
            revision="live:" + partition.key[:32],
            capabilities=tuple(capability for capability, on in offered if on),
            route_ids=("recall",) if search else (),
            action_ids=("store", "feedback") if ingest else (),
            hints={"track": self._settings.track},
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Nothing eager: recall needs a query. The grant pins whose memory routes read."""
        partition = self._required_partition(request.scope)
        return ViewContribution(
            grant=ReadGrant(source_key=self._key, value={"ids": dict(partition.values)}),
            revision=request.expected_revision,
        )

    def _required_partition(self, scope: Scope) -> ScopePartition:
        partition = self._partition(scope)
        if partition is None:
            raise SourceError("invalid_payload", "the scope lacks the track's id")
        return partition

    async def query(self, request: QueryRequest) -> Evidence:
        """Recall from the pinned identity's backend; results become evidence items."""
        partition = self._required_partition(Scope(**request.grant.value["ids"]))
        top_k = min(int(request.input.get("top_k", self._settings.top_k)), self._settings.top_k)
        if request.route.max_results is not None:
            top_k = min(top_k, request.route.max_results)
        track = {self._track_id: partition.values[self._track_id]}
        async with self._backends.use(partition) as instance:
            backend = _ready(instance)
            found = await backend_call(
                _recall,
                backend,
                str(request.input["query"]),
                track,
                top_k,
                subject="the Raven backend recall",
            )
        # each item within the route's per-item ceiling (a longer one would be left out whole)
        limit = request.route.max_item_characters
        items = [self._item(memory, limit) for memory in found[:top_k]]
        for item in items:
            self._note_recalled(partition, item.id)
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(items),
        )

    def _item(self, memory: _Recalled, limit: int) -> EvidenceItem:
        text, score, metadata = memory
        stated = metadata.get("id")
        if isinstance(stated, str | int) and not isinstance(stated, bool) and str(stated):
            item_id = str(stated)[:512]
        else:
            item_id = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
        return EvidenceItem(
            id=item_id,
            text=truncate_text(text, limit),
            provenance={
                "backend": self._name,
                "track": self._settings.track,
                "score": score,
                "score_scale": "normalized",
            }
            | ({"excerpt": True} if len(text) > limit else {}),
        )

    def _note_recalled(self, partition: ScopePartition, memory_id: str) -> None:
        key = _recalled_key(partition, memory_id)
        self._recalled[key] = None
        self._recalled.move_to_end(key)
        while len(self._recalled) > RECALLED_KEPT:
            self._recalled.popitem(last=False)

    def _feedback_signals(self, request: MutationRequest) -> dict[str, Any]:
        """The one signals dict to hand on, bound to this scope's identity, or a refusal.

        The backend's memory ids are its own (two identities' stores may both hold `m0`), and
        the model could name any: the host admits only ids this identity's recall returned.
        """
        partition = self._required_partition(request.view.scope)
        items = []
        for index, item in enumerate(request.input["items"]):
            memory_id = str(item["memory_id"])
            if _recalled_key(partition, memory_id) not in self._recalled:
                # the id is never quoted: it is the model's text
                raise SourceError(
                    NOT_RECALLED,
                    f"feedback items[{index}].memory_id: recall did not return this memory "
                    "to this identity; only memories recall returned can be given feedback",
                    nothing_written=True,
                )
            items.append({"memory_id": memory_id, "helpful": bool(item["helpful"])})
        ids = {name: partition.values[name] for name in _IDS if name in partition.values}
        # the identity from the scope, never from the input
        return {"type": SIGNAL_TYPE, "items": items, **ids}

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Store messages (receipt `accepted`: indexing is asynchronous) or pass feedback on."""
        partition = self._required_partition(request.view.scope)
        if request.offer.action_id == "feedback":
            signals = self._feedback_signals(request)  # refused whole: the backend sees none
            async with self._backends.use(partition) as instance:
                await backend_call(
                    _ready(instance).feedback, signals, subject="the Raven backend feedback"
                )
            return create_mutation_receipt(request, completion="accepted")
        messages = [
            {"role": str(m["role"]), "content": str(m["content"])}
            for m in request.input["messages"]
        ]
        # a scope without a session still groups one View's writes together
        session_id = request.view.scope.session_id or request.view.id
        async with self._backends.use(partition) as instance:
            landed = await backend_call(
                _store, _ready(instance), session_id, messages, subject="the Raven backend store"
            )
        if landed is False:  # Raven's newer backends answer False for a write that did not land
            raise SourceError(
                "provider_error",
                "the Raven backend said the messages were not stored",
                nothing_written=True,
            )
        # store() returns nothing and indexes later: never more than `accepted`
        return create_mutation_receipt(request, completion="accepted")

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """`records-write` of `memory` records: each stored once through the backend's `store`.

        A record is one message (`user` on the user track, `assistant` on the agent track)
        of a session of its own, named from its idempotency key; the identity is the
        request's scope, as for every other call. A key the identity's import ledger holds is
        `replayed` without calling `store`; a key is recorded only after `store` returned.

        Raises:
            SourceError: `missing-scope` (the scope lacks the track's id); `timeout` (another
                import held the ledger too long) or `ledger-damaged` part way: the records
                before it have their outcomes recorded in the ledger, nothing was stored from
                then on.
        """
        if request.operation.id != "records-write":
            raise SourceError("invalid_payload", f"no operation {request.operation.id!r}")
        partition = self._partition(request.scope)
        if partition is None:
            raise SourceError(
                "missing-scope",
                f"records-write: the scope lacks {self._track_id}, whose memory this entry keeps",
                nothing_written=True,
            )
        items = request.input["records"]
        if not self._switches.get(INGEST_SWITCH, True):
            results = _refused(
                items, INGEST_OFF, f"not stored: {INGEST_SWITCH} is switched off for this host"
            )
        else:
            results = await self._write_records(partition, items)
        return ManagementResult(
            source_key=self._key, operation="records-write", output={"results": results}
        )

    async def _write_records(
        self, partition: ScopePartition, items: list[Any]
    ) -> list[dict[str, Any]]:
        """One outcome per record, each stored through `store` unless the ledger has its key."""
        name = partition.folder_name("id-") + ".sqlite3"
        shown = f"{LEDGERS}/{name} (in the entry's data folder)"
        ledger = ImportLedger(self._ledgers / name, shown, self._settings.backend)
        try:
            await ledger.open()
        except SourceError as exc:
            # a ledger that cannot be read stores nothing: storing without it could duplicate
            _log.warning("Memory Source %s: import ledger unusable (%s)", self._key, exc.code)
            return _refused(items, exc.code, str(exc))
        try:
            async with self._backends.use(partition) as instance:
                if not instance.ready or instance.backend is None:
                    reason = instance.reason or START_FAILED
                    return _refused(
                        items, reason, f"not stored: the Raven backend is unavailable ({reason})"
                    )
                track = self._settings.track
                return [
                    await self._write_record(ledger, instance.backend, track, index, item)
                    for index, item in enumerate(items)
                ]
        finally:
            await ledger.aclose()

    async def _write_record(
        self,
        ledger: ImportLedger,
        backend: MemoryBackend,
        track: str,
        index: int,
        item: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Store one record once; its outcome (never its content)."""
        text = item["record"].get("text")
        try:
            if not isinstance(text, str):
                raise SourceError("invalid_payload", "text: must be a string")
            check_memory_text(text, max_characters=MAX_TEXT)
        except SourceError as exc:
            # the rule's words name the field and the character, never the text
            return _outcome_refused(index, "invalid-input", f"memory record: {exc}")
        key = str(item["idempotency_key"])
        # a session of its own per record, the same for the same key: a retry after a crash
        # names the session again, which a backend keyed by session may recognise
        session_id = "mnemon-import-" + hashlib.sha256(key.encode()).hexdigest()[:32]
        messages = [{"role": _ROLE_OF_TRACK[track], "content": text}]
        async with ledger.hold(key) as held:
            if held.present:
                # the first write was only accepted: a replay claims no more than it did
                return {"index": index, "completion": "accepted", "replayed": True}
            try:
                landed = await backend_call(
                    _store, backend, session_id, messages, subject="the Raven backend store"
                )
            except SourceError as exc:
                # nothing is recorded: importing again calls store again
                return _store_failed(index, exc)
            if landed is False:
                return _outcome_refused(
                    index, NOT_STORED, "not stored: the Raven backend said it did not store it"
                )
            held.record()
        # Raven's store() returns None and promises no durability: backends queue or index
        # later (EverOS extracts at its own boundaries), so a return says the backend took the
        # record, never that it is durable or recallable yet: `accepted`, never `committed`
        return {"index": index, "completion": "accepted"}

    async def dispose(self) -> None:
        """Stop every identity's backend whose start was tried (stop is safe after a failure)."""
        await self._backends.close()


#: a recalled memory as the Source keeps it: text, score, metadata, checked
_Recalled = tuple[str, float, Mapping[str, Any]]


def _outcome_refused(index: int, code: str, message: str) -> dict[str, Any]:
    # a record's code is an id (`provider-error`); a SourceError's may hold `_`
    code = code.replace("_", "-")
    return {"index": index, "completion": "refused", "code": code, "message": message[:500]}


def _store_failed(index: int, error: SourceError) -> dict[str, Any]:
    """The outcome of a record whose `store` raised: refused, never its text or the record's."""
    if error.nothing_written:  # the backend said so itself (an `everos` refusal)
        message = f"not stored: the Raven backend refused it ({error.code})"
    else:
        origin = f" ({error.origin_code})" if error.origin_code else ""
        message = (
            f"the Raven backend's store failed{origin}: it may or may not have kept it; it is "
            "not recorded as imported, so importing again stores it again"
        )
    return _outcome_refused(index, error.code, message)


def _refused(items: list[Any], code: str, message: str) -> list[dict[str, Any]]:
    """Every record of a batch refused alike (nothing of it was stored)."""
    return [_outcome_refused(index, code, message) for index in range(len(items))]


def _make_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)


def _ready(instance: BackendInstance) -> MemoryBackend:
    if not instance.ready or instance.backend is None:
        raise SourceError(
            "provider_error",
            f"the Raven backend is unavailable ({instance.reason or START_FAILED})",
            nothing_written=True,
        )
    return instance.backend


async def _store(backend: MemoryBackend, session_id: str, messages: list[dict[str, Any]]) -> object:
    # the contract's store returns None; Raven's newer backends answer whether it landed
    stored: Any = backend.store
    result: object = await stored(session_id, messages)
    return result


def _recalled_key(partition: ScopePartition, memory_id: str) -> bytes:
    return hashlib.sha256(json.dumps([partition.key, memory_id]).encode()).digest()


async def _recall(
    backend: MemoryBackend, query: str, ids: Mapping[str, str], top_k: int
) -> list[_Recalled]:
    """Recall, and check what came back: Raven's `Memory` or any object shaped like it."""
    found: Any = await backend.recall(query, top_k=top_k, **ids)
    if not isinstance(found, list):
        raise SourceError("schema_mismatch", "recall() must return a list of Memory")
    checked = []
    for memory in found:
        text = getattr(memory, "text", None)
        score = getattr(memory, "score", None)
        metadata = getattr(memory, "metadata", None)
        if not isinstance(text, str):
            raise SourceError("schema_mismatch", "a recalled Memory's text must be a str")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise SourceError("schema_mismatch", "a recalled Memory's score must be finite")
        if not isinstance(metadata, Mapping):
            raise SourceError("schema_mismatch", "a recalled Memory's metadata must be a mapping")
        checked.append((text, float(score), metadata))
    return checked


async def _create(init: SourceInit) -> RavenSource:
    settings = read_configuration(RavenConfiguration, init, subject=TYPE_ID)
    project = Path(init.config_dir) if init.config_dir is not None else None
    data_dir = None if settings.data_dir is None else str(settings.data_dir)
    workspace = source_data_directory(init, data_dir)
    if settings.raven_shim:
        install_raven_shim()  # before the factory's module imports `raven.*`
    factory: BackendFactory | None
    problem = None
    try:
        factory = resolve_backend_factory(settings.backend, project_dir=project)
    except BackendImportFailed as exc:
        # Raven's rule: a backend that cannot load is unavailable, the host boots without it
        _log.warning("Memory Source %s: %s", init.instance_key, exc)
        factory, problem = None, IMPORT_FAILED
    ids = {k: v for k, v in settings.backend_config.items() if k not in _IDS}
    if factory is not None:
        check_backend_config(settings.backend, ids)  # a bad key is refused at mount
    name = settings.backend.rpartition(":")[2] if ":" in settings.backend else settings.backend
    return RavenSource(
        init.instance_key,
        settings,
        factory,
        name,
        workspace,
        problem=problem,
        switches=init.switches,
    )


RAVEN_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one `raven-backend` Source for this entry."""
    install_memory(ctx, sources=[RAVEN_SOURCE])
