"""The worker threads behind `run_blocking` and `guarded_call`: one queue drained by few threads.

Every blocking call a Source makes (a `stat`, a SQLite query, a file read) used to be one trip
through anyio's thread pool: a checkpoint, a limiter, a cancel scope, a wake-up of one idle
thread and a wake-up of the event loop, for a call that itself takes tens of microseconds. With
many turns in flight those trips cost the loop more than the calls. Here the calls of one event
loop go into one queue that a few threads drain in turn: a thread that finishes a call takes
the next one without being woken, and the results finished while the loop was busy reach it in
one wake-up. A thread that stays on one call (a lock held by another process, a slow disk) does
not hold up the others: when no thread has started a call for a couple of milliseconds while
calls wait, another thread is started, up to the size of anyio's default thread limiter (40
unless the host changed it), which these threads stand in for. While the process keeps a core
busy, though, its threads are slow because they wait for the GIL rather than blocked, and more
of them would only contend for it (with 1,000 turns in flight they grew to 30-40 and took CPU
from the event loop): a call then counts as blocked only after a quarter of a second. A call
that waits for someone else (a lock, another process, a reply) can say so with `waiting()`:
it then counts as blocked at once, so the calls queued behind it get a thread.

Only the asyncio backend is served this way; on any other, calls go through anyio's pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio.lowlevel
import anyio.to_thread

from ._cpu import CpuGauge

_T = TypeVar("_T")

# a thread that has run one call this long is taken as blocked, not as busy with short calls
_STALL_SECONDS = 0.002
# threads still starting calls that are enough for a queue of short calls; more only add
# contention for the GIL
_ENOUGH_PROGRESSING = 2
# while the process keeps a core busy, slow calls are taken as waiting for the GIL rather than
# blocked, unless they run this long
_BUSY_STALL_SECONDS = 0.25
# an idle thread exits after this long, as anyio's workers do
_IDLE_SECONDS = 10.0


class _Worker(threading.local):
    """What the current thread is to the lanes: the lane it drains (None: not a lane's)."""

    lane: _Lane | None = None
    waits = 0  # how deep in `waiting()` blocks it is


_worker = _Worker()


class _Call:
    """One blocking call waiting in, or taken from, the queue."""

    __slots__ = ("context", "function", "future")

    def __init__(
        self,
        function: Callable[[], Any],
        context: contextvars.Context,
        future: asyncio.Future[Any],
    ) -> None:
        self.function = function
        self.context = context
        self.future = future


class _Lane:
    """The queue and threads of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: deque[_Call] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._idle = 0
        # per thread: when it began its current call (None while it waits for one)
        self._began: dict[int, float | None] = {}
        # threads inside `waiting()`: blocked on someone else, not progressing, however busy
        self._waiting: set[int] = set()
        self._finished: list[tuple[_Call, bool, Any]] = []
        self._finished_lock = threading.Lock()
        self._delivery_scheduled = False
        self._watch: asyncio.TimerHandle | None = None
        self._cpu = CpuGauge()
        # read on every call: a host (or a test) may change the limiter's size at any time
        self._limiter = anyio.to_thread.current_default_thread_limiter()

    @property
    def _limit(self) -> int:
        return max(1, int(self._limiter.total_tokens))

    def submit(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        """Queue `function` (run in a copy of the caller's context); its future has the result."""
        future: asyncio.Future[Any] = self._loop.create_future()
        call = _Call(function, contextvars.copy_context(), future)
        with self._ready:
            self._calls.append(call)
            if self._idle:
                self._ready.notify()
                # an idle thread is counted until it wakes: calls sent together in one moment
                # all see it, though it takes only one of them, which may block
                if len(self._calls) <= self._idle:
                    return future
                start = False
            else:
                start = self._needs_thread()
        if start:
            self._start_thread()
        elif self._watch is None:
            self._watch = self._loop.call_later(_STALL_SECONDS, self._check_progress)
        return future

    def _needs_thread(self) -> bool:
        """Whether a new thread should take calls: too few threads are starting calls."""
        if len(self._began) >= self._limit:
            return False
        # a busy process's calls are slow because they wait for the GIL: only one that has run
        # far longer than that is taken as blocked then
        stall = _BUSY_STALL_SECONDS if self._cpu.busy() else _STALL_SECONDS
        stalled_before = time.monotonic() - stall
        progressing = sum(
            1
            for thread, began in self._began.items()
            if (began is None or began > stalled_before) and thread not in self._waiting
        )
        return progressing < _ENOUGH_PROGRESSING

    def _check_progress(self) -> None:
        """On the loop: start a thread when calls still wait behind threads that are stuck."""
        self._watch = None
        with self._ready:
            if not self._calls:
                return
            start = len(self._calls) > self._idle and self._needs_thread()
        if start:
            self._start_thread()
        self._watch = self._loop.call_later(_STALL_SECONDS, self._check_progress)

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._drain, name="mnemon-blocking", daemon=True)
        with self._ready:
            if len(self._began) >= self._limit:
                return
            # counted before it runs, so two submits do not both start one
            self._began[id(thread)] = None
        thread.start()

    def wait_begins(self, thread: int) -> None:
        """In a worker thread: `thread` waits for someone else; start another if calls wait."""
        with self._ready:
            self._waiting.add(thread)
            start = len(self._calls) > self._idle and self._needs_thread()
        if start:
            self._start_thread()

    def wait_ends(self, thread: int) -> None:
        with self._ready:
            self._waiting.discard(thread)

    def _drain(self) -> None:
        """In a worker thread: run queued calls until none arrives for a while."""
        me = id(threading.current_thread())
        _worker.lane = self
        while True:
            with self._ready:
                self._began[me] = None
                while not self._calls:
                    self._idle += 1
                    woken = self._ready.wait(_IDLE_SECONDS)
                    self._idle -= 1
                    if not woken and not self._calls:
                        del self._began[me]
                        return
                call = self._calls.popleft()
                if call.future.done():
                    continue  # the caller stopped waiting (cancelled) before the call began
                self._began[me] = time.monotonic()
            try:
                outcome: tuple[_Call, bool, Any] = (call, True, call.context.run(call.function))
            except BaseException as error:  # handed to the awaiting task as it is
                outcome = (call, False, error)
            self._finish(outcome)

    def _finish(self, outcome: tuple[_Call, bool, Any]) -> None:
        """In a worker thread: hand a result to the loop, one wake-up for all finished so far."""
        with self._finished_lock:
            self._finished.append(outcome)
            if self._delivery_scheduled:
                return
            self._delivery_scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:
            # the loop is closed: nobody waits for these results any more
            with self._finished_lock:
                self._finished.clear()
                self._delivery_scheduled = False

    def _deliver(self) -> None:
        """On the loop: resolve the futures of every call finished since the last delivery."""
        with self._finished_lock:
            finished, self._finished = self._finished, []
            self._delivery_scheduled = False
        for call, succeeded, value in finished:
            if call.future.done():
                continue
            if succeeded:
                call.future.set_result(value)
            else:
                call.future.set_exception(value)


@contextmanager
def waiting() -> Iterator[None]:
    """Mark what the `with` block does in a worker thread as waiting for someone else.

    A call waiting for a lock, another process or a reply holds its thread without using the
    CPU. The lane cannot tell that from a call slowed by a busy process's GIL, which it gives
    no new thread for a quarter of a second; calls queued behind such waits would stand
    still meanwhile. Inside this block the thread counts as blocked at once, so the calls
    behind it get a thread. Outside a lane's thread (another backend, the event loop, a
    thread of the caller's own) it does nothing. Blocks may nest.
    """
    me = id(threading.current_thread())
    lane = _worker.lane if not _worker.waits else None  # only the outermost block counts
    _worker.waits += 1
    if lane is not None:
        lane.wait_begins(me)
    try:
        yield
    finally:
        _worker.waits -= 1
        if lane is not None:
            lane.wait_ends(me)


_lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = weakref.WeakKeyDictionary()


async def run_in_thread(function: Callable[[], _T]) -> _T:
    """Run `function` in a worker thread; the caller stops waiting at once when cancelled.

    On asyncio the call goes through the loop's shared queue (see the module's docstring); on
    any other backend through anyio's thread pool, abandoned on cancellation.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return await anyio.to_thread.run_sync(function, abandon_on_cancel=True)
    await anyio.lowlevel.checkpoint_if_cancelled()
    lane = _lanes.get(loop)
    if lane is None:
        lane = _lanes[loop] = _Lane(loop)
    result: _T = await lane.submit(function)
    return result
