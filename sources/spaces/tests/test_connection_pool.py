"""The SQLite store's connections: kept after a burst of calls, opened while others read."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_source_spaces import ProviderError, RememberRequest, SearchRequest, StatusRequest
from mnemon_source_spaces import _sqlite as sqlite_module
from mnemon_source_spaces import _sqlite_store as store_module
from mnemon_source_spaces._sqlite_schema import ensure_schema
from spaces_kit import open_sqlite

from mnemon.sdk import storage

AT_ONCE = 12  # above the few connections the pool used to keep, below anyio's 40 threads


@dataclass
class Connections:
    """How many connections the test's code opened and closed."""

    opened: int = 0
    closed: int = 0


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Connections:
    seen = Connections()
    connect = sqlite3.connect

    class Counted(sqlite3.Connection):
        def close(self) -> None:
            seen.closed += 1
            super().close()

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        seen.opened += 1
        return connect(*args, factory=Counted, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counted)
    return seen


class Bursts:
    """Searches made at once, each holding its connection until all of them hold one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.barrier: threading.Barrier | None = None
        search_store = sqlite_module.search_store

        def held(connection: sqlite3.Connection, request: SearchRequest) -> Any:
            if self.barrier is not None:
                self.barrier.wait()
            return search_store(connection, request)

        monkeypatch.setattr(sqlite_module, "search_store", held)

    async def run(self, adapter: Any, calls: int) -> None:
        self.barrier = threading.Barrier(calls, timeout=30) if calls > 1 else None
        async with anyio.create_task_group() as group:
            for _ in range(calls):
                group.start_soon(adapter.search, SearchRequest(parents=("p",), query="bees"))


async def test_a_second_burst_of_concurrent_reads_opens_no_connection(
    tmp_path: Path, connections: Connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    bursts = Bursts(monkeypatch)
    adapter = await open_sqlite(tmp_path)
    try:
        await bursts.run(adapter, AT_ONCE)
        first = connections.opened
        assert first >= AT_ONCE  # the burst really held that many connections at once
        await bursts.run(adapter, AT_ONCE)
        await bursts.run(adapter, AT_ONCE)
        assert connections.opened == first
        assert connections.closed == 0
    finally:
        await adapter.dispose()


async def test_connections_left_idle_after_a_burst_are_closed_down_to_a_few(
    tmp_path: Path, connections: Connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "IDLE_SECONDS", 0.05)
    bursts = Bursts(monkeypatch)
    adapter = await open_sqlite(tmp_path)
    try:
        await bursts.run(adapter, AT_ONCE)
        assert connections.opened == AT_ONCE
        await anyio.sleep(0.1)
        await bursts.run(adapter, 1)  # the one given back last is lent again
        assert connections.closed == AT_ONCE - store_module.KEEP_WARM
        assert connections.opened == AT_ONCE
    finally:
        await adapter.dispose()
    assert connections.closed == AT_ONCE


async def test_a_new_store_waits_for_another_process_before_switching_to_wal(
    tmp_path: Path,
) -> None:
    # several processes opening one new store at once: while another holds the file's write
    # lock, SQLite refuses the switch to WAL at once instead of waiting out the busy timeout
    path = tmp_path / "store.sqlite3"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    ensure_schema(other)  # made by the other process, still in SQLite's default journal mode
    other.execute("BEGIN IMMEDIATE")  # the other process about to switch the file itself
    finished = threading.Timer(0.2, lambda: other.execute("COMMIT"))
    finished.start()
    adapter = await open_sqlite(tmp_path, busy_timeout_ms=5_000)
    try:
        status = await adapter.status(sqlite_module.StatusRequest())
        assert (status.availability, status.reason) == ("ready", None)
        with closing(sqlite3.connect(path)) as check:
            assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        finished.join()
        other.close()
        await adapter.dispose()


async def test_another_process_holding_the_new_store_past_the_busy_timeout_is_reported(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    other = sqlite3.connect(path, isolation_level=None)
    ensure_schema(other)
    other.execute("BEGIN IMMEDIATE")
    adapter = await open_sqlite(tmp_path, busy_timeout_ms=100)
    try:
        status = await adapter.status(sqlite_module.StatusRequest())
        assert (status.availability, status.reason) == ("unavailable", "store-busy")
    finally:
        other.close()
        await adapter.dispose()


# ---------------------------------------------------------------- writers of several processes

WRITERS = "store.sqlite3-writers"  # the lock file writers of every process take turns on


def remember_request(text: str) -> RememberRequest:
    return RememberRequest(parent="writers", text=text, idempotency_key=text)


async def stored_count(adapter: Any) -> int:
    status = await adapter.status(StatusRequest(count=True, parents=("writers",)))
    return sum(namespace.memories or 0 for namespace in status.namespaces)


async def test_another_process_holding_the_writers_turn_past_the_timeout_is_refused(
    tmp_path: Path,
) -> None:
    adapter = await open_sqlite(tmp_path, busy_timeout_ms=100)
    try:
        await adapter.remember(remember_request("first"))  # the store and its lock file exist
        # another process's writer holds the turn (flock locks belong to the open file, so a
        # second open of the lock file here stands for another process)
        with storage.hold_lock(tmp_path / WRITERS, 1.0), pytest.raises(ProviderError) as refused:
            await adapter.remember(remember_request("second"))
        assert refused.value.code == "timeout"
        assert await stored_count(adapter) == 1  # nothing of the refused write is stored
        # nor later, with the next write: the refused one is not left queued
        assert (await adapter.remember(remember_request("third"))).created
        assert await stored_count(adapter) == 2
    finally:
        await adapter.dispose()


async def test_a_writer_waits_for_the_turn_another_process_gives_back(tmp_path: Path) -> None:
    adapter = await open_sqlite(tmp_path, busy_timeout_ms=10_000)
    given_back = threading.Event()
    held = threading.Event()

    def other_process() -> None:
        with storage.hold_lock(tmp_path / WRITERS, 1.0):
            held.set()
            given_back.wait(10)

    other = threading.Thread(target=other_process)
    other.start()
    try:
        held.wait(10)
        async with anyio.create_task_group() as group:

            async def write() -> None:
                result = await adapter.remember(remember_request("waited"))
                assert result.created

            group.start_soon(write)
            await anyio.sleep(0.05)  # the writer is waiting for its turn by now
            assert await stored_count(adapter) == 0
            given_back.set()
        assert await stored_count(adapter) == 1
        assert (tmp_path / WRITERS).stat().st_mode & 0o777 == 0o600
    finally:
        given_back.set()
        other.join()
        await adapter.dispose()


async def test_a_link_where_the_writers_lock_file_goes_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("someone else's file", encoding="utf-8")
    (tmp_path / WRITERS).symlink_to(target)
    adapter = await open_sqlite(tmp_path)
    try:
        with pytest.raises(ProviderError) as refused:
            await adapter.remember(remember_request("linked"))
        assert refused.value.code == "unavailable"
        assert "link" in str(refused.value)
        assert target.read_text(encoding="utf-8") == "someone else's file"
    finally:
        await adapter.dispose()


class Transactions:
    """The write transactions the Provider ran, and how many requests each held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_on: str | None = None) -> None:
        self.texts: list[list[str]] = []  # the texts of each transaction's requests
        write_many = sqlite_module.SqliteProvider._write_many

        def counted(provider: Any, connection: sqlite3.Connection, requests: Any) -> Any:
            self.texts.append([request.text for request in requests])
            if fail_on is not None and any(request.text == fail_on for request in requests):
                raise ValueError("a request this store cannot take")
            return write_many(provider, connection, requests)

        monkeypatch.setattr(sqlite_module.SqliteProvider, "_write_many", counted)


async def remember_while_the_turn_is_held(adapter: Any, path: Path, requests: list[Any]) -> Any:
    """Send `requests` at once while another process holds the write turn, then give it back.

    Every request is queued by the time the turn comes, so they are written together. Each
    result is the request's `RememberResult` or the `ProviderError` it raised.
    """
    results: dict[int, Any] = {}

    async def one(index: int) -> None:
        try:
            results[index] = await adapter.remember(requests[index])
        except ProviderError as exc:
            results[index] = exc

    with ExitStack() as other_process:
        other_process.enter_context(storage.hold_lock(path / WRITERS, 1.0))
        async with anyio.create_task_group() as group:
            for index in range(len(requests)):
                group.start_soon(one, index)
            # the first request waits for the turn; the others queue behind it (the worker
            # threads that carry them start one by one as the calls before them stay stuck);
            # the queue has no event to wait on
            with anyio.fail_after(30):
                while len(adapter._store._queued) < len(requests) - 1:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            other_process.close()  # the turn is given back
    return [results[index] for index in range(len(requests))]


async def test_writes_waiting_for_the_turn_are_written_together_each_with_its_own_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = await open_sqlite(tmp_path)
    try:
        await adapter.remember(remember_request("first"))  # the store and its lock file exist
        transactions = Transactions(monkeypatch)
        requests = [
            RememberRequest(parent=f"user-{index % 5}", text=f"memory {index}", idempotency_key=key)
            for index, key in enumerate(f"key-{index % 15}" for index in range(20))
        ]
        results = await remember_while_the_turn_is_held(adapter, tmp_path, requests)
        # the first request waited for the file's turn with the others queued behind it: it
        # took them all once the turn came (or, had one not queued yet, the next writer did)
        sizes = [len(texts) for texts in transactions.texts]
        assert sum(sizes) == 20
        assert len(sizes) <= 2
        first_of_key: dict[str, Any] = {}
        for request, result in zip(requests, results, strict=True):
            assert result.memory.parent == request.parent
            key = request.idempotency_key
            if key in first_of_key:  # a key sent twice: stored once, the second a replay
                assert not result.created
                assert result.memory == first_of_key[key].memory
            else:
                assert result.created
                assert result.durable
                assert result.memory.text == request.text
                first_of_key[key] = result
        status = await adapter.status(
            StatusRequest(count=True, parents=tuple(f"user-{n}" for n in range(5)))
        )
        assert sum(namespace.memories or 0 for namespace in status.namespaces) == 15
    finally:
        await adapter.dispose()


async def test_a_request_the_store_refuses_fails_alone_when_written_with_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = await open_sqlite(tmp_path)
    try:
        await adapter.remember(remember_request("first"))
        transactions = Transactions(monkeypatch, fail_on="refused")
        texts = ["kept 1", "kept 2", "refused", "kept 3", "kept 4"]
        requests = [RememberRequest(parent="writers", text=text) for text in texts]
        results = await remember_while_the_turn_is_held(adapter, tmp_path, requests)
        for text, result in zip(texts, results, strict=True):
            if text == "refused":
                assert isinstance(result, ProviderError)
            else:
                assert result.created
                assert result.memory.text == text
        # tried together first (and refused as a whole), then each on its own
        tried = [texts for texts in transactions.texts if "refused" in texts]
        assert [len(texts) > 1 for texts in tried] == [True, False]
        assert tried[1] == ["refused"]
        assert await stored_count(adapter) == 5  # "first" and the four kept; nothing twice
    finally:
        await adapter.dispose()


async def test_writes_queued_past_one_group_are_written_by_the_next_leader_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a group holds at most GROUP_LIMIT requests: the caller of the first one left queued
    # is woken to write the next group, and so on until the queue is empty
    monkeypatch.setattr(store_module, "GROUP_LIMIT", 4)
    adapter = await open_sqlite(tmp_path)
    try:
        await adapter.remember(remember_request("first"))
        transactions = Transactions(monkeypatch)
        texts = [f"queued {index}" for index in range(10)]
        results = await remember_while_the_turn_is_held(
            adapter, tmp_path, [remember_request(text) for text in texts]
        )
        assert [result.memory.text for result in results] == texts
        assert all(result.created for result in results)
        sizes = [len(texts) for texts in transactions.texts]
        assert sum(sizes) == 10
        assert max(sizes) == 4
        assert len(sizes) >= 3
        assert await stored_count(adapter) == 11
        assert not adapter._store._queued
    finally:
        await adapter.dispose()


async def test_writers_queued_past_the_timeout_are_each_refused_and_none_is_left_queued(
    tmp_path: Path,
) -> None:
    adapter = await open_sqlite(tmp_path, busy_timeout_ms=200)
    try:
        await adapter.remember(remember_request("first"))
        refused: list[str] = []

        async def one(text: str) -> None:
            try:
                await adapter.remember(remember_request(text))
            except ProviderError as exc:
                refused.append(exc.code)

        # another process holds the turn past every writer's timeout
        with storage.hold_lock(tmp_path / WRITERS, 1.0), anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                for index in range(6):
                    group.start_soon(one, f"refused {index}")
        assert refused == ["timeout"] * 6
        assert not adapter._store._queued
        assert await stored_count(adapter) == 1
        # the next writer leads at once: nobody is left believing another one leads
        assert (await adapter.remember(remember_request("later"))).created
        assert await stored_count(adapter) == 2
    finally:
        await adapter.dispose()


async def test_memories_of_many_parents_written_together_are_each_found_in_their_own_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a group's full-text entries go in together, in rowid order, whatever order its
    # parents came in: each memory is still found by its own words, in its parent only
    adapter = await open_sqlite(tmp_path)
    try:
        await adapter.remember(RememberRequest(parent="user-9", text="an older note"))
        transactions = Transactions(monkeypatch)
        words = ["amber", "basil", "cedar", "dune", "ember", "fjord", "garnet", "heron"]
        requests = [
            RememberRequest(parent=f"user-{9 - index}", text=f"the {word} plan and the review")
            for index, word in enumerate(words)
        ]
        results = await remember_while_the_turn_is_held(adapter, tmp_path, requests)
        assert all(result.created for result in results)
        assert len(transactions.texts) <= 2
        for index, word in enumerate(words):
            found = await adapter.search(SearchRequest(parents=(f"user-{9 - index}",), query=word))
            assert [hit.memory.text for hit in found.hits] == [f"the {word} plan and the review"]
            shared = await adapter.search(
                SearchRequest(parents=(f"user-{9 - index}",), query="review plan")
            )
            assert {hit.memory.parent for hit in shared.hits} == {f"user-{9 - index}"}
        everywhere = await adapter.search(
            SearchRequest(parents=tuple(f"user-{n}" for n in range(2, 10)), query="review")
        )
        assert len(everywhere.hits) == 8
    finally:
        await adapter.dispose()
