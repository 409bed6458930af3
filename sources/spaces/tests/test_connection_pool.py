"""The SQLite store's connections: kept after a burst of calls, opened while others read."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_source_spaces import SearchRequest
from mnemon_source_spaces import _sqlite as sqlite_module
from mnemon_source_spaces import _sqlite_store as store_module
from mnemon_source_spaces._sqlite_schema import ensure_schema
from spaces_kit import open_sqlite

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
