"""The default Provider: embedded SQLite with FTS5, BM25 ranking, WAL and a busy timeout.

One database file holds every parent. Writes are `BEGIN IMMEDIATE` transactions, so several
threads and several OS processes can share the file; a write is durable (with the default
`synchronous = full`) before `remember` returns. Under `synchronous = normal` a committed
transaction may be lost on power loss, so every write result then says `durable=False`.
"""

from __future__ import annotations

import builtins
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from mnemon.sdk import DefinitionError, run_blocking

from ._provider import (
    EntityCount,
    EntityIndexRequest,
    EntityIndexResult,
    ForgetRequest,
    ForgetResult,
    GetRequest,
    GetResult,
    LinkRequest,
    LinkResult,
    ListRequest,
    ListResult,
    Memory,
    MissingVectorsRequest,
    MissingVectorsResult,
    NamespaceStatus,
    ProviderError,
    ProviderInit,
    ProviderStatus,
    RegisterSpaceRequest,
    RegisterSpaceResult,
    RelatedMemory,
    RelatedRequest,
    RelatedResult,
    RememberRequest,
    RememberResult,
    SearchHit,
    SearchRequest,
    SearchResult,
    StatusRequest,
    StoreVectorsRequest,
    StoreVectorsResult,
    VectorSearchRequest,
    define_space_provider,
)
from ._sqlite_layout import COUNTER_SPAN, IN_SLOT, idempotency_digest, slot_range
from ._sqlite_rows import (
    MEMORY_COLUMNS,
    NewMemory,
    SlotsExhausted,
    delete_memory,
    entity_key,
    insert_full_text,
    insert_memories,
    memory_from_row,
    namespace_slot,
)
from ._sqlite_search import search_store
from ._sqlite_store import StoreConnections, store_error, store_reason
from ._sqlite_vectors import (
    APPROXIMATE_ABOVE,
    Indexing,
    missing_vectors,
    register_space,
    release_cache,
    search_vectors,
    shared_cache,
    space_slot,
    store_vectors,
)
from ._wire import built

__all__ = ["SQLITE_PROVIDER", "SqliteProvider", "SqliteSettings"]

_T = TypeVar("_T")
DEFAULT_FILE = "spaces.sqlite3"
DEFAULT_BUSY_TIMEOUT_MS = 5_000
MAX_BUSY_TIMEOUT_MS = 600_000
MAX_APPROXIMATE_ABOVE = 1 << 40
CONFIGURATION_KEYS = ("path", "busy_timeout_ms", "synchronous", "approximate_above", "token")

MANIFEST = {
    "type_id": "sqlite",
    "package_name": "mnemon-source-spaces",
    "label": "Embedded SQLite",
    "description": (
        "One local SQLite file: FTS5 full-text search ranked by BM25, WAL, safe for several "
        "processes on one file."
    ),
    "capabilities": [
        "search",
        "list",
        "remember",
        "get",
        "forget",
        "link",
        "related",
        "entity_index",
        "vectors",
    ],
}


class SqliteSettings:
    """The SQLite Provider's validated configuration."""

    __slots__ = ("approximate_above", "busy_timeout_ms", "own_folder", "path", "synchronous")

    def __init__(
        self,
        path: Path,
        busy_timeout_ms: int,
        synchronous: Literal["full", "normal"],
        *,
        own_folder: bool = False,
        approximate_above: int = APPROXIMATE_ABOVE,
    ) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self.approximate_above = approximate_above
        # the Source's own data folder (the default path) is narrowed; an operator's is not
        self.own_folder = own_folder

    @classmethod
    def parse(cls, init: ProviderInit) -> SqliteSettings:
        """Validate `init.configuration`.

        Raises:
            DefinitionError: `"<key>: <problem>"` for the first key at fault.
        """
        config: Mapping[str, Any] = init.configuration
        unknown = sorted(set(config) - set(CONFIGURATION_KEYS))
        if unknown:
            raise DefinitionError(f"{unknown[0]}: unknown key")
        raw_path = config.get("path")
        if raw_path is None:
            path = Path(init.data_directory) / DEFAULT_FILE
        elif not isinstance(raw_path, str) or not raw_path:
            raise DefinitionError("path: must be an absolute file path")
        else:
            path = Path(raw_path)
            if not path.is_absolute():
                raise DefinitionError("path: must be an absolute file path")
        busy = config.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS)
        if type(busy) is not int or not 1 <= busy <= MAX_BUSY_TIMEOUT_MS:
            raise DefinitionError(
                f"busy_timeout_ms: must be an integer from 1 to {MAX_BUSY_TIMEOUT_MS}"
            )
        synchronous = config.get("synchronous", "full")
        if synchronous not in ("full", "normal"):
            raise DefinitionError('synchronous: must be "full" or "normal"')
        approximate = config.get("approximate_above", APPROXIMATE_ABOVE)
        if type(approximate) is not int or not 0 <= approximate <= MAX_APPROXIMATE_ABOVE:
            raise DefinitionError(
                f"approximate_above: must be an integer from 0 (never) to {MAX_APPROXIMATE_ABOVE}"
            )
        token = config.get("token")
        if token is not None and not isinstance(token, str):
            raise DefinitionError("token: must be a string (SQLite does not use it)")
        return cls(
            path, busy, synchronous, own_folder=raw_path is None, approximate_above=approximate
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _required(memory: Memory | None) -> Memory:
    if memory is None:
        raise ProviderError("provider_error", "a stored memory is malformed")
    return memory


_READY = ProviderStatus(availability="ready")
STATUS_MAX_AGE = 1.0  # seconds: bounds how late a change made outside this process is seen
# refusals of one request, not failures of the store: they leave a cached health as it is
_REQUEST_FAULTS = frozenset({"invalid_payload", "not_found"})
_LOOKUP_CHUNK = 500  # under SQLite's limit on bound parameters


def _stored_by_key(
    connection: sqlite3.Connection, slot: int | None, digests: Sequence[bytes]
) -> dict[bytes, Memory]:
    """The memories of the parent in `slot` already stored under these idempotency digests."""
    columns = f"{MEMORY_COLUMNS}, m.idempotency_key"
    return {
        row[8]: _required(memory_from_row(row))
        for row in _rows_in_slot(connection, columns, slot, "idempotency_key", digests)
    }


def _rows_in_slot(
    connection: sqlite3.Connection,
    columns: str,
    slot: int | None,
    column: str,
    values: Sequence[Any],
) -> Iterator[Any]:
    """Rows of one parent whose `column` is one of `values`, asked in chunks.

    `slot` None is a parent never written to: no rows. Chunks keep each statement under
    SQLite's limit on bound parameters.
    """
    if slot is None:
        return
    for start in range(0, len(values), _LOOKUP_CHUNK):
        chunk = values[start : start + _LOOKUP_CHUNK]
        yield from connection.execute(
            f"SELECT {columns} FROM memories m WHERE {IN_SLOT} "
            f"AND m.{column} IN ({','.join('?' * len(chunk))})",
            (slot, *chunk),
        ).fetchall()


def _distinct(labels: Sequence[str]) -> tuple[str, ...]:
    """`labels` without repeats, first spelling first (most have none or one)."""
    return tuple(dict.fromkeys(labels)) if len(labels) > 1 else tuple(labels)


def _made_id() -> str:
    """A new memory id: 11 hex digits of the current millisecond, then 5 random ones.

    Ids made close together share their start, so a batch's ids go in at the end of the
    (parent, id) index instead of on as many random pages as it has memories: each page a
    transaction changes is written to the WAL at commit, then again at the checkpoint. A
    repeated id is drawn again (`_new_ids` checks every one under the write lock).
    """
    return f"{time.time_ns() // 1_000_000 & 0xFFFFFFFFFFF:011x}{secrets.randbits(20):05x}"


def _new_ids(
    connection: sqlite3.Connection, slot: int | None, count: int, taken: set[str]
) -> list[str]:
    """`count` new memory ids that the parent in `slot` does not hold, nor `taken` names."""
    made: list[str] = []
    while len(made) < count:
        wanted = {_made_id() for _ in range(count - len(made))} - taken
        wanted -= set(made)
        candidates = list(wanted)
        held = {row[0] for row in _rows_in_slot(connection, "m.id", slot, "id", candidates)}
        made += [candidate for candidate in candidates if candidate not in held]
    # ids drawn again after a repeat may sort before the first ones: a batch's ids ascend
    return sorted(made)


def _stored_by_id(
    connection: sqlite3.Connection, slot: int | None, ids: Sequence[str]
) -> dict[str, Memory]:
    """The memories of the parent in `slot` already stored under these ids."""
    return {
        row[2]: _required(memory_from_row(row))
        for row in _rows_in_slot(connection, MEMORY_COLUMNS, slot, "id", ids)
    }


class SqliteProvider:
    """The SQLite adapter: every method runs its blocking work in a worker thread."""

    def __init__(self, settings: SqliteSettings) -> None:
        self._settings = settings
        self._store = StoreConnections(
            settings.path,
            busy_timeout_ms=settings.busy_timeout_ms,
            synchronous=settings.synchronous,
            own_folder=settings.own_folder,
        )
        # bumped by every failure of the store: a cached "ready" never outlives one
        self._failures = 0
        # shared with the other Providers open on the same file in this process: a new
        # generation finds the indexes the last one built
        self._vectors = shared_cache(str(settings.path.resolve()))
        self._indexing = Indexing(self._store.connection, settings.approximate_above)
        self._ready: tuple[int, float] | None = None
        self._disposed = False

    def __repr__(self) -> str:
        return "SqliteProvider()"

    @property
    def path(self) -> Path:
        """The database file."""
        return self._settings.path

    @property
    def _durable(self) -> bool:
        # only a full sync makes a committed transaction survive power loss
        return self._settings.synchronous == "full"

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        return await run_blocking(self._guarded, work)

    def _guarded(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            with self._store.connection() as connection:
                return work(connection)
        except ProviderError as exc:
            if exc.code not in _REQUEST_FAULTS:
                self._failures += 1
            raise
        except SlotsExhausted:
            self._failures += 1
            raise ProviderError("unavailable", "the store cannot number another space") from None
        except (sqlite3.Error, OSError, ValueError) as exc:
            self._failures += 1
            raise store_error(exc) from None

    # ------------------------------------------------------------------ status

    async def status(self, request: StatusRequest) -> ProviderStatus:
        """Open (and create or migrate) the store; report per-parent counts on request.

        The Source asks for health (no counts) once per turn. When the store was found ready
        less than `STATUS_MAX_AGE` seconds ago and no call has failed on it since (its failure
        generation has not moved), that answer is given again from memory instead of spending
        a worker thread and a query on it.
        """
        if request.count and request.parents:
            return await run_blocking(self._status, request)
        now = time.monotonic()
        ready = self._ready
        if ready is not None and ready[0] == self._failures and now - ready[1] < STATUS_MAX_AGE:
            return _READY
        generation = self._failures  # taken first: a failure while checking is not hidden
        status = await run_blocking(self._status, request)
        self._ready = (generation, now) if status.availability == "ready" else None
        return status

    def _status(self, request: StatusRequest) -> ProviderStatus:
        try:
            with self._store.connection() as connection:
                namespaces: tuple[NamespaceStatus, ...] = ()
                if request.count and request.parents:
                    counts = dict(
                        connection.execute(
                            "SELECT parent, documents FROM namespaces WHERE parent IN "
                            f"({','.join('?' * len(request.parents))})",
                            request.parents,
                        ).fetchall()
                    )
                    namespaces = tuple(
                        NamespaceStatus(parent=parent, memories=int(counts.get(parent, 0)))
                        for parent in request.parents
                    )
                else:
                    connection.execute("SELECT 1 FROM namespaces LIMIT 1").fetchall()
        except ProviderError as exc:
            return ProviderStatus(availability="unavailable", reason=store_reason(exc))
        except (sqlite3.Error, OSError, ValueError) as exc:
            return ProviderStatus(availability="unavailable", reason=store_reason(exc))
        return ProviderStatus(availability="ready", namespaces=namespaces)

    # ------------------------------------------------------------------ reads

    async def search(self, request: SearchRequest) -> SearchResult:
        """Full-text search ranked by BM25 (see `_sqlite_search`)."""
        return await self._run(lambda connection: search_store(connection, request))

    async def list(self, request: ListRequest) -> ListResult:
        """One page of a parent's memories, newest first."""
        return await self._run(lambda connection: self._list(connection, request))

    def _list(self, connection: sqlite3.Connection, request: ListRequest) -> ListResult:
        before = COUNTER_SPAN  # the cursor is the in-parent position of the last row shown
        if request.cursor is not None:
            if not request.cursor.isdigit() or int(request.cursor) >= COUNTER_SPAN:
                raise ProviderError("invalid_payload", "the cursor is not one this store made")
            before = int(request.cursor)
        slot = namespace_slot(connection, request.parent, create=False)
        if slot is None:
            return ListResult()
        low, _ = slot_range(slot)
        rows = connection.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq BETWEEN ? AND ? "
            "ORDER BY m.seq DESC LIMIT ?",
            (low, low + before - 1, request.limit + 1),
        ).fetchall()
        page = rows[: request.limit]
        memories = tuple(memory for memory in map(memory_from_row, page) if memory is not None)
        cursor = str(page[-1][0] - low) if len(rows) > request.limit else None
        return ListResult(memories=memories, next_cursor=cursor)

    async def get(self, request: GetRequest) -> GetResult:
        """One memory by id, or None."""
        return await self._run(lambda connection: self._get(connection, request))

    def _get(self, connection: sqlite3.Connection, request: GetRequest) -> GetResult:
        slot = namespace_slot(connection, request.parent, create=False)
        row = connection.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {IN_SLOT} AND m.id = ?",
            (slot, request.id),
        ).fetchone()
        return GetResult(memory=None if row is None else memory_from_row(row))

    async def get_many(self, requests: Sequence[GetRequest]) -> builtins.list[GetResult]:
        """Memories by id, one result per request, in order: one query per parent and 500 ids.

        The requests may name several parents; each id is looked up in its own parent only.
        """
        if not requests:
            return []
        return await self._run(lambda connection: self._get_many(connection, requests))

    def _get_many(
        self, connection: sqlite3.Connection, requests: Sequence[GetRequest]
    ) -> builtins.list[GetResult]:
        wanted: dict[str, set[str]] = {}
        for request in requests:
            wanted.setdefault(request.parent, set()).add(request.id)
        found: dict[tuple[str, str], Memory | None] = {}
        for parent, ids in wanted.items():
            slot = namespace_slot(connection, parent, create=False)
            for row in _rows_in_slot(connection, MEMORY_COLUMNS, slot, "id", sorted(ids)):
                found[(parent, row[2])] = memory_from_row(row)
        # results are frozen: every miss can share one
        missing = GetResult()
        return [
            missing if (memory := found.get((r.parent, r.id))) is None else GetResult(memory=memory)
            for r in requests
        ]

    async def related(self, request: RelatedRequest) -> RelatedResult:
        """Memories linked to one memory, most recently linked first."""
        return await self._run(lambda connection: self._related(connection, request))

    def _related(self, connection: sqlite3.Connection, request: RelatedRequest) -> RelatedResult:
        slot = namespace_slot(connection, request.parent, create=False)
        exists = connection.execute(
            f"SELECT 1 FROM memories m WHERE {IN_SLOT} AND m.id = ?", (slot, request.id)
        ).fetchone()
        if exists is None:
            raise ProviderError("not_found", "no such memory")
        rows = connection.execute(
            f"SELECT {MEMORY_COLUMNS}, l.relation, 'outgoing', l.created_at FROM links l "
            f"JOIN memories m ON {IN_SLOT} AND m.id = l.target "
            "WHERE l.parent = ? AND l.source = ? "
            f"UNION ALL SELECT {MEMORY_COLUMNS}, l.relation, 'incoming', l.created_at FROM links l "
            f"JOIN memories m ON {IN_SLOT} AND m.id = l.source "
            "WHERE l.parent = ? AND l.target = ? "
            "ORDER BY 11 DESC LIMIT ?",
            (slot, request.parent, request.id, slot, request.parent, request.id, request.limit),
        ).fetchall()
        related = []
        for row in rows:
            memory = memory_from_row(row)
            if memory is not None:
                related.append(RelatedMemory(memory=memory, relation=row[8], direction=row[9]))
        return RelatedResult(related=tuple(related))

    async def entity_index(self, request: EntityIndexRequest) -> EntityIndexResult:
        """Entities of one parent, most mentioned first."""
        return await self._run(lambda connection: self._entities(connection, request))

    def _entities(
        self, connection: sqlite3.Connection, request: EntityIndexRequest
    ) -> EntityIndexResult:
        prefix = entity_key(request.prefix or "")
        slot = namespace_slot(connection, request.parent, create=False)
        rows = connection.execute(
            "SELECT name, memories FROM entities WHERE slot = ? AND key >= ? AND key < ? "
            "ORDER BY memories DESC, key LIMIT ?",
            (slot, prefix, prefix + "\U0010ffff", request.limit),
        ).fetchall()
        entities = []
        for name, mentions in rows:
            try:
                entities.append(EntityCount(name=name, memories=mentions))
            except ValueError:
                continue  # a malformed name written by something else is skipped
        return EntityIndexResult(entities=tuple(entities))

    # ------------------------------------------------------------------ writes

    async def remember(self, request: RememberRequest) -> RememberResult:
        """Store one memory in its own transaction; a repeated key returns the existing one."""
        return await self._run(lambda connection: self._remember(connection, request))

    async def remember_many(self, requests: Sequence[RememberRequest]) -> Sequence[RememberResult]:
        """Store many memories in one transaction (one fsync); one result per request, in order.

        Idempotency holds within the batch as across batches: a repeated key, in the store or
        earlier in the batch, stores nothing and returns the memory already there. Either the
        whole batch is stored or, on an error, none of it.
        """
        if not requests:
            return []
        return await self._run(lambda connection: self._remember_batch(connection, requests))

    def _remember(self, connection: sqlite3.Connection, request: RememberRequest) -> RememberResult:
        # with the other remembers of this process waiting for the write turn, if any
        return self._store.write_together(
            request, lambda requests: self._remember_together(connection, requests)
        )

    def _remember_together(
        self, connection: sqlite3.Connection, requests: builtins.list[RememberRequest]
    ) -> builtins.list[RememberResult]:
        connection.execute("BEGIN IMMEDIATE")
        try:
            results = self._write_many(connection, requests)
            connection.execute("COMMIT" if any(r.created for r in results) else "ROLLBACK")
        except BaseException:
            if connection.in_transaction:  # the requests may be written again one by one
                with suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            raise
        return results

    def _remember_batch(
        self, connection: sqlite3.Connection, requests: Sequence[RememberRequest]
    ) -> Sequence[RememberResult]:
        with self._store.writing():
            # a failure leaves the transaction open: the pool rolls it back, so none is stored
            connection.execute("BEGIN IMMEDIATE")
            results = self._write_many(connection, requests)
            connection.execute("COMMIT")
        return results

    def _write_many(
        self, connection: sqlite3.Connection, requests: Sequence[RememberRequest]
    ) -> builtins.list[RememberResult]:
        """Insert memories inside the caller's open transaction; one result per request.

        A request whose idempotency key (or memory id) is in the store already, or earlier
        in `requests`, stores nothing and gets the memory already there.
        """
        durable = self._durable
        created_at = _now()  # one transaction, one time: the store keeps it in 8 bytes once
        results: builtins.list[RememberResult | None] = [None] * len(requests)
        by_parent: dict[str, builtins.list[int]] = {}
        full_text: builtins.list[tuple[Any, ...]] = []  # every parent's, in one statement
        for index, request in enumerate(requests):
            by_parent.setdefault(request.parent, []).append(index)
        for parent, indexes in by_parent.items():
            digests = {
                index: idempotency_digest(key)
                for index in indexes
                if (key := requests[index].idempotency_key)
            }
            # None: a parent never written to (numbered by its first write below)
            slot = namespace_slot(connection, parent, create=False)
            stored = _stored_by_key(connection, slot, list(digests.values()))
            ids = [m_id for index in indexes if (m_id := requests[index].memory_id) is not None]
            stored_ids = _stored_by_id(connection, slot, ids)
            batch_keys: dict[bytes, Memory] = {}
            batch_ids: dict[str, Memory] = {}
            fresh: builtins.list[NewMemory] = []
            taken = set(ids)  # a made-up id never takes one that a later request names
            unnamed = sum(1 for index in indexes if requests[index].memory_id is None)
            made = iter(_new_ids(connection, slot, unnamed, taken))
            for index in indexes:
                request = requests[index]
                digest = digests.get(index)
                existing = None
                if digest is not None:
                    existing = stored.get(digest) or batch_keys.get(digest)
                if existing is None and request.memory_id is not None:
                    existing = stored_ids.get(request.memory_id) or batch_ids.get(request.memory_id)
                if existing is not None:
                    results[index] = built(
                        RememberResult, {"memory": existing, "created": False, "durable": durable}
                    )
                    continue
                memory_id = request.memory_id or next(made)
                memory = built(
                    Memory,
                    {
                        "parent": parent,
                        "id": memory_id,
                        "text": request.text,
                        "tags": _distinct(request.tags),
                        "entities": _distinct(request.entities),
                        "created_at": created_at,
                    },
                )
                fresh.append(
                    NewMemory(
                        memory_id, memory.text, memory.tags, memory.entities, created_at, digest
                    )
                )
                if digest is not None:
                    batch_keys[digest] = memory
                batch_ids[memory_id] = memory
                results[index] = built(
                    RememberResult, {"memory": memory, "created": True, "durable": durable}
                )
            insert_memories(connection, parent, fresh, slot=slot, full_text=full_text)
        insert_full_text(connection, full_text)
        return [result for result in results if result is not None]

    async def forget(self, request: ForgetRequest) -> ForgetResult:
        """Delete one memory with its entities and links, in one transaction."""
        return await self._run(lambda connection: self._forget(connection, request))

    def _forget(self, connection: sqlite3.Connection, request: ForgetRequest) -> ForgetResult:
        with self._store.writing():
            connection.execute("BEGIN IMMEDIATE")
            forgotten = delete_memory(connection, request.parent, request.id)
            connection.execute("COMMIT" if forgotten else "ROLLBACK")
        return ForgetResult(forgotten=forgotten, durable=self._durable)

    async def link(self, request: LinkRequest) -> LinkResult:
        """Link two memories of one parent (both must exist)."""
        return await self._run(lambda connection: self._link(connection, request))

    def _link(self, connection: sqlite3.Connection, request: LinkRequest) -> LinkResult:
        if request.source_id == request.target_id:
            raise ProviderError("invalid_payload", "a memory cannot be linked to itself")
        with self._store.writing():
            connection.execute("BEGIN IMMEDIATE")
            slot = namespace_slot(connection, request.parent, create=False)
            found = connection.execute(
                f"SELECT count(*) FROM memories m WHERE {IN_SLOT} AND m.id IN (?, ?)",
                (slot, request.source_id, request.target_id),
            ).fetchone()[0]
            if found != 2:
                connection.execute("ROLLBACK")
                raise ProviderError("not_found", "both memories must exist in the parent")
            cursor = connection.execute(
                "INSERT OR IGNORE INTO links (parent, source, target, relation, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (request.parent, request.source_id, request.target_id, request.relation, _now()),
            )
            created = cursor.rowcount == 1
            connection.execute("COMMIT")
        return LinkResult(created=created, durable=self._durable)

    # ------------------------------------------------------------------ vectors

    async def register_space(self, request: RegisterSpaceRequest) -> RegisterSpaceResult:
        """Keep vectors of the space; refused (`space_changed`) if its identity changed."""
        return await self._run(lambda connection: self._register(connection, request))

    def _register(
        self, connection: sqlite3.Connection, request: RegisterSpaceRequest
    ) -> RegisterSpaceResult:
        with self._store.writing():
            connection.execute("BEGIN IMMEDIATE")
            try:
                result = register_space(connection, request)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        return result

    async def store_vectors(self, request: StoreVectorsRequest) -> StoreVectorsResult:
        """Replace the vectors of some memories of one parent, in one transaction."""
        return await self._run(lambda connection: self._store_vectors(connection, request))

    def _store_vectors(
        self, connection: sqlite3.Connection, request: StoreVectorsRequest
    ) -> StoreVectorsResult:
        with self._store.writing():
            connection.execute("BEGIN IMMEDIATE")
            try:
                stored = store_vectors(connection, request.parent, request.space, request.memories)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        return StoreVectorsResult(stored=stored, durable=self._durable)

    async def vector_search(self, request: VectorSearchRequest) -> SearchResult:
        """The memories nearest to a vector, by their best segment, best first."""
        found = await self._run(
            lambda connection: search_vectors(
                connection,
                self._vectors,
                self._indexing,
                request.parents,
                request.space,
                request.vector,
                request.limit,
            )
        )
        return SearchResult(
            hits=tuple(SearchHit(memory=memory, score=score) for memory, score in found)
        )

    async def vector_search_kind(self, parent: str, space: str) -> str:
        """How `parent`'s vectors in `space` are searched now (SQLite only, for people).

        `exact` (every vector read), `indexing` (exact while an HNSW index is built on a
        thread of its own) or `approximate` (the index, and exactly what changed since).
        """

        def kind(connection: sqlite3.Connection) -> str:
            slot = namespace_slot(connection, parent, create=False)
            return (
                "exact" if slot is None else self._vectors.kind(space_slot(connection, space), slot)
            )

        return await self._run(kind)

    async def missing_vectors(self, request: MissingVectorsRequest) -> MissingVectorsResult:
        """Memories without vectors in a space yet, oldest first, and how many in all."""
        memories, remaining = await self._run(
            lambda connection: missing_vectors(
                connection, request.parent, request.space, request.limit
            )
        )
        return MissingVectorsResult(memories=tuple(memories), remaining=remaining)

    async def dispose(self) -> None:
        """Close every connection (lent ones close when they come back)."""
        self._ready = None
        if not self._disposed:
            self._disposed = True
            release_cache(str(self._settings.path.resolve()), self._vectors)
        self._store.close()


def _create(init: ProviderInit) -> SqliteProvider:
    return SqliteProvider(SqliteSettings.parse(init))


SQLITE_PROVIDER = define_space_provider(MANIFEST, _create)
