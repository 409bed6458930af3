"""Vectors in the PostgreSQL store: a registry of spaces, segment vectors, nearest memories.

A memory's vectors are rows of `vectors`, one per segment, keyed by its partition, its id
and the space; they go with the memory when it is forgotten (the foreign key cascades). The
column holding them is pgvector's `vector` when the server has the extension (search is one
SQL statement per recall, the metric's own operator scoring every segment of the asked
partitions), else float16 `bytea` searched exactly by this process (see `_vector_matrix`).
Either way a memory is scored by its best segment and the score is the Provider SDK's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg.errors
from mnemon_source_spaces import (
    Memory,
    MemoryVectors,
    ProviderError,
    RegisterSpaceRequest,
    RegisterSpaceResult,
)
from psycopg import AsyncConnection, sql
from pydantic import ValidationError

from mnemon.sdk import VectorSpace, space_registration_conflict

from ._rows import MEMORY_COLUMNS, memory_from_row
from ._schema import VectorColumn
from ._vector_matrix import MatrixCache, encode_float16, nearest_in_matrix

__all__ = ["SpaceRow", "VectorStore"]

#: the largest magnitude pgvector's float32 keeps
FLOAT32_MAX = 3.4028234663852886e38
#: the largest magnitude float16 keeps
FLOAT16_MAX = 65504.0
#: past this a logistic is 0 or 1 in float8 anyway; PostgreSQL's exp() refuses far beyond
_EXP_BOUND = 700
#: the metrics a registered space may have (what `mnemon.sdk.VectorSpace` allows)
_METRICS = ("cosine", "dot", "l2")


@dataclass(frozen=True, slots=True)
class SpaceRow:
    """A registered space as the store numbers it."""

    id: int
    dimensions: int
    metric: str


def _refused(message: str) -> ProviderError:
    return ProviderError("invalid_payload", message)


def _damaged(what: str) -> ProviderError:
    # data this Provider did not write (or a broken disk): said plainly, nothing of it quoted
    return ProviderError("provider_error", f"the store holds a damaged {what}")


def checked_vector(space: SpaceRow, vector: Sequence[Any], largest: float) -> list[float] | None:
    """The vector as it is kept: its size and numbers checked, unit length under cosine.

    Returns None for a zero vector under cosine (it has no direction).

    Raises:
        ProviderError: `invalid_payload` naming what is wrong with it.
    """
    if len(vector) != space.dimensions:
        raise _refused(f"a vector of {len(vector)} numbers, where the space has {space.dimensions}")
    if not all(isinstance(x, float | int) and not isinstance(x, bool) for x in vector):
        raise _refused("a vector holds something that is not a number")
    values = [float(x) for x in vector]
    if not all(math.isfinite(x) and abs(x) <= largest for x in values):
        raise _refused(f"a vector holds a number that is not finite, or beyond {largest:g}")
    if space.metric != "cosine":
        return values
    norm = math.hypot(*values)
    if norm == 0.0:
        return None
    return [x / norm for x in values]  # kept unit length, as every Provider compares them


def _vector_text(values: Sequence[float]) -> str:
    """The text form pgvector reads (`[1.0,2.5]`); repr keeps every float32 digit."""
    return "[" + ",".join(repr(x) for x in values) + "]"


class VectorStore:
    """The vector statements of one schema, for either kind of column."""

    def __init__(self, schema: str) -> None:
        name = sql.Identifier(schema)
        self._names = {
            "memories": sql.SQL("{}.memories").format(name),
            "vectors": sql.SQL("{}.vectors").format(name),
            "spaces": sql.SQL("{}.vector_spaces").format(name),
            "versions": sql.SQL("{}.vector_versions").format(name),
        }
        # a registered space never changes under its identity: its row is kept once read
        self._spaces: dict[str, SpaceRow] = {}
        self.matrices = MatrixCache()

    def _sql(self, text: str, **extra: sql.Composable) -> sql.Composed:
        return sql.SQL(text).format(**self._names, **extra)

    # ------------------------------------------------------------------ spaces

    async def register(
        self, connection: AsyncConnection[Any], request: RegisterSpaceRequest
    ) -> RegisterSpaceResult:
        """Register the space; the same identity again must be the same space.

        Raises:
            ProviderError: `space_changed` when the identity holds another model, dimensions
                or metric.
        """
        space = request.space
        cursor = await connection.execute(
            self._sql(
                "INSERT INTO {spaces} (key, model, dimensions, metric) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (key) DO NOTHING RETURNING id"
            ),
            (space.key, space.model, space.dimensions, space.metric),
        )
        if await cursor.fetchone() is not None:
            return RegisterSpaceResult(registered=True)
        cursor = await connection.execute(
            self._sql("SELECT model, dimensions, metric FROM {spaces} WHERE key = %s"),
            (space.key,),
        )
        row = await cursor.fetchone()
        if row is None:
            raise ProviderError("provider_error", "the vector space vanished while registering")
        try:
            registered = VectorSpace(
                id=space.id, version=space.version, model=row[0], dimensions=row[1], metric=row[2]
            )
        except ValidationError:
            raise _damaged("vector space record") from None
        if space_registration_conflict(registered, space) is not None:
            raise ProviderError(
                "space_changed",
                f"vector space {space.key} is registered with another model, dimensions or "
                "metric: give the new vectors a new version",
            )
        return RegisterSpaceResult(registered=False)

    async def space(self, connection: AsyncConnection[Any], key: str) -> SpaceRow:
        """The registered space `key` (`id@version`).

        Raises:
            ProviderError: `invalid_payload` when it was never registered.
        """
        known = self._spaces.get(key)
        if known is not None:
            return known
        cursor = await connection.execute(
            self._sql("SELECT id, dimensions, metric FROM {spaces} WHERE key = %s"), (key,)
        )
        row = await cursor.fetchone()
        if row is None:
            raise _refused("the vector space is not registered")
        if row[1] < 1 or row[2] not in _METRICS:
            raise _damaged("vector space record")
        found = SpaceRow(int(row[0]), int(row[1]), str(row[2]))
        self._spaces[key] = found
        return found

    # ------------------------------------------------------------------ writes

    async def store(
        self,
        connection: AsyncConnection[Any],
        column: VectorColumn,
        parent: str,
        key: str,
        memories: Sequence[MemoryVectors],
    ) -> int:
        """Replace the vectors of `memories` in space `key`, in one transaction.

        Every vector is checked before anything is written: one bad vector stores nothing.

        Returns:
            How many memories the parent still holds and got their vectors (others skipped).

        Raises:
            ProviderError: `invalid_payload` for an unregistered space or a bad vector.
        """
        space = await self.space(connection, key)
        largest = FLOAT32_MAX if column.pgvector else FLOAT16_MAX
        rows: list[tuple[str, int, int, int, Any]] = []
        for memory in memories:
            for number, segment in enumerate(memory.segments):
                values = checked_vector(space, segment.vector, largest)
                if values is None:
                    raise _refused("a zero vector has no direction under cosine")
                kept: Any = _vector_text(values) if column.pgvector else encode_float16(values)
                rows.append((memory.id, number, segment.start, segment.end, kept))
        asked = list(dict.fromkeys(memory.id for memory in memories))
        async with connection.transaction():
            # KEY SHARE: a memory found here cannot be forgotten before these rows commit
            cursor = await connection.execute(
                self._sql(
                    "SELECT id FROM {memories} WHERE parent = %s AND id = ANY(%s) FOR KEY SHARE"
                ),
                (parent, asked),
            )
            held = {row[0] for row in await cursor.fetchall()}
            if not held:
                return 0  # every one was forgotten meanwhile (or never held here)
            kept_rows = [row for row in rows if row[0] in held]
            await connection.execute(
                self._sql(
                    "DELETE FROM {vectors} WHERE parent = %s AND space = %s AND memory = ANY(%s)"
                ),
                (parent, space.id, sorted(held)),
            )
            embedding = (
                sql.SQL("u.embedding::{}").format(column.type_name)
                if column.pgvector
                else sql.SQL("u.embedding")
            )
            await connection.execute(
                self._sql(
                    'INSERT INTO {vectors} (parent, memory, space, segment, start, "end", '
                    "embedding) SELECT %s, u.memory, %s, u.segment, u.start, u.stop, {embedding} "
                    "FROM unnest(%s::text[], %s::integer[], %s::integer[], %s::integer[], "
                    "{array}) AS u(memory, segment, start, stop, embedding)",
                    embedding=embedding,
                    array=sql.SQL("%s::text[]" if column.pgvector else "%s::bytea[]"),
                ),
                (
                    parent,
                    space.id,
                    [row[0] for row in kept_rows],
                    [row[1] for row in kept_rows],
                    [row[2] for row in kept_rows],
                    [row[3] for row in kept_rows],
                    [row[4] for row in kept_rows],
                ),
            )
            await self.bump(connection, parent)
        return len(held)

    async def bump(self, connection: AsyncConnection[Any], parent: str) -> None:
        """Move the partition's vector version: every cached matrix of it is stale."""
        await connection.execute(
            self._sql(
                "INSERT INTO {versions} AS w (parent, version) VALUES (%s, 1) "
                "ON CONFLICT (parent) DO UPDATE SET version = w.version + 1"
            ),
            (parent,),
        )

    # ------------------------------------------------------------------ reads

    async def search(
        self,
        connection: AsyncConnection[Any],
        column: VectorColumn,
        parents: Sequence[str],
        key: str,
        vector: Sequence[Any],
        limit: int,
    ) -> list[tuple[Memory, float]]:
        """The memories of `parents` nearest to `vector` in space `key`, best first.

        Raises:
            ProviderError: `invalid_payload` for an unregistered space or a bad query.
        """
        space = await self.space(connection, key)
        largest = FLOAT32_MAX if column.pgvector else FLOAT16_MAX
        query = checked_vector(space, vector, largest)
        if column.pgvector:
            best = await self._search_sql(connection, column, space, parents, query, limit)
        else:
            best = await nearest_in_matrix(
                connection, self.matrices, self._names, space, parents, query, limit
            )
        return await self._memories(connection, best)

    def _score(self, column: VectorColumn, space: SpaceRow, zero_query: bool) -> sql.Composable:
        """The SDK's score of one segment, from the metric's pgvector operator."""
        vector = sql.SQL("%(query)s::{}").format(column.type_name)
        if space.metric == "l2":
            return sql.SQL("1.0 / (1.0 + (v.embedding OPERATOR({}.<->) {}))").format(
                column.schema, vector
            )
        if space.metric == "dot":  # <#> is the negated inner product: logistic(-x)
            return sql.SQL(
                "1.0 / (1.0 + exp(least(greatest(v.embedding OPERATOR({}.<#>) {}, -{}), {})))"
            ).format(column.schema, vector, sql.Literal(_EXP_BOUND), sql.Literal(_EXP_BOUND))
        if zero_query:
            return sql.SQL("0.5")  # a zero query has no direction: every vector is as near
        return sql.SQL(
            "greatest(0.0, least(1.0, 1.0 - (v.embedding OPERATOR({}.<=>) {}) / 2.0))"
        ).format(column.schema, vector)

    async def _search_sql(
        self,
        connection: AsyncConnection[Any],
        column: VectorColumn,
        space: SpaceRow,
        parents: Sequence[str],
        query: list[float] | None,
        limit: int,
    ) -> list[tuple[str, str, float]]:
        """(parent, id, score) of the nearest memories, by their best segment, in one statement."""
        score = self._score(column, space, query is None)
        values = query if query is not None else [0.0] * space.dimensions
        try:
            cursor = await connection.execute(
                self._sql(
                    "SELECT v.parent, v.memory, max({score}) AS score FROM {vectors} v "
                    "WHERE v.parent = ANY(%(parents)s) AND v.space = %(space)s "
                    "GROUP BY v.parent, v.memory ORDER BY score DESC, v.parent, v.memory "
                    "LIMIT %(limit)s",
                    score=score,
                ),
                {
                    "parents": list(parents),
                    "space": space.id,
                    "query": _vector_text(values),
                    "limit": limit,
                },
            )
        except psycopg.errors.DataException:
            # the query was checked against the space: a stored vector of other dimensions
            raise _damaged("vector (its dimensions are not its space's)") from None
        return [(row[0], row[1], float(row[2])) for row in await cursor.fetchall()]

    async def _memories(
        self, connection: AsyncConnection[Any], best: Sequence[tuple[str, str, float]]
    ) -> list[tuple[Memory, float]]:
        """The memories of `best`, best first (the newer first among equal scores)."""
        if not best:
            return []
        cursor = await connection.execute(
            self._sql(
                f"SELECT {MEMORY_COLUMNS} FROM {{memories}} m "
                "JOIN unnest(%s::text[], %s::text[]) AS w(parent, id) "
                "ON m.parent = w.parent AND m.id = w.id"
            ),
            ([parent for parent, _, _ in best], [memory for _, memory, _ in best]),
        )
        rows = {(row[0], row[1]): row for row in await cursor.fetchall()}
        found: list[tuple[float, int, Memory]] = []
        for parent, memory_id, score in best:
            row = rows.get((parent, memory_id))
            memory = None if row is None else memory_from_row(row)
            if row is not None and memory is not None:
                clean = score if math.isfinite(score) else 0.0
                found.append((min(1.0, max(0.0, clean)), int(row[6]), memory))
        found.sort(key=lambda item: (-item[0], -item[1]))
        return [(memory, score) for score, _, memory in found]

    async def missing(
        self, connection: AsyncConnection[Any], parent: str, key: str, limit: int
    ) -> tuple[list[Memory], int]:
        """Memories of `parent` without vectors in space `key`, oldest first, and how many.

        Raises:
            ProviderError: `invalid_payload` for an unregistered space.
        """
        space = await self.space(connection, key)
        cursor = await connection.execute(
            self._sql(
                f"SELECT {MEMORY_COLUMNS}, count(*) OVER () FROM {{memories}} m "
                "WHERE m.parent = %s AND NOT EXISTS (SELECT 1 FROM {vectors} v "
                "WHERE v.parent = m.parent AND v.memory = m.id AND v.space = %s) "
                "ORDER BY m.seq LIMIT %s"
            ),
            (parent, space.id, limit),
        )
        rows = await cursor.fetchall()
        memories = [memory for memory in map(memory_from_row, rows) if memory is not None]
        return memories, int(rows[0][7]) if rows else 0
