"""The runtime Source: resident working memory per scope partition, projected eagerly."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread

from mnemon.sdk import (
    FactsRequest,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    RevisionConflict,
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    SourceUsage,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    guarded_call,
    install_memory,
    memory_text_schema,
    scope_partition,
)

from ._config import RuntimeSettings, read_settings
from ._document import (
    ENTRY_ID_PATTERN,
    MAX_IMPORTANCE,
    MAX_TEXT_CHARACTERS,
    MIN_IMPORTANCE,
    TARGETS,
    Applied,
    Change,
    Damaged,
    apply_change,
    entry_json,
    read_change,
)
from ._postgres import PostgresPartitions
from ._projection import render_fragments
from ._store import Partition, ReadCache, Snapshot, damaged_error, transact

__all__ = ["MANIFEST", "RUNTIME_SOURCE", "RuntimeSource", "apply", "memory_plugin"]

PACKAGE = "mnemon-source-runtime"
TYPE_ID = "runtime"
ROLE = "working-context"
CAPABILITIES: tuple[Literal["project", "write", "status"], ...] = ("project", "write", "status")
# exact snapshots facts() read, so project() shows the revision the View pins: one for each
# turn a host admits at once by default (`max_concurrent_compositions`), so that many turns in
# flight do not read their files again between facts() and project()
_SNAPSHOTS_KEPT = 1_024
# partition files whose last read is kept, per Source instance, and their documents' bytes
_FILES_KEPT = 4_096
_FILES_BYTES_KEPT = 32 * 1024 * 1024
# in-process writers of one partition queue on one of these before taking the file lock
_STRIPES = 16

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Runtime working memory",
    description=(
        "Resident working memory: facts about the user and the agent's own notes, kept per "
        "scope in an atomically written JSON file and shown in full every turn."
    ),
    roles=["source"],
    provides=["memory.runtime"],
)

MUTATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {
            "enum": list(TARGETS),
            "description": "user: a fact about the user; memory: your own working note.",
        },
        "operation": {"enum": ["add", "replace", "remove"]},
        "text": {
            **memory_text_schema(MAX_TEXT_CHARACTERS),
            "description": "The whole entry, for add and replace.",
        },
        "id": {
            "type": "string",
            "pattern": ENTRY_ID_PATTERN,
            "description": "The entry shown as [u3] or [m2], for replace and remove.",
        },
        "importance": {
            "type": "integer",
            "minimum": MIN_IMPORTANCE,
            "maximum": MAX_IMPORTANCE,
            "description": "1 (minor) to 5 (essential); 3 when not given on add.",
        },
    },
    "required": ["target", "operation"],
    "additionalProperties": False,
    "allOf": [
        {
            "if": {"properties": {"operation": {"const": operation}}, "required": ["operation"]},
            "then": {"required": needed},
        }
        for operation, needed in (
            ("add", ["text"]),
            ("replace", ["id", "text"]),
            ("remove", ["id"]),
        )
    ],
}

# record kind -> the target its entries are kept under
RECORD_TARGETS = {"fact": "user", "note": "memory"}


def _record_kind(kind: str, target: str, label: str) -> dict[str, Any]:
    """A record kind of the management plane: the entries of one target, read and written."""
    return {
        "id": kind,
        "label": label,
        "description": f"The {label.lower()}s of a scope, in their order (ids as the View shows).",
        "record_schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "target": {"const": target},
                "text": memory_text_schema(MAX_TEXT_CHARACTERS),
                "importance": {
                    "type": ["integer", "null"],
                    "minimum": MIN_IMPORTANCE,
                    "maximum": MAX_IMPORTANCE,
                },
                "created_at": {"type": ["string", "null"]},
                "updated_at": {"type": ["string", "null"]},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        "readable": True,
        "writable": True,
        "deletable": True,
        "label_field": "text",
        "key_fields": ["text"],
    }


MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": ROLE,
    "capabilities": list(CAPABILITIES),
    "consistency": "exact-snapshot",
    # the default `scope_keys`; an instance configured otherwise reports its own
    "partition_keys": ["user_id"],
    "actions": [
        {
            "id": "mutate",
            "description": (
                "Change resident working memory: add, replace or remove a fact about the user "
                "(target user, ids u1, u2, ...) or one of your own notes (target memory, ids m1, "
                "m2, ...). Keep entries short and self-contained."
            ),
            "capability": "write",
            "input_schema": MUTATE_SCHEMA,
        }
    ],
    "management": {
        "label": "Runtime working memory",
        "description": (
            "Read the user facts and agent notes of a scope, or change them "
            "(confirmed and revision-fenced)."
        ),
        "operations": [
            {
                "id": "read",
                "kind": "read",
                "description": "Every entry of the scope as it is now, with the revision.",
                "input_schema": {
                    "type": "object",
                    "properties": {},
                    "additionalProperties": False,
                },
            },
            {
                "id": "mutate",
                "kind": "mutate",
                "description": "Add, replace or remove one entry, if the scope is still at the "
                "expected revision.",
                "input_schema": MUTATE_SCHEMA,
            },
        ],
        "records": [
            _record_kind("fact", "user", "Fact about the user"),
            _record_kind("note", "memory", "Agent's note"),
        ],
    },
}


_K = TypeVar("_K")
_V = TypeVar("_V")


def _keep(kept: OrderedDict[_K, _V], key: _K, value: _V, limit: int) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > limit:
        kept.popitem(last=False)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class RuntimeSource:
    """One runtime Source instance; every request reads its own snapshot of its partition."""

    def __init__(self, key: str, settings: RuntimeSettings) -> None:
        self._key = key
        self._settings = settings
        #: the scope ids this instance needs: its `scope_keys`, which tools name to the user
        self.partition_keys = settings.scope_keys
        self._snapshots: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        # partition files are read again only when they changed (file store)
        self._files = ReadCache(_FILES_KEPT, _FILES_BYTES_KEPT)
        # (partition, agent) -> the facts given for a snapshot: the same frozen object while
        # the snapshot is, so the core need not check them again
        self._given: OrderedDict[tuple[str, str | None], tuple[Snapshot, SourceFacts]] = (
            OrderedDict()
        )
        # (partition, revision, agent, mode, characters) -> the contribution for it
        self._contributions: OrderedDict[
            tuple[str, str, str | None, str, int], ViewContribution
        ] = OrderedDict()
        self._stripes = tuple(anyio.Lock() for _ in range(_STRIPES))
        # store = "postgres": partitions are rows shared by every host on the schema
        dsn = settings.dsn
        self._postgres = (
            None
            if dsn is None
            else PostgresPartitions(
                dsn.get_secret_value(), settings.schema, wait=settings.lock_timeout
            )
        )

    # ------------------------------------------------------------------ helpers

    def _partition(self, scope: Scope) -> Partition | None:
        # a tenant always splits memory, listed or not (scope_partition adds it when present);
        # agents' notes are kept apart inside the partition's file, not in partitions of their own
        partition = scope_partition(scope, self._settings.scope_keys)
        if partition is None:
            return None
        return Partition.of(self._settings.directory, partition)

    def _required_partition(self, scope: Scope) -> Partition:
        partition = self._partition(scope)
        if partition is None:
            raise SourceError(
                "scope-incomplete",
                f"the runtime Source needs {', '.join(self._settings.scope_keys)} in the scope",
            )
        return partition

    async def _transact(
        self, partition: Partition, step: Callable[[Snapshot], Applied]
    ) -> tuple[Snapshot, Applied]:
        timeout = self._settings.lock_timeout
        stripe = self._stripes[int(partition.name[-8:], 16) % _STRIPES]
        started = anyio.current_time()
        with anyio.move_on_after(timeout) as waiting:
            await stripe.acquire()
        if waiting.cancelled_caught:
            raise SourceError(
                "timeout", f"the runtime store stayed busy for {timeout} s; nothing was written"
            )
        try:
            remaining = max(0.0, timeout - (anyio.current_time() - started))
            # the whole locked read-change-write runs in one thread call: a cancelled caller
            # leaves it to finish and release the file lock, and to drop a write not begun
            abandoned = threading.Event()  # set by guarded_call when the caller stops waiting
            return await guarded_call(
                transact if self._postgres is None else self._postgres.transact,
                partition,
                step,
                remaining,
                abandoned,
                subject="the runtime store write",
                abandon=abandoned,
            )
        finally:
            stripe.release()

    async def _read(self, partition: Partition) -> Snapshot | Damaged:
        # the file store reads a file again only when its stat changed (one stat, in the thread)
        reader = self._files.read if self._postgres is None else self._postgres.read
        return await guarded_call(reader, partition, subject="the runtime store read")

    def _step(
        self,
        change: Change,
        agent_id: str | None,
        idempotency_key: str | None,
        expected_revision: str | None = None,
    ) -> Callable[[Snapshot], Applied]:
        limit = self._settings.memory_limit_bytes
        records = self._settings.idempotency_records

        def step(current: Snapshot) -> Applied:
            if expected_revision is not None and current.revision != expected_revision:
                raise RevisionConflict(
                    f"revision conflict: {self._key} is at {current.revision!r}, "
                    f"not {expected_revision!r}"
                )
            return apply_change(
                current.document,
                current.size,
                change,
                agent_id=agent_id,
                now=_now(),
                limit=limit,
                records=records,
                idempotency_key=idempotency_key,
            )

        return step

    # ------------------------------------------------------------------ Source protocol

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Report the exact revision of the scope's partition, or why it is unavailable.

        A scope without the ids of `scope_keys` is `unavailable` (`missing-scope`); so is a
        partition whose file is damaged (`damaged-file`) until a human repairs or removes it,
        and, on PostgreSQL, a database that cannot answer (`store-unreachable`) or whose
        tables a newer mnemon wrote (`schema-newer`).
        The core turns either reason into a diagnostic.
        """
        partition = self._partition(request.scope)
        if partition is None:
            return self._unavailable(
                "missing-scope", hints={"needs": list(self._settings.scope_keys)}
            )
        try:
            snapshot = await self._read(partition)
        except SourceError as exc:
            # a database that cannot answer, or whose tables a newer mnemon wrote, is this
            # turn's coded unavailability, as a damaged file is; the file store's errors stay
            if self._postgres is None:
                raise
            if exc.code == "schema_mismatch":
                return self._unavailable("schema-newer")
            if exc.code not in ("unavailable", "timeout"):
                raise
            return self._unavailable("store-unreachable")
        if isinstance(snapshot, Damaged):
            return self._unavailable("damaged-file", revision=snapshot.revision)
        self._remember(partition, snapshot)
        agent_id = request.scope.agent_id
        key = (partition.name, agent_id)
        given = self._given.get(key)
        if given is not None and given[0] is snapshot:
            self._given.move_to_end(key)
            return given[1]
        document = snapshot.document
        notes = document.notes_of(agent_id)
        facts = SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role=ROLE,
            availability="ready",
            revision=snapshot.revision,
            capabilities=CAPABILITIES,
            action_ids=("mutate",),
            hints={
                "entries": len(document.user) + len(notes.entries),
                "used_percent": min(100, snapshot.size * 100 // self._settings.memory_limit_bytes),
            },
            usage=SourceUsage(
                used=snapshot.size, limit=self._settings.memory_limit_bytes, unit="bytes"
            ),
        )
        _keep(self._given, key, (snapshot, facts), _SNAPSHOTS_KEPT)
        return facts

    def _unavailable(
        self, reason: str, *, revision: str | None = None, hints: dict[str, Any] | None = None
    ) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role=ROLE,
            availability="unavailable",
            revision=revision,
            reason=reason,
            hints=hints or {},
        )

    def _remember(self, partition: Partition, snapshot: Snapshot) -> None:
        key = (partition.name, snapshot.revision)
        self._snapshots[key] = snapshot
        self._snapshots.move_to_end(key)
        while len(self._snapshots) > _SNAPSHOTS_KEPT:
            self._snapshots.popitem(last=False)

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Project whole entries of the revision facts reported, within `max_characters`.

        Raises:
            SourceError: `degraded` when that revision is gone and not kept in memory.
        """
        partition = self._required_partition(request.scope)
        expected = request.expected_revision
        snapshot = self._snapshots.get((partition.name, expected)) if expected else None
        if snapshot is None:
            current = await self._read(partition)
            if isinstance(current, Damaged):
                raise damaged_error(partition, current.problem)
            snapshot = current
            if expected is not None and snapshot.revision != expected:
                raise SourceError("degraded", "the runtime memory changed after facts were read")
        agent_id = request.scope.agent_id
        key = (partition.name, snapshot.revision, agent_id, request.mode, request.max_characters)
        contribution = self._contributions.get(key)
        if contribution is None:
            fragments = render_fragments(
                snapshot.document, agent_id, self._key, request.mode, request.max_characters
            )
            contribution = ViewContribution(fragments=fragments, revision=snapshot.revision)
        # the same frozen contribution for the same snapshot and request shape
        _keep(self._contributions, key, contribution, _SNAPSHOTS_KEPT)
        return contribution

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Add, replace or remove one entry of the View's scope; committed when it returns.

        Raises:
            SourceError: `invalid_payload`, `not_found`, `runtime-capacity`,
                `schema_mismatch` (damaged file), `runtime-unsafe-path` (a link planted at
                the lock file) or `timeout` (lock busy); nothing written.
        """
        partition = self._required_partition(request.view.scope)
        change = read_change(request.input)
        step = self._step(change, request.view.scope.agent_id, request.idempotency_key)
        snapshot, applied = await self._transact(partition, step)
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=applied.committed_at,
            revision=snapshot.revision,
            detail={
                "target": change.target,
                "operation": change.operation,
                "id": applied.entry_id,
                "replayed": applied.replayed,
            },
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """`read` the scope's entries, or `mutate` one if the scope is at the expected revision.

        Raises:
            RevisionConflict: the partition moved on from `expected_revision`.
            SourceError: as for `mutate`.
        """
        partition = self._required_partition(request.scope)
        operation = request.operation.id
        agent_id = request.scope.agent_id
        if operation == "read":
            return await self._manage_read(partition, agent_id)
        if operation == "records-read":
            return await self._read_records(partition, agent_id, request.input)
        if operation == "records-write":
            return await self._write_records(partition, agent_id, request)
        if operation == "records-delete":
            return await self._delete_record(partition, agent_id, request)
        change = read_change(request.input)
        step = self._step(change, agent_id, None, request.expected_revision)
        snapshot, applied = await self._transact(partition, step)
        return ManagementResult(
            source_key=self._key,
            operation=operation,
            output={
                "revision": snapshot.revision,
                "id": applied.entry_id,
                "committed_at": applied.committed_at,
                # the file was replaced and synced before this answer: durable
                "completion": "committed",
            },
            revision=snapshot.revision,
        )

    async def _read_records(
        self, partition: Partition, agent_id: str | None, value: Mapping[str, Any]
    ) -> ManagementResult:
        """One page of the facts or notes of the scope, in their order (`records-read`).

        Raises:
            SourceError: `damaged-store` when the scope's file is damaged (nothing is read).
        """
        snapshot = await self._read(partition)
        if isinstance(snapshot, Damaged):
            raise SourceError("damaged-store", "the working memory of this scope is damaged")
        target = RECORD_TARGETS[value["kind"]]
        document = snapshot.document
        entries = document.user if target == "user" else document.notes_of(agent_id).entries
        start = int(value.get("cursor", "0")) if str(value.get("cursor", "0")).isdigit() else 0
        end = start + int(value["limit"])
        page = [
            {
                "id": entry.id,
                "target": target,
                "text": entry.text,
                "importance": entry.importance,
                "created_at": entry.created_at,
                "updated_at": entry.updated_at,
            }
            for entry in entries[start:end]
        ]
        output = {"records": page, "next_cursor": str(end) if end < len(entries) else None}
        return ManagementResult(
            source_key=self._key,
            operation="records-read",
            output=output,
            revision=snapshot.revision,
        )

    async def _write_records(
        self, partition: Partition, agent_id: str | None, request: ManageRequest
    ) -> ManagementResult:
        """Add each record as a new entry, in order, each fenced by the revision before it.

        A record the store refuses (too long, the memory full) is refused alone; a key it
        already took replays. Anything else stops the batch, with the earlier ones written.

        Raises:
            RevisionConflict: the scope moved on from the expected revision.
            SourceError: the store cannot be written (busy, damaged).
        """
        target = RECORD_TARGETS[request.input["kind"]]
        expected = request.expected_revision
        results: list[dict[str, Any]] = []
        revision = expected
        for index, item in enumerate(request.input["records"]):
            record = item["record"]
            change: dict[str, Any] = {"target": target, "operation": "add", "text": record["text"]}
            if isinstance(record.get("importance"), int):
                change["importance"] = record["importance"]
            try:
                step = self._step(read_change(change), agent_id, item["idempotency_key"], revision)
                snapshot, applied = await self._transact(partition, step)
            except SourceError as exc:
                if exc.kind != "terminal" or exc.code == "schema_mismatch":
                    raise
                results.append(
                    {"index": index, "completion": "refused", "code": exc.code, "message": str(exc)}
                )
                continue
            revision = snapshot.revision
            results.append(
                {
                    "index": index,
                    "completion": "committed",
                    "id": applied.entry_id,
                    "replayed": applied.replayed,
                }
            )
        return ManagementResult(
            source_key=self._key,
            operation="records-write",
            output={"results": results},
            revision=revision,
        )

    async def _delete_record(
        self, partition: Partition, agent_id: str | None, request: ManageRequest
    ) -> ManagementResult:
        """Remove one fact or note (`records-delete`), if the scope is at the expected revision.

        An id of the other kind, or one the scope does not hold, deletes nothing
        (`deleted: false`).

        Raises:
            RevisionConflict: the scope moved on from the expected revision (checked under
                the store's lock, with the removal).
            SourceError: the store cannot be written (busy, damaged).
        """
        target = RECORD_TARGETS[request.input["kind"]]
        entry_id = str(request.input["id"])
        prefix = "u" if target == "user" else "m"
        output: dict[str, Any] = {"id": entry_id, "deleted": False}
        if not (entry_id.startswith(prefix) and entry_id[1:].isdigit()):
            return ManagementResult(source_key=self._key, operation="records-delete", output=output)
        change = read_change({"target": target, "operation": "remove", "id": entry_id})
        step = self._step(change, agent_id, None, request.expected_revision)
        try:
            snapshot, _ = await self._transact(partition, step)
        except SourceError as exc:
            if exc.code != "not_found":
                raise
            return ManagementResult(
                source_key=self._key,
                operation="records-delete",
                output=output,
                revision=request.expected_revision,
            )
        return ManagementResult(
            source_key=self._key,
            operation="records-delete",
            output={"id": entry_id, "deleted": True},
            revision=snapshot.revision,
        )

    async def _manage_read(self, partition: Partition, agent_id: str | None) -> ManagementResult:
        snapshot = await self._read(partition)
        if isinstance(snapshot, Damaged):
            # the human plane says what is wrong and where, so the file can be repaired
            return ManagementResult(
                source_key=self._key,
                operation="read",
                output={
                    "status": "damaged",
                    "problem": snapshot.problem,
                    "file": str(partition.data),
                    "revision": snapshot.revision,
                },
                revision=snapshot.revision,
            )
        document = snapshot.document
        return ManagementResult(
            source_key=self._key,
            operation="read",
            output={
                "status": "ok",
                "revision": snapshot.revision,
                "user": [entry_json(entry) for entry in document.user],
                "memory": [entry_json(entry) for entry in document.notes_of(agent_id).entries],
                "used_bytes": snapshot.size,
                "limit_bytes": self._settings.memory_limit_bytes,
            },
            revision=snapshot.revision,
        )

    async def dispose(self) -> None:
        """Close the PostgreSQL store's connections, if it has any."""
        if self._postgres is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._postgres.close)


def _create(init: SourceInit) -> RuntimeSource:
    return RuntimeSource(init.instance_key, read_settings(init))


RUNTIME_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one runtime Source for this entry."""
    install_memory(ctx, sources=[RUNTIME_SOURCE])
