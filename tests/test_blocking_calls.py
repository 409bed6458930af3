"""Blocking calls that many turns make at once: `run_blocking` and `guarded_call` share threads.

The calls of one event loop go through one queue drained by a few threads; these tests hold
that sharing to what each caller was promised: its own result, its own context, its own
cancellation, and no wait behind another caller's call that blocks; and they check that
threads are added for calls that block, not for calls slowed by a process busy on the GIL,
and at once for calls that say they wait (`mnemon.sdk.waiting()`, file locks).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import mnemon.sdk
from mnemon.sdk import storage

caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller")


async def test_calls_made_at_once_each_get_their_own_result_and_context() -> None:
    results: dict[int, tuple[int, str, str]] = {}

    def work(number: int) -> tuple[int, str, str]:
        return number * number, caller.get(), threading.current_thread().name

    async def one(number: int) -> None:
        caller.set(f"turn-{number}")
        results[number] = await mnemon.sdk.run_blocking(work, number)

    async with anyio.create_task_group() as group:
        for number in range(300):
            group.start_soon(one, number)

    assert {number: result[:2] for number, result in results.items()} == {
        number: (number * number, f"turn-{number}") for number in range(300)
    }
    # the calls ran off the event loop, in fewer threads than calls
    assert threading.current_thread().name not in {result[2] for result in results.values()}
    assert len({result[2] for result in results.values()}) < 300


async def test_an_error_reaches_only_the_caller_whose_call_raised() -> None:
    def work(number: int) -> int:
        if number % 3 == 0:
            raise LookupError(f"no {number}")
        return number

    outcomes: dict[int, object] = {}

    async def one(number: int) -> None:
        try:
            outcomes[number] = await mnemon.sdk.run_blocking(work, number)
        except LookupError as error:
            outcomes[number] = str(error)

    async with anyio.create_task_group() as group:
        for number in range(60):
            group.start_soon(one, number)

    assert outcomes == {n: (f"no {n}" if n % 3 == 0 else n) for n in range(60)}


async def test_a_call_that_blocks_does_not_hold_up_the_calls_behind_it() -> None:
    # the first call waits for an event only a later call sets: with one thread per queue
    # the two would wait for each other until the first gives up
    released = threading.Event()

    async with anyio.create_task_group() as group:

        async def blocked() -> None:
            assert await mnemon.sdk.run_blocking(released.wait, 5.0) is True

        group.start_soon(blocked)
        await anyio.sleep(0.01)
        for _ in range(20):
            await mnemon.sdk.run_blocking(lambda: None)
        await mnemon.sdk.run_blocking(released.set)


async def test_calls_sent_together_to_an_idle_thread_do_not_wait_behind_one_that_blocks() -> None:
    # one idle thread is woken for the first call and stays on it: the calls sent in the same
    # moment must still get a thread of their own rather than wait for the first to end
    await mnemon.sdk.run_blocking(lambda: None)
    await anyio.sleep(0.05)  # its thread is idle, waiting for the next call, by now
    released = threading.Event()
    done: list[int] = []
    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            group.start_soon(mnemon.sdk.run_blocking, released.wait, 10.0)
            async with anyio.create_task_group() as others:
                for number in range(5):
                    others.start_soon(mnemon.sdk.run_blocking, done.append, number)
            released.set()
    assert sorted(done) == [0, 1, 2, 3, 4]


async def test_a_cancelled_caller_does_not_cancel_another_callers_call() -> None:
    gate = threading.Event()
    kept: list[str] = []

    def work(name: str) -> str:
        gate.wait(5.0)
        return name

    async def waiting() -> None:
        kept.append(await mnemon.sdk.run_blocking(work, "kept"))

    cancelled = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(_within, cancelled, partial(work, "abandoned"))
        group.start_soon(waiting)
        await anyio.sleep(0.01)
        cancelled.cancel()  # its caller stops waiting at once, though the call cannot stop
        await anyio.sleep(0.01)
        gate.set()

    assert cancelled.cancelled_caught
    assert kept == ["kept"]


async def test_a_deadline_stops_the_wait_and_guarded_call_says_timeout() -> None:
    gate = threading.Event()
    try:
        with pytest.raises(mnemon.SourceError) as raised:
            await mnemon.sdk.guarded_call(gate.wait, 5.0, subject="the slow read", timeout=0.02)
    finally:
        gate.set()
    assert raised.value.code == "timeout"


def test_calls_work_on_each_new_event_loop() -> None:
    # a host may run several loops one after another in one process (tests, a CLI)
    for number in range(3):
        assert anyio.run(mnemon.sdk.run_blocking, abs, -number, backend="asyncio") == number


async def test_a_call_whose_caller_stopped_waiting_before_it_began_never_runs() -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    limiter.total_tokens = 1  # the limit the calls take: one thread, kept busy below
    gate = threading.Event()
    ran: list[str] = []
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(mnemon.sdk.run_blocking, gate.wait, 5.0)
            await anyio.sleep(0.01)
            scope = anyio.CancelScope()
            group.start_soon(_within, scope, partial(ran.append, "abandoned"))
            await anyio.sleep(0.01)
            scope.cancel()
            await anyio.sleep(0.01)
            gate.set()
        assert await mnemon.sdk.run_blocking(partial(ran.append, "later")) is None
    finally:
        gate.set()
        limiter.total_tokens = tokens
    assert ran == ["later"]


async def _within(scope: anyio.CancelScope, call: Callable[[], object]) -> None:
    with scope:
        await mnemon.sdk.run_blocking(call)
        pytest.fail("a cancelled caller got its call's result")


def _cpu_clock(monkeypatch: pytest.MonkeyPatch, *, busy: bool) -> None:
    """Make the process look as if it kept a core busy (`busy`) or stayed idle."""
    monkeypatch.setattr(time, "process_time", time.monotonic if busy else lambda: 0.0)


async def _threads_for_slow_calls(calls: int) -> set[int]:
    """Run `calls` calls that each take 20 ms at once; return the threads that ran them."""
    ran: set[int] = set()

    def slow() -> None:
        ran.add(threading.get_ident())
        time.sleep(0.02)

    async with anyio.create_task_group() as group:
        for _ in range(calls):
            group.start_soon(mnemon.sdk.run_blocking, slow)
    return ran


async def test_while_the_process_keeps_a_core_busy_slow_calls_start_no_more_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a busy process's calls are slow because they wait for the GIL: threads would contend
    _cpu_clock(monkeypatch, busy=True)
    assert len(await _threads_for_slow_calls(12)) == 2


async def test_calls_that_block_while_the_process_is_idle_get_more_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cpu_clock(monkeypatch, busy=False)
    assert len(await _threads_for_slow_calls(12)) > 2


async def test_in_a_busy_process_calls_that_block_for_long_still_get_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # both threads wait for an event only a third call sets: it must get a thread of its own
    _cpu_clock(monkeypatch, busy=True)
    released = threading.Event()
    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(mnemon.sdk.run_blocking, released.wait, 5.0)
            await anyio.sleep(0.01)
            await mnemon.sdk.run_blocking(released.set)


async def test_in_a_busy_process_calls_that_say_they_wait_get_threads_for_the_calls_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a call waiting for a lock or a reply uses no CPU: it is not taken for one slowed by
    # the GIL, so the calls behind it get threads of their own at once
    _cpu_clock(monkeypatch, busy=True)
    ran: set[int] = set()

    def waits() -> None:
        ran.add(threading.get_ident())
        with mnemon.sdk.waiting(), mnemon.sdk.waiting():  # blocks may nest
            time.sleep(0.02)

    async with anyio.create_task_group() as group:
        for _ in range(12):
            group.start_soon(mnemon.sdk.run_blocking, waits)
    assert len(ran) > 2
    # the threads count as busy again after their waits: slow calls start no more of them
    before = threading.active_count()
    await _threads_for_slow_calls(12)
    assert threading.active_count() <= before


async def test_in_a_busy_process_calls_waiting_for_a_file_lock_do_not_hold_up_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cpu_clock(monkeypatch, busy=True)
    lock = tmp_path / "store.lock"
    ran: set[int] = set()

    def locked() -> None:
        ran.add(threading.get_ident())
        with storage.hold_lock(lock, 5.0):
            pass

    with ExitStack() as another_holder:  # a second open of the file stands for another process
        another_holder.enter_context(storage.hold_lock(lock, 1.0))
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(mnemon.sdk.run_blocking, locked)
            await anyio.sleep(0.1)  # every call waits for the lock by now, each in a thread
            another_holder.close()
    assert len(ran) == 6


def test_waiting_outside_a_worker_thread_does_nothing() -> None:
    with mnemon.sdk.waiting(), mnemon.sdk.waiting():
        assert threading.current_thread() is threading.main_thread()
