"""Helpers of the runtime Source's tests: a Strategy that shows the Source, and a runner."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mnemon_source_runtime as runtime

from mnemon_testing import MemoryCompositionRunner, SelectAll

KEY = "source:runtime"
OFFER = f"{KEY}/mutate"
ADA = {"user_id": "ada"}


def ShowAll() -> SelectAll:
    """Every available Source, eager within 4,000 characters each, with its actions."""
    return SelectAll(max_characters=4_000)


def allow(offer: object) -> bool:
    return True


async def open_runtime(
    runner: MemoryCompositionRunner,
    config: Mapping[str, Any],
    *,
    max_characters: int = 4_000,
) -> None:
    """Mount the runtime Source as entry `runtime`, and the ShowAll Strategy."""
    await runner.mount(runtime, instance_id="runtime", config=dict(config))
    await runner.mount(ShowAll(), instance_id="show", config={"max_characters": max_characters})


def postgres_config(dsn: str, schema: str, directory: Path, **extra: Any) -> dict[str, Any]:
    """The Source's configuration with `store = "postgres"` on `schema` of the server `dsn`."""
    return {
        "store": "postgres",
        "dsn": dsn,
        "schema": schema,
        "data_dir": str(directory),
        "memory_limit_bytes": 1024 * 1024,
        **extra,
    }


async def open_host(config: Mapping[str, Any]) -> MemoryCompositionRunner:
    """A new runner with the runtime Source (entry `runtime`) and a Strategy showing it."""
    runner = MemoryCompositionRunner()
    try:
        await open_runtime(runner, config, max_characters=8_000)
    except BaseException:
        await runner.dispose()
        raise
    return runner


def add(text: str) -> dict[str, Any]:
    """The mutate value adding `text` as a user fact."""
    return {"target": "user", "operation": "add", "text": text}


async def facts_of(runner: MemoryCompositionRunner, scope: Mapping[str, str] = ADA) -> list[str]:
    """The user facts the Source holds for `scope`, read through the management plane."""
    output = await runner.management_client(KEY, dict(scope)).read("read")
    return [entry["text"] for entry in output["user"]]
