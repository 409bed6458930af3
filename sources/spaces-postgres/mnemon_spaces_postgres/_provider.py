"""The `postgres` Provider: memories of many hosts in one PostgreSQL schema.

Every statement names the parent (the partition key the spaces Source derived from the
scope) in its `WHERE` clause or its inserted row, so one partition never reads or writes
another's rows. Every write is one transaction; with `synchronous_commit = on` its result
says durable only after the commit returned.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from mnemon_source_spaces import (
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
from psycopg import AsyncConnection, sql
from pydantic import ValidationError

from ._rows import MEMORY_COLUMNS, entity_key, idempotency_digest, memory_from_row
from ._search import RecallStatements, WordFrequencies, search_memories
from ._settings import PostgresSettings
from ._store import STATUS_WAIT, SchemaPool, status_reason
from ._vector_matrix import numpy
from ._vectors import VectorStore

__all__ = ["POSTGRES_PROVIDER", "PostgresProvider"]

_ID_ATTEMPTS = 8

# one statement: the memory already stored under the key (first) or the asked id, or else the
# new row (text weighs most (A), then entities (B), then tags (C), as ts_rank_cd reads
# weights) with its entities; a key or id taken meanwhile by another host returns no row
_REMEMBER = (
    "WITH found AS (SELECT " + MEMORY_COLUMNS + " FROM {memories} m WHERE m.parent = %(parent)s "
    "AND ((%(key)s::text IS NOT NULL AND m.idempotency_key = %(key)s) "
    "OR (%(asked_id)s::text IS NOT NULL AND m.id = %(asked_id)s)) "
    "ORDER BY (m.idempotency_key IS NOT DISTINCT FROM %(key)s) DESC LIMIT 1), "
    "stored AS (INSERT INTO {memories} "
    "(parent, id, text, tags, entities, created_at, idempotency_key, search) "
    "SELECT %(parent)s, %(id)s, %(text)s, %(tags)s, %(entities)s, %(created)s, %(key)s, "
    "setweight(to_tsvector(%(config)s::regconfig, %(text)s), 'A') "
    "|| setweight(to_tsvector(%(config)s::regconfig, %(entity_text)s), 'B') "
    "|| setweight(to_tsvector(%(config)s::regconfig, %(tag_text)s), 'C') "
    "WHERE NOT EXISTS (SELECT 1 FROM found) ON CONFLICT DO NOTHING "
    "RETURNING parent, id, text, tags, entities, created_at, seq), "
    "named AS (INSERT INTO {entities} (parent, key, memory, name) "
    "SELECT s.parent, e.key, s.id, e.name FROM stored s, "
    "unnest(%(entity_keys)s::text[], %(entities)s::text[]) AS e(key, name) "
    "ON CONFLICT DO NOTHING) "
    "SELECT 'found', f.* FROM found f UNION ALL SELECT 'stored', s.* FROM stored s"
)

MANIFEST = {
    "type_id": "postgres",
    "package_name": "mnemon-spaces-postgres",
    "label": "PostgreSQL",
    "description": (
        "One PostgreSQL schema shared by many hosts: full-text search with tsvector, GIN and "
        "ts_rank_cd, vectors in pgvector (or float16 searched exactly without it), one "
        "transaction per write, migrations under an advisory lock."
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


class PostgresProvider:
    """The PostgreSQL adapter; its pool opens on the first call."""

    def __init__(self, settings: PostgresSettings) -> None:
        self._settings = settings
        self._store = SchemaPool(settings)
        self._frequencies = WordFrequencies(settings.schema)
        schema = sql.Identifier(settings.schema)
        self._memories = sql.SQL("{}.memories").format(schema)
        self._entities = sql.SQL("{}.entities").format(schema)
        self._links = sql.SQL("{}.links").format(schema)
        self._recall = RecallStatements(self._memories)
        self._vectors = VectorStore(settings.schema)

    def __repr__(self) -> str:
        return f"PostgresProvider(schema={self._settings.schema!r})"

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(
            memories=self._memories, entities=self._entities, links=self._links
        )

    # ------------------------------------------------------------------ status

    async def status(self, request: StatusRequest) -> ProviderStatus:
        """Connect (creating or migrating the schema); report per-parent counts on request."""
        wait = min(self._settings.pool_timeout, STATUS_WAIT)
        try:
            async with self._store.connection(wait=wait) as connection:
                namespaces: tuple[NamespaceStatus, ...] = ()
                if request.count and request.parents:
                    cursor = await connection.execute(
                        self._sql(
                            "SELECT parent, count(*) FROM {memories} "
                            "WHERE parent = ANY(%s) GROUP BY parent"
                        ),
                        (list(request.parents),),
                    )
                    counts = {parent: int(count) for parent, count in await cursor.fetchall()}
                    namespaces = tuple(
                        NamespaceStatus(parent=parent, memories=counts.get(parent, 0))
                        for parent in request.parents
                    )
                else:
                    await connection.execute("SELECT 1")
        except ProviderError as exc:
            return ProviderStatus(availability="unavailable", reason=status_reason(exc))
        return ProviderStatus(availability="ready", namespaces=namespaces)

    # ------------------------------------------------------------------ reads

    async def search(self, request: SearchRequest) -> SearchResult:
        """Full-text recall ranked with `ts_rank_cd` (see `_search`)."""
        async with self._store.connection() as connection:
            return await search_memories(
                connection,
                self._recall,
                self._settings.text_search_config,
                request,
                self._frequencies,
            )

    async def list(self, request: ListRequest) -> ListResult:
        """One page of a parent's memories, newest first."""
        before = None
        if request.cursor is not None:
            if not request.cursor.isdigit() or len(request.cursor) > 18:
                raise ProviderError("invalid_payload", "the cursor is not one this store made")
            before = int(request.cursor)
        async with self._store.connection() as connection:
            cursor = await connection.execute(
                self._sql(
                    f"SELECT {MEMORY_COLUMNS} FROM {{memories}} m WHERE m.parent = %s "
                    "AND (%s::bigint IS NULL OR m.seq < %s::bigint) ORDER BY m.seq DESC LIMIT %s"
                ),
                (request.parent, before, before, request.limit + 1),
            )
            rows = await cursor.fetchall()
        page = rows[: request.limit]
        memories = tuple(memory for memory in map(memory_from_row, page) if memory is not None)
        next_cursor = str(page[-1][6]) if len(rows) > request.limit else None
        return ListResult(memories=memories, next_cursor=next_cursor)

    async def get(self, request: GetRequest) -> GetResult:
        """One memory by id, or None."""
        async with self._store.connection() as connection:
            memory = await self._memory(connection, request.parent, request.id)
        return GetResult(memory=memory)

    async def get_many(self, requests: Sequence[GetRequest]) -> builtins.list[GetResult]:
        """Memories by id, one result per request, in order, in one statement.

        Each id is looked up in its own parent only: the pairs are joined on both columns.
        """
        if not requests:
            return []
        pairs = sorted({(request.parent, request.id) for request in requests})
        async with self._store.connection() as connection:
            cursor = await connection.execute(
                self._sql(
                    f"SELECT {MEMORY_COLUMNS} FROM {{memories}} m "
                    "JOIN unnest(%s::text[], %s::text[]) AS w(parent, id) "
                    "ON m.parent = w.parent AND m.id = w.id"
                ),
                ([parent for parent, _ in pairs], [memory_id for _, memory_id in pairs]),
            )
            rows = await cursor.fetchall()
        found = {(row[0], row[1]): memory_from_row(row) for row in rows}
        return [GetResult(memory=found.get((r.parent, r.id))) for r in requests]

    async def _memory(
        self, connection: AsyncConnection[Any], parent: str, memory_id: str
    ) -> Memory | None:
        cursor = await connection.execute(
            self._sql(
                f"SELECT {MEMORY_COLUMNS} FROM {{memories}} m WHERE m.parent = %s AND m.id = %s"
            ),
            (parent, memory_id),
        )
        row = await cursor.fetchone()
        return None if row is None else memory_from_row(row)

    async def related(self, request: RelatedRequest) -> RelatedResult:
        """Memories linked to one memory, most recently linked first."""
        async with self._store.connection() as connection:
            cursor = await connection.execute(
                self._sql("SELECT 1 FROM {memories} WHERE parent = %s AND id = %s"),
                (request.parent, request.id),
            )
            if await cursor.fetchone() is None:
                raise ProviderError("not_found", "no such memory")
            cursor = await connection.execute(
                self._sql(
                    f"SELECT {MEMORY_COLUMNS}, l.relation, 'outgoing', l.created_at "
                    "FROM {links} l JOIN {memories} m ON m.parent = l.parent AND m.id = l.target "
                    "WHERE l.parent = %s AND l.source = %s "
                    f"UNION ALL SELECT {MEMORY_COLUMNS}, l.relation, 'incoming', l.created_at "
                    "FROM {links} l JOIN {memories} m ON m.parent = l.parent AND m.id = l.source "
                    "WHERE l.parent = %s AND l.target = %s "
                    "ORDER BY 10 DESC LIMIT %s"
                ),
                (request.parent, request.id, request.parent, request.id, request.limit),
            )
            rows = await cursor.fetchall()
        related = []
        for row in rows:
            memory = memory_from_row(row)
            if memory is None:
                continue
            try:
                related.append(RelatedMemory(memory=memory, relation=row[7], direction=row[8]))
            except ValidationError:
                continue  # a malformed relation written by something else is skipped
        return RelatedResult(related=tuple(related))

    async def entity_index(self, request: EntityIndexRequest) -> EntityIndexResult:
        """Entities of one parent, most mentioned first."""
        prefix = entity_key(request.prefix or "")
        async with self._store.connection() as connection:
            cursor = await connection.execute(
                self._sql(
                    "SELECT min(name), count(*) AS mentions FROM {entities} "
                    "WHERE parent = %s AND left(key, %s) = %s "
                    'GROUP BY key ORDER BY mentions DESC, key COLLATE "C" LIMIT %s'
                ),
                (request.parent, len(prefix), prefix, request.limit),
            )
            rows = await cursor.fetchall()
        entities = []
        for name, mentions in rows:
            try:
                entities.append(EntityCount(name=name, memories=int(mentions)))
            except (ValidationError, TypeError):
                continue  # a malformed name written by something else is skipped
        return EntityIndexResult(entities=tuple(entities))

    # ------------------------------------------------------------------ writes

    async def remember(self, request: RememberRequest) -> RememberResult:
        """Store one memory in one statement; a repeated key (or id) returns the one stored.

        The lookup of the idempotency key and of the memory id, the insert and the entities'
        rows are one statement, so one round trip and one (autocommit) transaction: a write
        holds no transaction open across the network, which is what lets several hosts'
        commits share the server's WAL flushes.
        """
        digest = idempotency_digest(request.idempotency_key) if request.idempotency_key else None
        tags = tuple(dict.fromkeys(request.tags))
        entities = tuple(dict.fromkeys(request.entities))
        created = datetime.now(UTC)
        async with self._store.connection() as connection:
            for _ in range(_ID_ATTEMPTS):
                memory_id = request.memory_id or secrets.token_hex(8)
                cursor = await connection.execute(
                    self._sql(_REMEMBER),
                    {
                        "parent": request.parent,
                        "id": memory_id,
                        "asked_id": request.memory_id,
                        "text": request.text,
                        "tags": list(tags),
                        "entities": list(entities),
                        "created": created,
                        "key": digest,
                        "config": self._settings.text_search_config,
                        "entity_text": " ".join(entities),
                        "tag_text": " ".join(tags),
                        "entity_keys": [entity_key(name) for name in entities],
                    },
                )
                row = await cursor.fetchone()
                if row is None:
                    continue  # a concurrent writer took the key or the id: look again
                memory = memory_from_row(row[1:])
                if memory is None:
                    raise ProviderError("provider_error", "a stored memory is malformed")
                return RememberResult(
                    memory=memory, created=row[0] == "stored", durable=self._store.durable
                )
        raise ProviderError("provider_error", "no free memory id was found")

    async def forget(self, request: ForgetRequest) -> ForgetResult:
        """Delete one memory; its entities and links go with it (foreign keys cascade)."""
        async with self._store.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                self._sql("DELETE FROM {memories} WHERE parent = %s AND id = %s RETURNING seq"),
                (request.parent, request.id),
            )
            forgotten = await cursor.fetchone() is not None
        return ForgetResult(forgotten=forgotten, durable=self._store.durable)

    async def link(self, request: LinkRequest) -> LinkResult:
        """Link two memories of one parent (both must exist)."""
        if request.source_id == request.target_id:
            raise ProviderError("invalid_payload", "a memory cannot be linked to itself")
        async with self._store.connection() as connection, connection.transaction():
            # FOR SHARE: neither memory can be forgotten before this link commits
            cursor = await connection.execute(
                self._sql(
                    "SELECT count(*) FROM (SELECT 1 FROM {memories} "
                    "WHERE parent = %s AND id IN (%s, %s) FOR SHARE) found"
                ),
                (request.parent, request.source_id, request.target_id),
            )
            found = await cursor.fetchone()
            if found is None or found[0] != 2:
                raise ProviderError("not_found", "both memories must exist in the parent")
            cursor = await connection.execute(
                self._sql(
                    "INSERT INTO {links} (parent, source, target, relation) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1"
                ),
                (request.parent, request.source_id, request.target_id, request.relation),
            )
            created = await cursor.fetchone() is not None
        return LinkResult(created=created, durable=self._store.durable)

    # ------------------------------------------------------------------ vectors

    async def register_space(self, request: RegisterSpaceRequest) -> RegisterSpaceResult:
        """Keep vectors of the space; refused (`space_changed`) if its identity changed.

        Raises:
            ProviderError: `unsupported` when the server has no pgvector and numpy is not
                installed (the `vectors` extra); `space_changed`.
        """
        async with self._store.connection() as connection:
            if not self._store.vector_column.pgvector:
                numpy()  # the fallback searches with numpy: refuse now, not at the first search
            return await self._vectors.register(connection, request)

    async def store_vectors(self, request: StoreVectorsRequest) -> StoreVectorsResult:
        """Replace the vectors of some memories of one partition, in one transaction."""
        async with self._store.connection() as connection:
            stored = await self._vectors.store(
                connection,
                self._store.vector_column,
                request.parent,
                request.space,
                request.memories,
            )
        return StoreVectorsResult(stored=stored, durable=self._store.durable)

    async def vector_search(self, request: VectorSearchRequest) -> SearchResult:
        """The memories nearest to a vector, by their best segment, best first."""
        async with self._store.connection() as connection:
            found = await self._vectors.search(
                connection,
                self._store.vector_column,
                request.parents,
                request.space,
                request.vector,
                request.limit,
            )
        return SearchResult(
            hits=tuple(SearchHit(memory=memory, score=score) for memory, score in found)
        )

    async def missing_vectors(self, request: MissingVectorsRequest) -> MissingVectorsResult:
        """Memories without vectors in a space yet, oldest first, and how many in all."""
        async with self._store.connection() as connection:
            memories, remaining = await self._vectors.missing(
                connection, request.parent, request.space, request.limit
            )
        return MissingVectorsResult(memories=tuple(memories), remaining=remaining)

    async def dispose(self) -> None:
        """Close the pool and drop the cached vectors."""
        self._vectors.matrices.clear()
        await self._store.aclose()


def _create(init: ProviderInit) -> PostgresProvider:
    return PostgresProvider(PostgresSettings.parse(init))


POSTGRES_PROVIDER = define_space_provider(MANIFEST, _create)
