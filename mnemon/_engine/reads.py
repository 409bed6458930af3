"""Concurrent Source reads under a per-read deadline, with honest outcomes."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.lowlevel

from .._errors import SourceError

__all__ = ["ReadOutcome", "call_source", "read_concurrently"]

_log = logging.getLogger("mnemon.reads")
Failure = Literal["timeout", "failed"]


@dataclass(slots=True)
class ReadOutcome:
    """What one Source call produced: a value, or why there is none, and how long it took."""

    key: str
    value: Any = None
    failure: Failure | None = None
    error_code: str | None = None  # the Source's own SourceError code, when it gave one
    origin_code: str | None = None  # and the foreign code behind it
    retry_after: float | None = None
    duration: float = 0.0


async def read_concurrently(
    calls: Sequence[tuple[str, Callable[[], Awaitable[Any]]]], deadline: float, phase: str
) -> list[ReadOutcome]:
    """Run every call at once under one per-read `deadline` (seconds); outcomes in call order.

    All reads start together, so one cancel scope is each read's own deadline. The caller's
    cancellation propagates unchanged; a call's own failure or timeout never does. Nothing is
    left running when this returns.
    """
    outcomes = [ReadOutcome(key, failure="timeout") for key, _ in calls]

    async def run(index: int) -> None:
        outcome = outcomes[index]
        started = time.perf_counter()
        try:
            value = await calls[index][1]()
        except Exception as exc:
            if not scope.cancel_called:
                outcome.failure = "failed"
                if isinstance(exc, SourceError):
                    outcome.error_code = exc.code
                    outcome.origin_code = exc.origin_code
                    outcome.retry_after = exc.retry_after
                _log.warning("Memory Source %s %s() failed", outcome.key, phase)
                _log.debug("Memory Source %s %s() failure", outcome.key, phase, exc_info=True)
            return
        finally:
            outcome.duration = time.perf_counter() - started
        if not scope.cancel_called:  # a result after the deadline is late and discarded
            outcome.value = value
            outcome.failure = None

    with anyio.move_on_after(deadline) as scope:
        if len(calls) == 1:
            await run(0)
        else:
            async with anyio.create_task_group() as group:
                for index in range(len(calls)):
                    group.start_soon(run, index)
    # a Source that turned the caller's cancellation into an error must not hide it
    await anyio.lowlevel.checkpoint_if_cancelled()
    for outcome in outcomes:
        if outcome.failure == "timeout":
            _log.warning("Memory Source %s %s() timed out", outcome.key, phase)
    return outcomes


async def call_source(
    call: Callable[[], Awaitable[Any]], deadline: float
) -> tuple[Any, BaseException | None, bool]:
    """Run one Source call under `deadline`: (value, failure, timed_out).

    The caller's own cancellation propagates; a Source that turned it into an error does not
    hide it.
    """
    value: Any = None
    failure: BaseException | None = None
    with anyio.move_on_after(deadline) as scope:
        try:
            value = await call()
        except Exception as exc:
            failure = exc
    if scope.cancel_called:
        return None, None, True
    if failure is not None:
        await anyio.lowlevel.checkpoint_if_cancelled()
    return value, failure, False
