"""The SQLite Provider keeps vectors: what is its own beyond the Provider suite.

The rules every Provider keeps (registration, ranking, isolation, forgetting, catching up,
refusals, reopening) are checked by `ProviderConformance` in test_sqlite_provider.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    ForgetRequest,
    MemoryVectors,
    MissingVectorsRequest,
    ProviderError,
    ProviderInit,
    RegisterSpaceRequest,
    RememberRequest,
    SegmentVector,
    StoreVectorsRequest,
    VectorSearchRequest,
)

from mnemon.sdk import VectorSpace

ADA, BOB = "personal.user-ada", "personal.user-bob"
SPACE = VectorSpace(id="test.toy", version="1", model="toy", dimensions=3, metric="cosine")
KEY = SPACE.key


async def open_store(path: Path) -> Any:
    return await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="source:spaces",
            data_directory=str(path.parent),
            configuration={"path": str(path), "busy_timeout_ms": 1_000},
        )
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    provider = await open_store(tmp_path / "store.sqlite3")
    try:
        yield provider
    finally:
        await provider.dispose()


async def remember(store: Any, parent: str, *texts: str) -> list[str]:
    ids = []
    for text in texts:
        result = await store.remember(RememberRequest(parent=parent, text=text))
        ids.append(result.memory.id)
    return ids


def vectors(memory_id: str, *segments: tuple[float, ...]) -> MemoryVectors:
    return MemoryVectors(
        id=memory_id,
        segments=tuple(SegmentVector(start=0, end=1, vector=vector) for vector in segments),
    )


async def search(store: Any, vector: tuple[float, ...], *parents: str, limit: int = 8) -> list[Any]:
    found = await store.vector_search(
        VectorSearchRequest(parents=parents or (ADA,), space=KEY, vector=vector, limit=limit)
    )
    return [(hit.memory.text, round(hit.score, 3)) for hit in found.hits]


async def test_a_zero_vector_has_no_direction_under_cosine(store: Any) -> None:
    """Kept at unit length, a cosine vector needs a direction: a zero one is refused."""
    await store.register_space(RegisterSpaceRequest(space=SPACE))
    [memory_id] = await remember(store, ADA, "text")
    with pytest.raises(ProviderError, match="zero vector") as caught:
        await store.store_vectors(
            StoreVectorsRequest(
                parent=ADA, space=KEY, memories=(vectors(memory_id, (0.0, 0.0, 0.0)),)
            )
        )
    assert caught.value.code == "invalid_payload"
    missing = await store.missing_vectors(MissingVectorsRequest(parent=ADA, space=KEY))
    assert [m.id for m in missing.memories] == [memory_id]


async def test_forgetting_a_memory_deletes_its_vector_rows(store: Any) -> None:
    await store.register_space(RegisterSpaceRequest(space=SPACE))
    keep, drop = await remember(store, ADA, "keep", "drop")
    await store.store_vectors(
        StoreVectorsRequest(
            parent=ADA,
            space=KEY,
            memories=(vectors(keep, (1.0, 0.0, 0.0)), vectors(drop, (0.9, 0.1, 0.0))),
        )
    )
    await store.forget(ForgetRequest(parent=ADA, id=drop))
    rows = sqlite3.connect(store.path).execute("SELECT count(*) FROM vectors").fetchone()
    assert rows == (1,)


async def test_another_process_writing_vectors_is_seen_by_the_next_search(tmp_path: Path) -> None:
    """The search matrix is cached per parent, and reloaded when any writer moved it on."""
    path = tmp_path / "store.sqlite3"
    reader, writer = await open_store(path), await open_store(path)
    try:
        await writer.register_space(RegisterSpaceRequest(space=SPACE))
        first, second = await remember(writer, ADA, "first", "second")
        await writer.store_vectors(
            StoreVectorsRequest(parent=ADA, space=KEY, memories=(vectors(first, (1.0, 0.0, 0.0)),))
        )
        assert [t for t, _ in await search(reader, (0.0, 1.0, 0.0))] == ["first"]
        await writer.store_vectors(
            StoreVectorsRequest(parent=ADA, space=KEY, memories=(vectors(second, (0.0, 1.0, 0.0)),))
        )
        assert [t for t, _ in await search(reader, (0.0, 1.0, 0.0))] == ["second", "first"]
        await writer.forget(ForgetRequest(parent=ADA, id=second))
        assert [t for t, _ in await search(reader, (0.0, 1.0, 0.0))] == ["first"]
    finally:
        await reader.dispose()
        await writer.dispose()


async def test_a_version_8_store_gains_the_vector_tables_and_keeps_its_memories(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    store = await open_store(path)
    await remember(store, ADA, "kept through the migration")
    await store.dispose()
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in (
        "DROP TRIGGER vectors_ad",
        "DROP TABLE vectors",
        "DROP TABLE vector_spaces",
        "DROP TABLE vector_versions",
        "DROP TABLE vector_clock",
        "PRAGMA user_version = 8",
    ):
        connection.execute(statement)
    connection.close()
    store = await open_store(path)
    try:
        await store.register_space(RegisterSpaceRequest(space=SPACE))
        missing = await store.missing_vectors(MissingVectorsRequest(parent=ADA, space=KEY))
        assert [m.text for m in missing.memories] == ["kept through the migration"]
        version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()
        assert version == (10,)
    finally:
        await store.dispose()


async def test_a_version_9_store_keeps_its_vectors_and_gains_the_clock(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    store = await open_store(path)
    await store.register_space(RegisterSpaceRequest(space=SPACE))
    [before] = await remember(store, ADA, "vectors from before")
    await store.store_vectors(
        StoreVectorsRequest(parent=ADA, space=KEY, memories=(vectors(before, (1.0, 0.0, 0.0)),))
    )
    await store.dispose()
    connection = sqlite3.connect(path, isolation_level=None)
    for statement in (
        "DROP INDEX vectors_stamp",
        "ALTER TABLE vectors DROP COLUMN stamp",
        "DROP TABLE vector_clock",
        "PRAGMA user_version = 9",
    ):
        connection.execute(statement)
    connection.close()
    store = await open_store(path)
    try:
        assert [text for text, _ in await search(store, (1.0, 0.0, 0.0))] == ["vectors from before"]
        [after] = await remember(store, ADA, "vectors from after")
        await store.store_vectors(
            StoreVectorsRequest(parent=ADA, space=KEY, memories=(vectors(after, (0.9, 0.1, 0.0)),))
        )
        assert [text for text, _ in await search(store, (1.0, 0.0, 0.0))] == [
            "vectors from before",
            "vectors from after",
        ]
        version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()
        assert version == (10,)
    finally:
        await store.dispose()


# ------------------------------------------------------------------ the approximate index

WIDE = VectorSpace(id="test.wide", version="1", model="toy", dimensions=16, metric="cosine")


async def open_indexed(path: Path, above: int = 100) -> Any:
    return await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="source:spaces",
            data_directory=str(path.parent),
            configuration={"path": str(path), "approximate_above": above},
        )
    )


def random_vectors(count: int, seed: int) -> list[tuple[float, ...]]:
    import numpy as np

    rows = np.random.default_rng(seed).standard_normal((count, WIDE.dimensions))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return [tuple(row.tolist()) for row in rows]


async def fill(store: Any, parent: str, count: int, seed: int = 7) -> dict[str, tuple[float, ...]]:
    texts = [f"memory number {index}" for index in range(count)]
    ids = await remember(store, parent, *texts)
    given = dict(zip(ids, random_vectors(count, seed), strict=True))
    await store.store_vectors(
        StoreVectorsRequest(
            parent=parent,
            space=WIDE.key,
            memories=tuple(vectors(memory, vector) for memory, vector in given.items()),
        )
    )
    return given


async def nearest(store: Any, vector: tuple[float, ...], limit: int = 5) -> list[str]:
    found = await store.vector_search(
        VectorSearchRequest(parents=(ADA,), space=WIDE.key, vector=vector, limit=limit)
    )
    return [hit.memory.id for hit in found.hits]


async def indexed(store: Any) -> None:
    """Search until the partition's index is built (it is built off the request path)."""
    import anyio

    with anyio.fail_after(30):
        while await store.vector_search_kind(ADA, WIDE.key) != "approximate":
            await nearest(store, random_vectors(1, 99)[0])
            await anyio.sleep(0.01)


async def test_a_large_partition_is_searched_through_an_index_built_off_the_request_path(
    tmp_path: Path,
) -> None:
    store = await open_indexed(tmp_path / "store.sqlite3")
    try:
        await store.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(store, ADA, 300)
        assert await store.vector_search_kind(ADA, WIDE.key) == "exact"
        exact = {
            memory: await nearest(store, vector) for memory, vector in list(given.items())[:40]
        }
        await indexed(store)
        # the index finds what exact search found: each memory's own vector first
        approximate = {memory: await nearest(store, given[memory]) for memory in exact}
        assert all(found[0] == memory for memory, found in approximate.items())
        overlap = sum(len(set(exact[m]) & set(approximate[m])) for m in exact) / (5 * len(exact))
        assert overlap >= 0.9
    finally:
        await store.dispose()


async def test_an_indexed_partition_sees_every_write_at_once(tmp_path: Path) -> None:
    store = await open_indexed(tmp_path / "store.sqlite3")
    try:
        await store.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(store, ADA, 300)
        await indexed(store)
        probe = random_vectors(1, 1234)[0]
        # a new memory, written after the index was built, is found at once
        [fresh] = await remember(store, ADA, "written after the index")
        await store.store_vectors(
            StoreVectorsRequest(parent=ADA, space=WIDE.key, memories=(vectors(fresh, probe),))
        )
        assert (await nearest(store, probe))[0] == fresh
        # a memory given new vectors is found by them, and no longer by its old ones
        moved, old = next(iter(given.items()))
        await store.store_vectors(
            StoreVectorsRequest(parent=ADA, space=WIDE.key, memories=(vectors(moved, probe),))
        )
        assert set((await nearest(store, probe))[:2]) == {fresh, moved}
        assert moved not in await nearest(store, old, limit=3)
        # a forgotten memory is never returned, though the index still holds its vectors
        await store.forget(ForgetRequest(parent=ADA, id=fresh))
        assert fresh not in await nearest(store, probe)
        assert (await nearest(store, probe))[0] == moved
        # another parent's memories are never in this partition's index
        await fill(store, BOB, 20, seed=8)
        assert all(memory in given or memory == moved for memory in await nearest(store, probe, 20))
    finally:
        await store.dispose()


async def test_without_an_index_search_stays_exact(tmp_path: Path) -> None:
    store = await open_indexed(tmp_path / "store.sqlite3", above=0)
    try:
        await store.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(store, ADA, 300)
        for memory, vector in list(given.items())[:10]:
            assert (await nearest(store, vector))[0] == memory
        assert await store.vector_search_kind(ADA, WIDE.key) == "exact"
    finally:
        await store.dispose()


@pytest.mark.parametrize("value", [-1, "many", 1.5, True])
async def test_a_bad_approximate_above_is_refused_by_name(tmp_path: Path, value: Any) -> None:
    from mnemon import DefinitionError

    with pytest.raises(DefinitionError, match="approximate_above: must be an integer"):
        await open_indexed(tmp_path / "store.sqlite3", above=value)


async def test_a_new_generation_on_the_same_file_finds_the_index_built(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    first = await open_indexed(path)
    try:
        await first.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(first, ADA, 300)
        await indexed(first)
        second = await open_indexed(path)  # a new generation, while the old one drains
        memory, vector = next(iter(given.items()))
        assert (await nearest(second, vector))[0] == memory
        assert await second.vector_search_kind(ADA, WIDE.key) == "approximate"
        await second.dispose()
    finally:
        await first.dispose()
    third = await open_indexed(path)  # nothing open on the file any more: read afresh
    try:
        assert await third.vector_search_kind(ADA, WIDE.key) == "exact"
    finally:
        await third.dispose()


async def test_without_faiss_search_is_exact_with_numpy_and_finds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mnemon_source_spaces._sqlite_vectors as sqlite_vectors

    store = await open_indexed(tmp_path / "store.sqlite3", above=0)  # exact: faiss, then numpy
    try:
        await store.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(store, ADA, 300)
        probes = random_vectors(10, 55)
        with_faiss = [await nearest(store, probe) for probe in probes]
        monkeypatch.setattr(sqlite_vectors, "faiss", lambda: None)
        [more] = await remember(store, ADA, "one more, read as a change")
        await store.store_vectors(
            StoreVectorsRequest(parent=ADA, space=WIDE.key, memories=(vectors(more, probes[0]),))
        )
        without = [await nearest(store, probe) for probe in probes]
        assert without[0][0] == more
        assert without[1:] == with_faiss[1:]  # the same memories, in the same order
        assert set(with_faiss[0]) <= set(given)
    finally:
        await store.dispose()


async def test_searches_beside_writes_and_an_index_build_see_every_write(tmp_path: Path) -> None:
    import anyio

    store = await open_indexed(tmp_path / "store.sqlite3")
    try:
        await store.register_space(RegisterSpaceRequest(space=WIDE))
        given = await fill(store, ADA, 300)  # past 100: the first search starts a build
        probes = random_vectors(40, 77)
        written: dict[str, tuple[float, ...]] = {}

        async def write() -> None:
            for number, probe in enumerate(probes):
                [memory] = await remember(store, ADA, f"written during the searches {number}")
                await store.store_vectors(
                    StoreVectorsRequest(
                        parent=ADA, space=WIDE.key, memories=(vectors(memory, probe),)
                    )
                )
                written[memory] = probe

        async def search() -> None:
            for vector in random_vectors(60, 78):
                found = await nearest(store, vector)
                assert len(set(found)) == len(found) == 5

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            for _ in range(3):
                group.start_soon(search)
        # every memory written meanwhile is found by its own vector, index built or not
        for memory, probe in written.items():
            assert (await nearest(store, probe, limit=1)) == [memory]
        assert len(written) == len(probes)
        assert not set(written) & set(given)
    finally:
        await store.dispose()
