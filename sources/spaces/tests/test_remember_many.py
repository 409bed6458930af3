"""Bulk ingest through the Provider SDK: one result per memory, idempotency kept, all or none."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    ForgetRequest,
    ListRequest,
    Memory,
    ProviderError,
    ProviderInit,
    RememberRequest,
    RememberResult,
    remember_many,
)
from mnemon_source_spaces._sqlite_layout import document_terms
from mnemon_source_spaces._wire import built

PARENT = "s1-" + "a" * 40


@pytest.fixture
async def adapter(tmp_path: Path) -> AsyncIterator[Any]:
    opened: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="bulk",
            data_directory=str(tmp_path),
            configuration={"path": str(tmp_path / "store.sqlite3")},
        )
    )
    try:
        yield opened
    finally:
        await opened.dispose()


async def _stored(adapter: Any) -> list[str]:
    page = await adapter.list(ListRequest(parent=PARENT, limit=100))
    return sorted(memory.text for memory in page.memories)


async def test_a_batch_gives_one_result_per_memory_in_order(adapter: Any) -> None:
    requests = [RememberRequest(parent=PARENT, text=f"memory {index}") for index in range(50)]
    results = await remember_many(adapter, requests)
    assert [result.memory.text for result in results] == [f"memory {i}" for i in range(50)]
    assert all(result.created and result.durable for result in results)
    assert len({result.memory.id for result in results}) == 50
    assert await _stored(adapter) == sorted(f"memory {i}" for i in range(50))


async def test_idempotency_keys_hold_within_a_batch_and_across_batches(adapter: Any) -> None:
    first = await adapter.remember(
        RememberRequest(parent=PARENT, text="before", idempotency_key="k0")
    )
    results = await remember_many(
        adapter,
        [
            RememberRequest(parent=PARENT, text="again", idempotency_key="k0"),
            RememberRequest(parent=PARENT, text="new", idempotency_key="k1"),
            RememberRequest(parent=PARENT, text="new, retried", idempotency_key="k1"),
        ],
    )
    assert [result.created for result in results] == [False, True, False]
    assert results[0].memory.id == first.memory.id
    assert results[2].memory.id == results[1].memory.id
    assert await _stored(adapter) == ["before", "new"]
    replayed = await remember_many(
        adapter, [RememberRequest(parent=PARENT, text="new", idempotency_key="k1")]
    )
    assert [result.created for result in replayed] == [False]
    assert await _stored(adapter) == ["before", "new"]


async def test_a_batch_that_fails_part_way_stores_none_of_it(adapter: Any) -> None:
    await adapter.remember(RememberRequest(parent=PARENT, text="kept"))
    batch = [RememberRequest(parent=PARENT, text=f"m{index}") for index in range(3)]
    original = adapter._write_many

    def failing(connection: Any, requests: list[RememberRequest]) -> list[RememberResult]:
        original(connection, requests)  # every row of the batch is written, then the disk fails
        raise ProviderError("provider_error", "the disk went away")

    adapter._write_many = failing
    with pytest.raises(ProviderError):
        await remember_many(adapter, batch)
    adapter._write_many = original
    assert await _stored(adapter) == ["kept"]


async def test_a_provider_without_its_own_batch_gets_one_remember_per_memory() -> None:
    seen: list[str] = []

    class OneByOne:
        async def remember(self, request: RememberRequest) -> RememberResult:
            seen.append(request.text)
            return RememberResult(
                memory={
                    "parent": request.parent,
                    "id": f"m{len(seen)}",
                    "text": request.text,
                    "created_at": "2026-01-01T00:00:00+00:00",
                },
                created=True,
            )

    results = await remember_many(
        OneByOne(),  # type: ignore[arg-type]
        [RememberRequest(parent=PARENT, text=text) for text in ("a", "b")],
    )
    assert seen == ["a", "b"]
    assert [result.memory.id for result in results] == ["m1", "m2"]


async def test_a_batch_is_one_durable_transaction_not_one_per_memory(adapter: Any) -> None:
    # counted, not timed: every memory of a batch shares one COMMIT
    commits = 0
    store = adapter._store
    original = store.connection

    class Counting:
        def __init__(self, connection: Any) -> None:
            self._connection = connection

        def execute(self, sql: str, *args: Any) -> Any:
            nonlocal commits
            commits += sql == "COMMIT"
            return self._connection.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._connection, name)

    @contextmanager
    def counting_connection() -> Iterator[Counting]:
        with original() as connection:
            yield Counting(connection)

    store.connection = counting_connection
    await remember_many(adapter, [RememberRequest(parent=PARENT, text=f"x{i}") for i in range(40)])
    store.connection = original
    assert commits == 1


async def test_batches_keep_exact_term_counts_per_parent_and_store_wide(
    adapter: Any, tmp_path: Path
) -> None:
    # recall ranks by these counts: after batches over two parents, with terms repeated
    # within a batch, across batches and in tags and entities, each must equal a recount
    other = "s1-" + "b" * 40
    texts = ["Tea and tea again", "Café crème", "tea: green", "Ünïcode wörds café"]
    for round_ in range(3):
        await remember_many(
            adapter,
            [
                RememberRequest(
                    parent=parent,
                    text=f"{text} round{round_}",
                    tags=("Tea",) if index % 2 else (),
                    entities=("Ada Lovelace",) if index == 1 else (),
                )
                for parent in (PARENT, other)
                for index, text in enumerate(texts[: 2 + round_])
            ],
        )
    page = await adapter.list(ListRequest(parent=other, limit=1))
    await adapter.forget(ForgetRequest(parent=other, id=page.memories[0].id))
    with sqlite3.connect(tmp_path / "store.sqlite3") as connection:
        slots = dict(connection.execute("SELECT parent, slot FROM namespaces").fetchall())
        expected: dict[tuple[int, str], int] = {}
        for parent, text, tags, entities in connection.execute(
            "SELECT n.parent, m.text, m.tags, m.entities FROM memories m "
            "JOIN namespaces n ON n.slot = m.seq >> 40"
        ):
            counted = document_terms(text, json.loads(tags), json.loads(entities))
            for slot in (0, slots[parent]):
                for term in counted:
                    expected[(slot, term)] = expected.get((slot, term), 0) + 1
        found = {
            (slot, term): documents
            for slot, term, documents in connection.execute(
                "SELECT slot, term, documents FROM terms"
            )
        }
    assert found == expected
    assert found[(0, "tea")] == found[(slots[PARENT], "tea")] + found[(slots[other], "tea")]


async def test_made_up_ids_ascend_across_batches_and_never_repeat(
    adapter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # newer ids sort after older ones: a batch goes in at the end of the store's id index
    # (a few pages per commit) instead of on one random page per memory
    batches = [
        [
            result.memory.id
            for result in await remember_many(
                adapter, [RememberRequest(parent=PARENT, text=f"m{i}") for i in range(200)]
            )
        ]
        for _ in range(2)
    ]
    ids = batches[0] + batches[1]
    assert ids == sorted(ids)
    assert len(set(ids)) == 400
    assert all(len(made) == 16 and int(made, 16) >= 0 for made in ids)
    # with no randomness left, every id of one millisecond collides: each is drawn again
    monkeypatch.setattr("secrets.randbits", lambda bits: 0)
    more = await remember_many(
        adapter, [RememberRequest(parent=PARENT, text=f"n{index}") for index in range(4)]
    )
    later = [result.memory.id for result in more]
    assert len(set(later) | set(ids)) == 404
    assert later == sorted(later)
    assert min(later) > max(ids)


async def test_ids_drawn_again_after_a_collision_still_ascend(
    adapter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one millisecond; the first draw repeats an id, and the id drawn again is the lowest
    draws = iter([7, 7, 5, 1])
    monkeypatch.setattr("secrets.randbits", lambda bits: next(draws))
    monkeypatch.setattr("time.time_ns", lambda: 1_700_000_000_000_000_000)
    results = await remember_many(
        adapter, [RememberRequest(parent=PARENT, text=f"c{index}") for index in range(3)]
    )
    ids = [result.memory.id for result in results]
    assert len(set(ids)) == 3
    assert ids == sorted(ids)


async def test_batch_results_are_the_models_validation_would_make(adapter: Any) -> None:
    # the batch builds its results without validating them again: they must be the same
    requests = [
        RememberRequest(parent=PARENT, text="first", tags=("a", "a", "b"), idempotency_key="k"),
        RememberRequest(parent=PARENT, text="first, again", idempotency_key="k"),
    ]
    results = await remember_many(adapter, requests)
    for result in results:
        checked = RememberResult.model_validate(result.model_dump())
        assert checked == result
        assert checked.model_fields_set == result.model_fields_set
        assert checked.memory.model_fields_set == result.memory.model_fields_set
    assert results[0].memory.tags == ("a", "b")


def test_a_model_built_without_every_field_is_refused() -> None:
    memory = {"parent": PARENT, "id": "m1", "text": "t", "tags": (), "entities": ()}
    with pytest.raises(TypeError, match="Memory: built"):
        built(Memory, memory)  # no created_at
    with pytest.raises(TypeError, match="Memory: built"):
        built(Memory, {**memory, "created_at": "2026-01-01T00:00:00+00:00", "extra": 1})
    made = built(Memory, {**memory, "created_at": "2026-01-01T00:00:00+00:00"})
    assert made == Memory.model_validate(made.model_dump())
