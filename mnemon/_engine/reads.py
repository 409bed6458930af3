"""Concurrent Source reads under a per-read deadline, with honest outcomes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.lowlevel

__all__ = ["ReadOutcome", "read_concurrently"]

_log = logging.getLogger("mnemon.reads")
Failure = Literal["timeout", "failed"]


@dataclass(slots=True)
class ReadOutcome:
    """What one Source call produced: a value, or why there is none."""

    key: str
    value: Any = None
    failure: Failure | None = None


async def _read_one(
    key: str, call: Callable[[], Awaitable[Any]], deadline: float, phase: str
) -> ReadOutcome:
    outcome = ReadOutcome(key)
    failed = False
    with anyio.move_on_after(deadline) as scope:
        try:
            outcome.value = await call()
        except Exception:
            failed = True
    if scope.cancel_called:
        # our deadline fired: whatever came back afterwards is late and discarded
        outcome.value = None
        outcome.failure = "timeout"
        _log.warning("Memory Source %s %s() timed out", key, phase)
    elif failed:
        outcome.failure = "failed"
        _log.warning("Memory Source %s %s() failed", key, phase)
        _log.debug("Memory Source %s %s() failure", key, phase, exc_info=True)
    return outcome


async def read_concurrently(
    calls: Sequence[tuple[str, Callable[[], Awaitable[Any]]]], deadline: float, phase: str
) -> list[ReadOutcome]:
    """Run every call at once, each under its own `deadline` (seconds); outcomes in call order.

    The caller's cancellation propagates unchanged; a call's own failure or timeout never
    does. Nothing is left running when this returns.
    """
    if len(calls) == 1:
        key, call = calls[0]
        outcome = await _read_one(key, call, deadline, phase)
        # a Source that turned the caller's cancellation into an error must not hide it
        await anyio.lowlevel.checkpoint_if_cancelled()
        return [outcome]
    outcomes: list[ReadOutcome] = [ReadOutcome(key) for key, _ in calls]

    async def run(index: int) -> None:
        key, call = calls[index]
        outcomes[index] = await _read_one(key, call, deadline, phase)

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(run, index)
    return outcomes
