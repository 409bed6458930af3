"""Concurrent Source reads under a per-read deadline, with honest outcomes."""

from __future__ import annotations

import contextvars
import logging
import time
import types
from collections.abc import Awaitable, Callable, Generator, Sequence
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

    A call runs inline, in its own context, until it first suspends: most Source reads never
    do, and a task for each costs more than the read. The first call that suspends is finished
    here and every later call gets its own task, so reads still overlap.
    """
    outcomes = [ReadOutcome(key, failure="timeout") for key, _ in calls]

    def failed(outcome: ReadOutcome, exc: Exception) -> None:
        if not scope.cancel_called:
            outcome.failure = "failed"
            if isinstance(exc, SourceError):
                outcome.error_code = exc.code
                outcome.origin_code = exc.origin_code
                outcome.retry_after = exc.retry_after
            _log.warning("Memory Source %s %s() failed", outcome.key, phase)
            _log.debug("Memory Source %s %s() failure", outcome.key, phase, exc_info=exc)

    def succeeded(outcome: ReadOutcome, value: Any) -> None:
        if not scope.cancel_called:  # a result after the deadline is late and discarded
            outcome.value = value
            outcome.failure = None

    async def run(index: int) -> None:
        outcome = outcomes[index]
        started = time.perf_counter()
        try:
            value = await calls[index][1]()
        except Exception as exc:
            failed(outcome, exc)
            return
        finally:
            outcome.duration = time.perf_counter() - started
        succeeded(outcome, value)

    scope: anyio.CancelScope
    if len(calls) == 1:
        with anyio.move_on_after(deadline) as scope:
            await run(0)
    else:
        # entered before any call starts, so a call's own cancel scopes nest inside it; the
        # group's own scope is the deadline (one cancel scope less than a move_on_after around
        # it: a turn enters two per phase otherwise)
        async with anyio.create_task_group() as group:
            scope = group.cancel_scope
            scope.deadline = anyio.current_time() + deadline
            for index, (_, call) in enumerate(calls):
                outcome = outcomes[index]
                started = time.perf_counter()
                context = contextvars.copy_context()  # as a task would have
                coroutine: Any = None
                try:
                    coroutine = context.run(call)
                    if not isinstance(coroutine, types.CoroutineType):
                        coroutine = _awaited(coroutine)
                    yielded = context.run(coroutine.send, None)
                except StopIteration as stop:
                    outcome.duration = time.perf_counter() - started
                    succeeded(outcome, stop.value)
                    continue
                except Exception as exc:
                    outcome.duration = time.perf_counter() - started
                    failed(outcome, exc)
                    continue
                # it suspended: later calls start now, in tasks, and this one ends here
                for later in range(index + 1, len(calls)):
                    group.start_soon(run, later)
                try:
                    value = await _resume(coroutine, context, yielded)
                except Exception as exc:
                    failed(outcome, exc)
                else:
                    succeeded(outcome, value)
                finally:
                    outcome.duration = time.perf_counter() - started
                break
    # a Source that turned the caller's cancellation into an error must not hide it
    await anyio.lowlevel.checkpoint_if_cancelled()
    for outcome in outcomes:
        if outcome.failure == "timeout":
            _log.warning("Memory Source %s %s() timed out", outcome.key, phase)
    return outcomes


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


@types.coroutine
def _resume(coroutine: Any, context: contextvars.Context, yielded: Any) -> Generator[Any, Any, Any]:
    """Drive a coroutine that already ran to its first suspension, as `await` would."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # the event loop's cancellation goes to the coroutine
            try:
                yielded = context.run(coroutine.throw, exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = context.run(coroutine.send, sent)
            except StopIteration as stop:
                return stop.value


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
