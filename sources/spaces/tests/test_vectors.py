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

from mnemon import VectorSpace

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
        assert version == (9,)
    finally:
        await store.dispose()
