"""Exact vector search in this process, for a server without pgvector.

The vectors are float16 `bytea` rows. One partition's vectors of one space are loaded as one
float32 matrix and kept in a cache; a search is then one matrix product per partition. A
matrix is reloaded when its partition's vector version moved: every write and delete of
vectors moves it in the same transaction, whichever host made it (a trigger does so for
deletes, forgotten memories included). numpy is imported here only, when vectors are used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mnemon_source_spaces import ProviderError
from psycopg import AsyncConnection, sql

if TYPE_CHECKING:
    from ._vectors import SpaceRow

__all__ = ["MatrixCache", "encode_float16", "nearest_in_matrix", "numpy"]

#: the most float32 matrix bytes kept cached across partitions, least recently used dropped
CACHE_BYTES = 256 * 1024 * 1024


def numpy() -> Any:
    """numpy, imported on first use.

    Raises:
        ProviderError: `unsupported` when it is not installed (the `vectors` extra).
    """
    try:
        import numpy as np
    except ModuleNotFoundError:
        raise ProviderError(
            "unsupported",
            "vectors without pgvector need numpy: pip install 'mnemon-spaces-postgres[vectors]'",
        ) from None
    return np


def encode_float16(values: Sequence[float]) -> bytes:
    """A checked vector as the fallback keeps it: little-endian float16."""
    np = numpy()
    encoded: bytes = np.asarray(values, dtype="<f2").tobytes()
    return encoded


@dataclass(frozen=True, slots=True)
class _Matrix:
    version: int
    ids: tuple[str, ...]  # the memory of each group of rows, in row order
    starts: Any  # int64 [memories]: where each memory's rows begin
    matrix: Any  # float32 [rows, dimensions]

    @property
    def size(self) -> int:
        return int(self.matrix.nbytes)


class MatrixCache:
    """The float32 matrices of (space, partition), least recently used first out."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self._budget = budget
        self._matrices: OrderedDict[tuple[int, str], _Matrix] = OrderedDict()

    def get(self, key: tuple[int, str], version: int) -> _Matrix | None:
        """The cached matrix of `key` when it is still at `version`."""
        cached = self._matrices.get(key)
        if cached is None or cached.version != version:
            return None
        self._matrices.move_to_end(key)
        return cached

    def put(self, key: tuple[int, str], matrix: _Matrix) -> None:
        """Keep `matrix`, dropping the least recently used past the budget."""
        self._matrices[key] = matrix
        self._matrices.move_to_end(key)
        total = sum(m.size for m in self._matrices.values())
        while total > self._budget and len(self._matrices) > 1:
            _, dropped = self._matrices.popitem(last=False)
            total -= dropped.size

    def clear(self) -> None:
        """Forget every matrix."""
        self._matrices.clear()


async def _load(
    connection: AsyncConnection[Any],
    names: Mapping[str, sql.Composable],
    space: SpaceRow,
    parent: str,
) -> _Matrix:
    """The partition's vectors of the space and the version they are at, as one snapshot."""
    # one statement is one snapshot: the version read is the one of the rows read
    cursor = await connection.execute(
        sql.SQL(
            "SELECT coalesce((SELECT version FROM {versions} WHERE parent = %(parent)s), 0), "
            "v.memory, v.embedding FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT memory, "
            "segment, embedding FROM {vectors} WHERE parent = %(parent)s AND space = %(space)s) v "
            "ON true ORDER BY v.memory, v.segment"
        ).format(**names),
        {"parent": parent, "space": space.id},
    )
    rows = await cursor.fetchall()
    version = int(rows[0][0])
    rows = [row for row in rows if row[1] is not None]

    def build() -> _Matrix:
        np = numpy()
        ids: list[str] = []
        starts: list[int] = []
        for index, row in enumerate(rows):
            if not ids or ids[-1] != row[1]:
                ids.append(row[1])
                starts.append(index)
        if any(len(row[2]) != 2 * space.dimensions for row in rows):
            raise ProviderError(
                "provider_error", "the store holds a damaged vector (its size is not its space's)"
            )
        blob = b"".join(bytes(row[2]) for row in rows)
        matrix = np.frombuffer(blob, dtype="<f2").astype(np.float32)
        return _Matrix(
            version,
            tuple(ids),
            np.asarray(starts, dtype=np.int64),
            matrix.reshape(len(rows), space.dimensions),
        )

    return await anyio.to_thread.run_sync(build)


def _best(space: SpaceRow, loaded: _Matrix, query: Any, limit: int) -> list[tuple[str, float]]:
    """(memory id, score) of the partition's `limit` nearest memories, by their best segment."""
    np = numpy()
    if space.metric == "l2":
        scores = 1.0 / (1.0 + np.linalg.norm(loaded.matrix - query, axis=1))
    elif query is None:
        scores = np.full(len(loaded.matrix), 0.5, dtype=np.float32)  # a zero cosine query
    else:
        product = loaded.matrix @ query
        if space.metric == "cosine":
            scores = np.clip((1.0 + product) / 2.0, 0.0, 1.0)
        else:  # dot: a logistic of the raw product, kept from overflowing
            scores = 1.0 / (1.0 + np.exp(-np.clip(product, -700.0, 700.0)))
    per_memory = np.maximum.reduceat(scores, loaded.starts)
    top = min(limit, len(per_memory))
    chosen = np.argpartition(-per_memory, top - 1)[:top]
    return [(loaded.ids[i], float(per_memory[i])) for i in chosen]


async def nearest_in_matrix(
    connection: AsyncConnection[Any],
    cache: MatrixCache,
    names: Mapping[str, sql.Composable],
    space: SpaceRow,
    parents: Sequence[str],
    query: Sequence[float] | None,
    limit: int,
) -> list[tuple[str, str, float]]:
    """(parent, id, score) of the nearest memories of `parents`, from the cached matrices.

    Raises:
        ProviderError: `unsupported` without numpy.
    """
    np = numpy()
    vector = None if query is None else np.asarray(query, dtype=np.float32)
    cursor = await connection.execute(
        sql.SQL("SELECT parent, version FROM {versions} WHERE parent = ANY(%s)").format(**names),
        (list(parents),),
    )
    versions = {row[0]: int(row[1]) for row in await cursor.fetchall()}
    best: list[tuple[str, str, float]] = []
    for parent in dict.fromkeys(parents):
        key = (space.id, parent)
        loaded = cache.get(key, versions.get(parent, 0))
        if loaded is None:
            loaded = await _load(connection, names, space, parent)
            cache.put(key, loaded)
        if not loaded.ids:
            continue
        found = await anyio.to_thread.run_sync(_best, space, loaded, vector, limit)
        best.extend((parent, memory, score) for memory, score in found)
    best.sort(key=lambda item: -item[2])
    return best[:limit]
