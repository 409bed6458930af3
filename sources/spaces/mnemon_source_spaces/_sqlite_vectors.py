"""Vectors in the SQLite store: a registry of spaces, float16 segment vectors, exact search.

A memory's vectors are rows keyed by its rowid, so one parent's vectors are one rowid range,
like its memories. Search is exact: the range's vectors of one space, as one float32 matrix,
times the query; the matrix is cached per (space, parent) and reloaded when the parent's
vector version (bumped by every write and delete, in the same transaction, by any process)
moves. numpy is imported only here, when vectors are used.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from mnemon.sdk import VectorSpace, space_registration_conflict

from ._provider import (
    MemoryVectors,
    ProviderError,
    RegisterSpaceRequest,
    RegisterSpaceResult,
)
from ._sqlite_ann import HNSW_CONNECTIONS, build_index, exact_search, faiss, search_index
from ._sqlite_layout import IN_SLOT, slot_range
from ._sqlite_rows import MEMORY_COLUMNS, memory_from_row, namespace_slot

__all__ = [
    "Indexing",
    "VectorCache",
    "register_space",
    "release_cache",
    "search_vectors",
    "shared_cache",
    "space_slot",
    "store_vectors",
]

_log = logging.getLogger("mnemon.spaces")

#: the most float32 matrix bytes kept cached across parents, least recently used dropped
CACHE_BYTES = 512 * 1024 * 1024
#: a partition with more segment vectors than this gets an approximate index (faiss HNSW):
#: exact search of this many 384-dimensional vectors takes about 2 ms on one core
APPROXIMATE_ABOVE = 20_000
#: the share of a partition that may change before its base is read again
REBASE_SHARE = 0.1


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
    connection.execute("UPDATE vector_clock SET stamp = stamp + 1")
    stamp = _clock(connection)
    rows: list[tuple[int, int, int, int, int, bytes, int]] = []
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
            (
                seq,
                space.slot,
                number,
                segment.start,
                segment.end,
                _encoded(space, segment.vector),
                stamp,
            )
            for number, segment in enumerate(memory.segments)
        )
        stored += 1
    connection.executemany(
        "INSERT INTO vectors (seq, space, segment, start, end, vector, stamp) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    if stored:
        bump_version(connection, slot)
    return stored


@dataclass(frozen=True, slots=True)
class _Rows:
    """Segment vectors of one partition in one space, ordered by memory (`seqs` ascending)."""

    seqs: Any  # int64 [rows]: the memory of each row
    matrix: Any  # float32 [rows, dimensions]; no rows once an index holds them
    indexed_bytes: int = 0  # what the index holding them takes

    @property
    def size(self) -> int:
        return int(self.matrix.nbytes) + int(self.seqs.nbytes) + self.indexed_bytes


@dataclass(slots=True)
class _Partition:
    """What a search reads of one partition: a base, maybe its index, and what changed since.

    The base holds every vector as of clock `stamp`; `changed` holds the rows written after
    it (a memory there has all its current vectors there, superseding the base's). Forgotten
    memories leave rows in the base until it is read again; the search drops them when it
    reads the memories. `version` is the partition's vector version `changed` reflects.
    """

    version: int
    stamp: int
    base_version: int
    base: _Rows
    changed: _Rows
    index: Any = None  # an HNSW index of `base` (row i has label i), once built
    building: bool = False

    @property
    def size(self) -> int:
        return self.base.size + self.changed.size

    def index_bytes(self) -> int:
        """About what an index of the base takes: its vectors and its graph's links."""
        rows, dimensions = self.base.matrix.shape
        return int(rows * (4 * dimensions + 8 * HNSW_CONNECTIONS))

    def stale(self, version: int) -> bool:
        """Whether enough changed since the base was read to read it again."""
        rows = max(1, len(self.base.seqs))
        return (
            len(self.changed.seqs) > REBASE_SHARE * rows
            or version - self.base_version > REBASE_SHARE * rows
        )


def _read_rows(
    connection: sqlite3.Connection, space: SpaceRow, slot: int, after: int | None = None
) -> _Rows:
    """The partition's rows in `space` (only those written after clock `after`, if given)."""
    np = numpy()
    low, high = slot_range(slot)
    if after is None:
        rows = connection.execute(
            "SELECT seq, vector FROM vectors WHERE seq BETWEEN ? AND ? AND space = ? "
            "ORDER BY seq, segment",
            (low, high, space.slot),
        ).fetchall()
    else:
        # by the stamps: the rows written since, of every partition, are few; the planner
        # would otherwise walk the partition's whole rowid range
        rows = connection.execute(
            "SELECT seq, vector FROM vectors INDEXED BY vectors_stamp WHERE stamp > ? "
            "AND seq BETWEEN ? AND ? AND space = ? ORDER BY seq, segment",
            (after, low, high, space.slot),
        ).fetchall()
    seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f2").astype(np.float32)
    return _Rows(seqs, matrix.reshape(len(rows), space.dimensions))


def _clock(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT stamp FROM vector_clock").fetchone()[0])


def _version(connection: sqlite3.Connection, slot: int) -> int:
    row = connection.execute(
        "SELECT version FROM vector_versions WHERE slot = ?", (slot,)
    ).fetchone()
    return 0 if row is None else int(row[0])


Lend = Callable[[], AbstractContextManager[sqlite3.Connection]]


@dataclass(frozen=True, slots=True)
class Indexing:
    """How one Provider indexes: where a build borrows a connection, and from what size."""

    lend: Lend
    approximate_above: int = APPROXIMATE_ABOVE

    def large(self, partition: _Partition) -> bool:
        rows = len(partition.base.seqs)
        return rows > self.approximate_above > 0 and faiss() is not None


class VectorCache:
    """The partitions' vectors as searches read them, least recently used first out.

    One per database file in a process (see `shared_cache`), so the Providers of a new
    generation find the indexes of the last one. Thread-safe. A partition is read whole
    once; after that, a search whose partition moved reads only the rows written since (the
    `stamp` column, a store-wide clock), so a write costs the next search a few rows, not the
    partition. When a tenth of it changed, the base is read again. A partition of more than
    `approximate_above` vectors gets an HNSW index (see `_sqlite_ann`), built on a thread of
    its own; turns never wait for it: until it is ready the search stays exact.
    """

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self._budget = budget
        self._partitions: OrderedDict[tuple[int, int], _Partition] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self.users = 0  # the Providers open on it (see `shared_cache`)

    def partition(
        self, connection: sqlite3.Connection, space: SpaceRow, slot: int, indexing: Indexing
    ) -> _Partition:
        """The partition's current vectors (its base, index and changes) in `space`."""
        version = _version(connection, slot)
        key = (space.slot, slot)
        with self._lock:
            cached = self._partitions.get(key)
            if cached is not None:
                self._partitions.move_to_end(key)
        if cached is not None and cached.version == version:
            return cached
        if cached is not None and (cached.index is not None or not cached.stale(version)):
            # what changed since the base; a large base is read again off the request path
            changed = _read_rows(connection, space, slot, cached.stamp)
            fresh = replace(cached, version=version, changed=changed)
        else:
            fresh = self._read(connection, space, slot, version)
        with self._lock:
            if self._partitions.get(key) is cached:  # not replaced by a build meanwhile
                self._partitions[key] = fresh
                self._trim()
        if indexing.large(fresh) and (fresh.index is None or fresh.stale(version)):
            self._rebuild(space, slot, fresh, indexing)
        return fresh

    def _read(
        self, connection: sqlite3.Connection, space: SpaceRow, slot: int, version: int
    ) -> _Partition:
        stamp = _clock(connection)
        base = _read_rows(connection, space, slot)
        empty = _read_rows(connection, space, slot, stamp)
        return _Partition(version, stamp, version, base, empty)

    def _rebuild(
        self, space: SpaceRow, slot: int, partition: _Partition, indexing: Indexing
    ) -> None:
        """Index the partition (read again unless its base is current), on a thread of its own."""
        with self._lock:
            if partition.building or self._closed:
                return
            partition.building = True
        worker = threading.Thread(
            target=self._build,
            args=(space, slot, indexing, partition),
            name="mnemon-spaces-index",
            daemon=True,
        )
        worker.start()

    def _build(self, space: SpaceRow, slot: int, indexing: Indexing, read: _Partition) -> None:
        key = (space.slot, slot)
        try:
            if read.index is None and not read.changed.seqs.size:
                built = replace(read, building=False)  # its base is current: index that
            else:
                with indexing.lend() as connection:
                    version = _version(connection, slot)
                    built = self._read(connection, space, slot, version)
            if indexing.large(built):
                built.index = build_index(built.base.matrix, space.metric)
                # the index keeps the vectors: the base keeps only which memory each row is
                built.base = _Rows(built.base.seqs, built.base.matrix[:0], built.index_bytes())
        except Exception as exc:  # a failed build leaves the search exact: never a turn's error
            _log.debug("spaces: indexing a partition failed (%s)", type(exc).__name__)
            with self._lock:
                current = self._partitions.get(key)
                if current is not None:
                    current.building = False
            return
        with self._lock:
            if not self._closed:
                # written meanwhile: the next search reads what changed since the new base
                self._partitions[key] = built
                self._trim()

    def _trim(self) -> None:
        total = sum(partition.size for partition in self._partitions.values())
        while total > self._budget and len(self._partitions) > 1:
            _, dropped = self._partitions.popitem(last=False)
            total -= dropped.size

    def kind(self, space: SpaceRow, slot: int) -> str:
        """How the partition is searched now: `exact`, `indexing` or `approximate`.

        `indexing`: exact, while its index is being built.
        """
        with self._lock:
            partition = self._partitions.get((space.slot, slot))
        if partition is None or (partition.index is None and not partition.building):
            return "exact"
        return "approximate" if partition.index is not None else "indexing"

    def clear(self) -> None:
        """Forget every partition; a build under way is dropped when it ends."""
        with self._lock:
            self._closed = True
            self._partitions.clear()


_caches: dict[str, VectorCache] = {}
_caches_lock = threading.Lock()


def shared_cache(path: str) -> VectorCache:
    """The cache of the database file at `path`, shared by the Providers open on it."""
    with _caches_lock:
        cache = _caches.get(path)
        if cache is None:
            cache = _caches[path] = VectorCache()
        cache.users += 1
        return cache


def release_cache(path: str, cache: VectorCache) -> None:
    """A Provider is done with the cache: the last one out clears it."""
    with _caches_lock:
        cache.users -= 1
        if cache.users <= 0 and _caches.get(path) is cache:
            del _caches[path]
            cache.clear()


def _raw(space: SpaceRow, matrix: Any, query: Any) -> Any:
    """The similarity of each row to the query, higher is nearer (see `_score`)."""
    np = numpy()
    if space.metric == "l2":
        return -np.linalg.norm(matrix - query, axis=1)
    return matrix @ query


def _score(space: SpaceRow, raw: float) -> float:
    """A similarity as a score in [0, 1], 1 nearest."""
    if space.metric == "l2":
        return 1.0 / (1.0 - raw)
    if space.metric == "cosine":
        return min(1.0, max(0.0, (1.0 + raw) / 2.0))
    return 1.0 / (1.0 + math.exp(-raw)) if raw > -700 else 0.0  # dot: a logistic


def _best_rows(space: SpaceRow, rows: _Rows, query: Any, count: int) -> dict[int, float]:
    """The `count` nearest memories of `rows` by their best segment: seq -> similarity."""
    np = numpy()
    total = len(rows.seqs)
    depth = 2 * count + 32
    if faiss() is not None and total > depth:
        while True:  # the nearest rows; deeper when a few memories' segments filled them
            labels, raw = exact_search(rows.matrix, query, depth, space.metric)
            found = _by_memory(rows.seqs[labels].tolist(), raw.tolist())
            if len(found) >= count or depth >= total:
                return dict(sorted(found.items(), key=lambda item: -item[1])[:count])
            depth = min(total, depth * 4)
    if not total:
        return {}
    raw = _raw(space, rows.matrix, query)
    starts = np.flatnonzero(np.r_[True, rows.seqs[1:] != rows.seqs[:-1]])
    per_memory = np.maximum.reduceat(raw, starts) if len(starts) < len(raw) else raw
    seqs = rows.seqs[starts]
    top = min(count, len(per_memory))
    chosen = np.argpartition(-per_memory, top - 1)[:top]
    return {int(seqs[i]): float(per_memory[i]) for i in chosen}


def _by_memory(seqs: Sequence[int], similarities: Sequence[float]) -> dict[int, float]:
    """Each memory's best similarity among rows of its segments."""
    best: dict[int, float] = {}
    for seq, similarity in zip(seqs, similarities, strict=True):
        if similarity > best.get(seq, -math.inf):
            best[seq] = similarity
    return best


def _nearest(space: SpaceRow, partition: _Partition, query: Any, count: int) -> dict[int, float]:
    """The partition's `count` nearest memories: seq -> similarity."""
    changed = _best_rows(space, partition.changed, query, count)
    superseded = set(partition.changed.seqs.tolist()) if len(partition.changed.seqs) else set()
    if partition.index is not None:
        # rows of forgotten or re-embedded memories are still in the graph: ask for more
        depth = min(2 * count + 32, len(partition.base.seqs))
        labels, raw = search_index(partition.index, query, depth, space.metric)
        found = _by_memory(partition.base.seqs[labels].tolist(), raw.tolist())
    else:
        found = _best_rows(space, partition.base, query, count + len(superseded))
    base = {seq: similarity for seq, similarity in found.items() if seq not in superseded}
    return base | changed


def search_vectors(
    connection: sqlite3.Connection,
    cache: VectorCache,
    indexing: Indexing,
    parents: Sequence[str],
    key: str,
    vector: Sequence[float],
    limit: int,
) -> list[tuple[Any, float]]:
    """The memories of `parents` nearest to `vector` in space `key`: (memory, score), best first.

    A memory is scored by its best segment. Exact, or approximate in a partition that has its
    index (see `VectorCache`).

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
        partition = cache.partition(connection, space, slot, indexing)
        # a few more than asked: some may be memories forgotten since the base was read
        found = _nearest(space, partition, query, limit + 8)
        best.extend((similarity, seq) for seq, similarity in found.items())
    best.sort(key=lambda item: (-item[0], -item[1]))
    kept: list[tuple[Any, float]] = []
    # read `limit` at a time: a memory forgotten since its partition was read is skipped
    position = 0
    while len(kept) < limit and position < len(best):
        wanted = best[position : position + limit - len(kept)]
        position += len(wanted)
        placeholders = ",".join("?" * len(wanted))
        memories = {
            row[0]: memory_from_row(row)
            for row in connection.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN ({placeholders})",
                [seq for _, seq in wanted],
            )
        }
        kept.extend(
            (memories[seq], _score(space, similarity))
            for similarity, seq in wanted
            if memories.get(seq) is not None
        )
    return kept


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
