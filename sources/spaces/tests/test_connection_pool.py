"""The SQLite store's connections outlive a burst of concurrent calls."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, SearchRequest
from mnemon_source_spaces import _sqlite as sqlite_module

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
    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="pool",
            data_directory=str(tmp_path),
            configuration={"path": str(tmp_path / "store.sqlite3")},
        )
    )

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
