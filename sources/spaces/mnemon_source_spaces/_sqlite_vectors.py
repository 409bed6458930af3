"""Vectors in the SQLite store: a registry of spaces, float16 segment vectors, exact search.

A memory's vectors are rows keyed by its rowid, so one parent's vectors are one rowid range,
like its memories. Search is exact: the range's vectors of one space, as one float32 matrix,
times the query; the matrix is cached per (space, parent) and reloaded when the parent's
vector version (bumped by every write and delete, in the same transaction, by any process)
moves. numpy is imported only here, when vectors are used.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemon import VectorSpace, space_registration_conflict

from ._provider import (
    MemoryVectors,
    ProviderError,
    RegisterSpaceRequest,
    RegisterSpaceResult,
)
from ._sqlite_layout import IN_SLOT, slot_range
from ._sqlite_rows import MEMORY_COLUMNS, memory_from_row, namespace_slot

__all__ = ["VectorCache", "register_space", "space_slot", "store_vectors"]

#: the most float32 matrix bytes kept cached across parents, least recently used dropped
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
            "vectors need numpy: pip install 'mnemon-source-spaces[vectors]'",
        ) from None
    return np


def register_space(
    connection: sqlite3.Connection, request: RegisterSpaceRequest
) -> RegisterSpaceResult:
    """Register the space (inside the caller's write transaction).

    Raises:
        ProviderError: `space_changed` when its identity is registered with another model,
            dimensions or metric.
    """
    space = request.space
    row = connection.execute(
        "SELECT model, dimensions, metric FROM vector_spaces WHERE key = ?", (space.key,)
    ).fetchone()
    if row is not None:
        registered = VectorSpace(
            id=space.id, version=space.version, model=row[0], dimensions=row[1], metric=row[2]
        )
        if space_registration_conflict(registered, space) is not None:
            raise ProviderError(
                "space_changed",
                f"vector space {space.key} is registered with another model, dimensions or "
                "metric: give the new vectors a new version",
            )
        return RegisterSpaceResult(registered=False)
    connection.execute(
        "INSERT INTO vector_spaces (key, model, dimensions, metric) VALUES (?, ?, ?, ?)",
        (space.key, space.model, space.dimensions, space.metric),
    )
    return RegisterSpaceResult(registered=True)


@dataclass(frozen=True, slots=True)
class SpaceRow:
    """A registered space as the store numbers it."""

    slot: int
    dimensions: int
    metric: str


def space_slot(connection: sqlite3.Connection, key: str) -> SpaceRow:
    """The registered space `key` (`id@version`).

    Raises:
        ProviderError: `invalid_payload` when it was never registered.
    """
    row = connection.execute(
        "SELECT slot, dimensions, metric FROM vector_spaces WHERE key = ?", (key,)
    ).fetchone()
    if row is None:
        raise ProviderError("invalid_payload", "the vector space is not registered")
    return SpaceRow(row[0], row[1], row[2])


def _encoded(space: SpaceRow, vector: Sequence[float]) -> bytes:
    np = numpy()
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (space.dimensions,) or not np.all(np.isfinite(array)):
        raise ProviderError("invalid_payload", "a vector of the wrong size, or not finite")
    if space.metric == "cosine":
        norm = float(np.linalg.norm(array))
        if norm == 0.0:
            raise ProviderError("invalid_payload", "a zero vector has no direction")
        array = array / norm  # kept unit length: a search is then one matrix product
    encoded: bytes = array.astype("<f2").tobytes()
    return encoded


def bump_version(connection: sqlite3.Connection, slot: int) -> None:
    """Move the parent's vector version: every cached matrix of it is stale."""
    connection.execute(
        "INSERT INTO vector_versions (slot, version) VALUES (?, 1) "
        "ON CONFLICT (slot) DO UPDATE SET version = version + 1",
        (slot,),
    )


def store_vectors(
    connection: sqlite3.Connection, parent: str, key: str, memories: Sequence[MemoryVectors]
) -> int:
    """Replace the vectors of `memories` in space `key` (inside the caller's transaction).

    Returns:
        How many memories the parent still holds and got their vectors (others are skipped).

    Raises:
        ProviderError: `invalid_payload` for an unregistered space or a bad vector.
    """
    space = space_slot(connection, key)
    slot = namespace_slot(connection, parent, create=False)
    if slot is None:
        return 0
    rows: list[tuple[int, int, int, int, int, bytes]] = []
    stored = 0
    for memory in memories:
        found = connection.execute(
            f"SELECT m.seq FROM memories m WHERE {IN_SLOT} AND m.id = ?", (slot, memory.id)
        ).fetchone()
        if found is None:
            continue  # forgotten meanwhile: nothing to keep vectors of
        seq = found[0]
        connection.execute("DELETE FROM vectors WHERE seq = ? AND space = ?", (seq, space.slot))
        rows.extend(
            (seq, space.slot, number, segment.start, segment.end, _encoded(space, segment.vector))
            for number, segment in enumerate(memory.segments)
        )
        stored += 1
    connection.executemany(
        "INSERT INTO vectors (seq, space, segment, start, end, vector) VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
    if stored:
        bump_version(connection, slot)
    return stored


@dataclass(frozen=True, slots=True)
class _Matrix:
    version: int
    seqs: Any  # int64 [rows]: the memory of each row, ascending
    starts: Any  # int64 [memories]: where each memory's rows begin
    matrix: Any  # float32 [rows, dimensions]

    @property
    def size(self) -> int:
        return int(self.matrix.nbytes)


class VectorCache:
    """The float32 matrices of (space, parent), least recently used first out, thread-safe."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self._budget = budget
        self._matrices: OrderedDict[tuple[int, int], _Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def matrix(self, connection: sqlite3.Connection, space: SpaceRow, slot: int) -> _Matrix:
        """The current matrix of one parent's vectors in one space (reloaded when stale)."""
        row = connection.execute(
            "SELECT version FROM vector_versions WHERE slot = ?", (slot,)
        ).fetchone()
        version = 0 if row is None else int(row[0])
        key = (space.slot, slot)
        with self._lock:
            cached = self._matrices.get(key)
            if cached is not None and cached.version == version:
                self._matrices.move_to_end(key)
                return cached
        loaded = self._load(connection, space, slot, version)
        with self._lock:
            self._matrices[key] = loaded
            self._matrices.move_to_end(key)
            total = sum(m.size for m in self._matrices.values())
            while total > self._budget and len(self._matrices) > 1:
                _, dropped = self._matrices.popitem(last=False)
                total -= dropped.size
        return loaded

    @staticmethod
    def _load(connection: sqlite3.Connection, space: SpaceRow, slot: int, version: int) -> _Matrix:
        np = numpy()
        low, high = slot_range(slot)
        rows = connection.execute(
            "SELECT seq, vector FROM vectors WHERE seq BETWEEN ? AND ? AND space = ? "
            "ORDER BY seq, segment",
            (low, high, space.slot),
        ).fetchall()
        seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(r[1] for r in rows)
        matrix = np.frombuffer(blob, dtype="<f2").astype(np.float32)
        matrix = matrix.reshape(len(rows), space.dimensions)
        starts = np.flatnonzero(np.r_[True, seqs[1:] != seqs[:-1]]) if len(rows) else seqs
        return _Matrix(version, seqs, starts, matrix)

    def clear(self) -> None:
        """Forget every matrix."""
        with self._lock:
            self._matrices.clear()


def _scores(space: SpaceRow, matrix: Any, query: Any) -> Any:
    """A score in [0, 1] per row (1 is nearest) for the space's metric."""
    np = numpy()
    if space.metric == "l2":
        return 1.0 / (1.0 + np.linalg.norm(matrix - query, axis=1))
    product = matrix @ query
    if space.metric == "cosine":
        return np.clip((1.0 + product) / 2.0, 0.0, 1.0)
    return 1.0 / (1.0 + np.exp(-product))  # dot: a logistic of the raw product


def search_vectors(
    connection: sqlite3.Connection,
    cache: VectorCache,
    parents: Sequence[str],
    key: str,
    vector: Sequence[float],
    limit: int,
) -> list[tuple[Any, float]]:
    """The memories of `parents` nearest to `vector` in space `key`: (memory, score), best first.

    A memory is scored by its best segment.

    Raises:
        ProviderError: `invalid_payload` for an unregistered space or a query of another size.
    """
    np = numpy()
    space = space_slot(connection, key)
    query = np.asarray(vector, dtype=np.float32)
    if query.shape != (space.dimensions,) or not np.all(np.isfinite(query)):
        raise ProviderError("invalid_payload", "the query vector does not fit the space")
    if space.metric == "cosine":
        norm = float(np.linalg.norm(query))
        query = query / norm if norm > 0 else query
    best: list[tuple[float, int]] = []
    for parent in parents:
        slot = namespace_slot(connection, parent, create=False)
        if slot is None:
            continue
        loaded = cache.matrix(connection, space, slot)
        if not len(loaded.seqs):
            continue
        per_memory = np.maximum.reduceat(_scores(space, loaded.matrix, query), loaded.starts)
        seqs = loaded.seqs[loaded.starts]
        top = min(limit, len(per_memory))
        chosen = np.argpartition(-per_memory, top - 1)[:top]
        best.extend((float(per_memory[i]), int(seqs[i])) for i in chosen)
    best.sort(key=lambda item: (-item[0], -item[1]))
    best = best[:limit]
    if not best:
        return []
    placeholders = ",".join("?" * len(best))
    found = {
        row[0]: memory_from_row(row)
        for row in connection.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN ({placeholders})",
            [seq for _, seq in best],
        )
    }
    return [
        (found[seq], score if math.isfinite(score) else 0.0)
        for score, seq in best
        if found.get(seq) is not None
    ]


def missing_vectors(
    connection: sqlite3.Connection, parent: str, key: str, limit: int
) -> tuple[list[Any], int]:
    """Memories of `parent` without vectors in space `key`, oldest first, and how many in all.

    Raises:
        ProviderError: `invalid_payload` for an unregistered space.
    """
    space = space_slot(connection, key)
    slot = namespace_slot(connection, parent, create=False)
    if slot is None:
        return [], 0
    low, high = slot_range(slot)
    missing = (
        "FROM memories m WHERE m.seq BETWEEN ? AND ? AND NOT EXISTS "
        "(SELECT 1 FROM vectors v WHERE v.seq = m.seq AND v.space = ?)"
    )
    rows = connection.execute(
        f"SELECT {MEMORY_COLUMNS} {missing} ORDER BY m.seq LIMIT ?",
        (low, high, space.slot, limit),
    ).fetchall()
    total = connection.execute(f"SELECT count(*) {missing}", (low, high, space.slot)).fetchone()[0]
    return [m for m in (memory_from_row(row) for row in rows) if m is not None], int(total)
