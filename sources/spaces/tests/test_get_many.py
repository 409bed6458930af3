"""Batch reads by id through the Provider SDK: one result per request, each from its parent."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mnemon_source_spaces import (
    GetRequest,
    GetResult,
    Memory,
    ProviderError,
    RememberRequest,
    get_many,
    remember_many,
)
from spaces_kit import ADA, KEY, open_spaces, open_sqlite
from spaces_test_provider import MemoryProvider, memory_provider
from test_spaces import WithProviders

from mnemon import ManagementError

HOME = "s1-" + "a" * 40
WORK = "s1-" + "b" * 40
NEVER_WRITTEN = "s1-" + "c" * 40


@pytest.fixture
async def adapter(tmp_path: Path) -> AsyncIterator[Any]:
    opened = await open_sqlite(tmp_path)
    try:
        yield opened
    finally:
        await opened.dispose()


async def _store(adapter: Any, parent: str, ids: list[str]) -> None:
    requests = [RememberRequest(parent=parent, text=f"{parent[-1]} {i}", memory_id=i) for i in ids]
    await remember_many(adapter, requests)


def _found(results: list[GetResult]) -> list[tuple[str, str, str] | None]:
    return [
        None if r.memory is None else (r.memory.parent, r.memory.id, r.memory.text) for r in results
    ]


async def test_sqlite_answers_each_id_from_its_own_parent_in_order(adapter: Any) -> None:
    await _store(adapter, HOME, ["m-1", "m-2", "shared"])
    await _store(adapter, WORK, ["m-3", "shared"])
    requests = [
        GetRequest(parent=WORK, id="shared"),
        GetRequest(parent=HOME, id="m-3"),  # held by the other parent only
        GetRequest(parent=HOME, id="m-2"),
        GetRequest(parent=NEVER_WRITTEN, id="m-1"),
        GetRequest(parent=HOME, id="missing"),
        GetRequest(parent=HOME, id="shared"),
        GetRequest(parent=HOME, id="m-2"),  # asked twice, answered twice
    ]
    results = await adapter.get_many(requests)
    assert _found(results) == [
        (WORK, "shared", "b shared"),
        None,
        (HOME, "m-2", "a m-2"),
        None,
        None,
        (HOME, "shared", "a shared"),
        (HOME, "m-2", "a m-2"),
    ]
    # the same answers one `get` at a time
    singles = [await adapter.get(request) for request in requests]
    assert _found(singles) == _found(results)
    assert await adapter.get_many([]) == []


VARIABLE_LIMIT = 999  # SQLite's default before 3.32; builds differ, so the test sets it


async def test_sqlite_takes_more_ids_than_one_statement_may_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect = sqlite3.connect

    def limited(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, VARIABLE_LIMIT)
        return connection

    monkeypatch.setattr(sqlite3, "connect", limited)
    opened = await open_sqlite(tmp_path)
    try:
        asked = 2 * VARIABLE_LIMIT + 50
        stored = [f"k-{i}" for i in range(0, asked, 7)]
        await _store(opened, HOME, stored)
        requests = [GetRequest(parent=HOME, id=f"k-{i}") for i in range(asked)]
        results = await get_many(opened, requests)
    finally:
        await opened.dispose()
    assert len(results) == asked
    assert [r.memory.id for r in results if r.memory is not None] == stored
    assert [r.memory is not None for r in results] == [i % 7 == 0 for i in range(asked)]


class OnlyGet:
    """An adapter with `get` and no batch of its own: the SDK asks once per request."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def get(self, request: GetRequest) -> GetResult:
        self.asked.append((request.parent, request.id))
        if request.id != "here":
            return GetResult()
        return GetResult(
            memory=Memory(
                parent=request.parent, id="here", text="found", created_at="2026-01-01T00:00:00Z"
            )
        )


async def test_the_sdk_default_asks_get_once_per_request_in_order() -> None:
    adapter = OnlyGet()
    requests = [
        GetRequest(parent=HOME, id="gone"),
        GetRequest(parent=WORK, id="here"),
        GetRequest(parent=HOME, id="here"),
    ]
    results = await get_many(adapter, requests)  # type: ignore[arg-type]
    assert adapter.asked == [(HOME, "gone"), (WORK, "here"), (HOME, "here")]
    assert [None if r.memory is None else r.memory.parent for r in results] == [None, WORK, HOME]
    assert await get_many(adapter, []) == []  # type: ignore[arg-type]
    assert len(adapter.asked) == 3


async def test_an_adapter_without_get_or_with_a_short_batch_is_refused() -> None:
    with pytest.raises(ProviderError) as refused:
        await get_many(object(), [GetRequest(parent=HOME, id="m-1")])  # type: ignore[arg-type]
    assert refused.value.code == "unsupported"

    class ShortBatch:
        async def get_many(self, requests: list[GetRequest]) -> list[GetResult]:
            return [GetResult() for _ in requests[1:]]

    with pytest.raises(ProviderError) as short:
        await get_many(ShortBatch(), [GetRequest(parent=HOME, id=i) for i in ("a", "b")])  # type: ignore[arg-type]
    assert short.value.code == "provider_error"


class CountingReads(MemoryProvider):
    """The test Provider, answering batches itself and counting single and batch reads."""

    singles: ClassVar[int] = 0
    batches: ClassVar[list[int]] = []

    async def get(self, request: GetRequest) -> GetResult:
        CountingReads.singles += 1
        return await super().get(request)

    async def get_many(self, requests: list[GetRequest]) -> list[GetResult]:
        CountingReads.batches.append(len(requests))
        return [await super(CountingReads, self).get(request) for request in requests]


class WrongParent(MemoryProvider):
    """Answers a batch read with a memory of a namespace nobody asked about."""

    async def get_many(self, requests: list[GetRequest]) -> list[GetResult]:
        return [
            GetResult(
                memory=Memory(
                    parent=NEVER_WRITTEN,
                    id=request.id,
                    text="leaked",
                    created_at="2026-01-01T00:00:00Z",
                )
            )
            for request in requests
        ]


async def test_an_import_asks_the_other_spaces_once_per_batch(tmp_path: Path) -> None:
    CountingReads.singles, CountingReads.batches = 0, []
    spaces = [
        {"name": "home", "writable": True},
        {"name": "work", "writable": True},
        {"name": "garden", "writable": True},
    ]
    plugin = WithProviders(memory_provider(kind=CountingReads))
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory"}, spaces=spaces
    ) as runner:
        client = runner.management_client(KEY, ADA)
        memories = [{"text": f"note {i}", "idempotency_key": f"k{i}"} for i in range(30)]
        memories.append({"text": "no key"})
        output = await client.mutate(
            "import",
            {"space": "home", "memories": memories},
            confirmed=True,
            expected_revision=await client.revision(),
        )
    assert output.output["stored"] == 31
    # each keyed id in each of the two other spaces, in one batch; never one get per key
    assert CountingReads.batches == [60]
    assert CountingReads.singles == 0


async def test_a_batch_answered_from_another_space_is_not_believed(tmp_path: Path) -> None:
    spaces = [{"name": "home", "writable": True}, {"name": "work", "writable": True}]
    plugin = WithProviders(memory_provider(kind=WrongParent))
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory"}, spaces=spaces
    ) as runner:
        client = runner.management_client(KEY, ADA)

        with pytest.raises(ManagementError) as refused:
            await client.mutate(
                "import",
                {"space": "home", "memories": [{"text": "bees", "idempotency_key": "k"}]},
                confirmed=True,
                expected_revision=await client.revision(),
            )
    assert refused.value.code == "provider_error"
