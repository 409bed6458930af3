"""The Source's per-turn health check: answered from memory while nothing has failed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import SQLITE_PROVIDER, ProviderError, ProviderInit, SearchRequest
from mnemon_source_spaces import _sqlite as sqlite_module
from spaces_kit import ADA, open_spaces, remember, scope_turn

STATUS_QUERY = "SELECT 1 FROM namespaces LIMIT 1"


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQL statement run on a connection opened during the test."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(seen.append)
        return connection

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


async def test_turns_with_nothing_failed_run_no_status_query(
    tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "STATUS_MAX_AGE", 3600.0)
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "Ada keeps bees")
        await turn.release()
        statements.clear()
        for _ in range(5):
            turn = await scope_turn(runner, ADA)
            assert [offer.action_id for offer in turn.view.offers][:1] == ["remember"]
            await turn.release()
    assert statements == []


async def test_without_a_cached_answer_every_turn_checks_the_store(
    tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "STATUS_MAX_AGE", 0.0)
    async with await open_spaces(tmp_path) as runner:
        for _ in range(3):
            turn = await scope_turn(runner, ADA)
            await turn.release()
    assert statements.count(STATUS_QUERY) == 3


async def test_a_failure_of_the_store_ends_the_cached_answer(
    tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "STATUS_MAX_AGE", 3600.0)
    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="cache",
            data_directory=str(tmp_path),
            configuration={"path": str(tmp_path / "store.sqlite3")},
        )
    )
    try:
        for _ in range(3):
            assert (await adapter.status(sqlite_module.StatusRequest())).availability == "ready"
        assert statements.count(STATUS_QUERY) == 1

        def damaged(connection: sqlite3.Connection, request: SearchRequest) -> Any:
            raise sqlite3.DatabaseError("database disk image is malformed")

        monkeypatch.setattr(sqlite_module, "search_store", damaged)
        with pytest.raises(ProviderError) as failed:
            await adapter.search(SearchRequest(parents=("p",), query="bees"))
        assert failed.value.code == "unavailable"
        await adapter.status(sqlite_module.StatusRequest())
        assert statements.count(STATUS_QUERY) == 2
    finally:
        await adapter.dispose()
    after = await adapter.status(sqlite_module.StatusRequest())
    assert (after.availability, after.reason) == ("unavailable", "store-unreachable")
