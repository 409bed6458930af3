"""Helpers of the runtime Source's tests: a Strategy that shows the Source, and a runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mnemon_source_runtime as runtime

from mnemon_testing import MemoryCompositionRunner, SelectAll

KEY = "source:runtime"
OFFER = f"{KEY}/mutate"


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
