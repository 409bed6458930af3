"""Helpers of the spaces Source's tests: a Strategy that selects the Source, and a runner."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mnemon_source_spaces as spaces

from mnemon import ActionOffer
from mnemon_testing import MemoryCompositionRunner, RunnerTurn, SelectAll

KEY = "source:spaces"
RECALL = f"{KEY}/recall"
RELATED = f"{KEY}/related"
INSPECT = f"{KEY}/inspect"
REMEMBER = f"{KEY}/remember"
LINK = f"{KEY}/link"
FORGET = f"{KEY}/forget"
ADA = {"user_id": "ada"}
BOB = {"user_id": "bob"}


def allow(offer: ActionOffer) -> bool:
    return True


def SelectSpaces() -> SelectAll:
    """Every available Source routed within 2,000 characters, with its routes and actions."""
    return SelectAll(mode="routed", max_characters=2_000)


def config(directory: Path, **extra: Any) -> dict[str, Any]:
    return {"data_dir": str(directory), **extra}


async def open_spaces(
    directory: Path,
    *,
    plugin: Any = spaces,
    runner: MemoryCompositionRunner | None = None,
    **extra: Any,
) -> MemoryCompositionRunner:
    runner = runner or MemoryCompositionRunner()
    try:
        await runner.mount(plugin, instance_id="spaces", config=config(directory, **extra))
        await runner.mount(SelectSpaces(), instance_id="strategy")
    except BaseException:
        await runner.dispose()
        raise
    return runner


async def remember(turn: RunnerTurn, text: str, **fields: Any) -> Any:
    key = fields.pop("idempotency_key", None)
    return await turn.execute_action(REMEMBER, {"text": text, **fields}, allow, idempotency_key=key)


async def recall(turn: RunnerTurn, query: str, **fields: Any) -> Any:
    return await turn.execute_route(RECALL, {"query": query, **fields})


def texts(evidence: Any) -> list[str]:
    return [item.text for item in evidence.items]


def scope_turn(runner: MemoryCompositionRunner, scope: Mapping[str, Any]) -> Any:
    return runner.begin_turn({"scope": dict(scope)})


async def open_sqlite(directory: Path, **configuration: Any) -> Any:
    """The SQLite Provider on `directory/store.sqlite3` (`configuration` adds to its own)."""
    return await spaces.SQLITE_PROVIDER.open(
        spaces.ProviderInit(
            instance_key="sqlite",
            data_directory=str(directory),
            configuration={"path": str(directory / "store.sqlite3"), **configuration},
        )
    )
