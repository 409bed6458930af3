"""The SQLite store's connections: kept after a burst of calls, opened while others read."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_source_spaces import SearchRequest
from mnemon_source_spaces import _sqlite as sqlite_module
from mnemon_source_spaces._sqlite_schema import ensure_schema
from spaces_kit import open_sqlite

AT_ONCE = 12  # above the few connections the pool used to keep, below anyio's 40 threads


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every connection made during the test."""
    made: list[str] = []
    connect = sqlite3.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        made.append(str(args[0]))
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counted)
    return made


async def test_a_second_burst_of_concurrent_reads_opens_no_connection(
    tmp_path: Path, opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # every search of a burst holds its connection until all of them hold one
    barrier = threading.Barrier(AT_ONCE, timeout=30)
    search_store = sqlite_module.search_store

    def together(connection: sqlite3.Connection, request: SearchRequest) -> Any:
        barrier.wait()
        return search_store(connection, request)

    monkeypatch.setattr(sqlite_module, "search_store", together)
    adapter = await open_sqlite(tmp_path)

    async def burst() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(AT_ONCE):
                group.start_soon(adapter.search, SearchRequest(parents=("p",), query="bees"))

    try:
        await burst()
        first = len(opened)
        assert first >= AT_ONCE  # the burst really held that many connections at once
        await burst()
        await burst()
        assert len(opened) == first
    finally:
        await adapter.dispose()


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
