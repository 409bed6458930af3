"""Composition pacing: while the process keeps a core busy, only so many Views are composed at once.

A composition holds a few hundred objects for as long as it runs: its tasks, cancel scopes,
coroutine frames and the models it builds. A thousand turns started together all compose at
once and finish together, each taking the whole burst's time, and their objects live long
enough to reach the oldest generation of Python's cyclic collector, whose full passes then
walk every one of them (a third of the burst's CPU in the benchmark). Composing them in
order, a few dozen at a time, does the same work with a fraction of the objects alive, and
a turn's View comes when its own work is done instead of when everyone's is.

Pacing only holds a composition back while the process is CPU-bound: compositions that wait
on remote Sources leave the core idle, and then every admitted turn starts at once, as
before. Held-back turns go in arrival order; a running composition's end hands its place to
the next, or lets every waiting turn in when the core has gone idle meanwhile, and the first
turn in line looks at the core every few milliseconds, so waiting turns are not kept behind
compositions that only wait. Admission (`max_concurrent_compositions`) still counts every
turn, running or held back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from .._cpu import CpuGauge

__all__ = ["COMPOSING_AT_ONCE", "Pacer"]

# enough compositions at once to keep both the event loop and the worker threads busy; the
# starter benchmark composes fastest with 32 to 64 of them when the process is CPU-bound
COMPOSING_AT_ONCE = 64
# how often the first turn in line looks whether the core has gone idle without a place
# freeing (every running composition waiting on a slow remote Source, say)
WATCH_SECONDS = 0.005


class _Waiter:
    """One held-back composition: whether it was handed a place, and what wakes it."""

    __slots__ = ("handed", "wake")

    def __init__(self) -> None:
        self.handed = False
        self.wake = anyio.Event()


class Pacer:
    """Places for compositions: all of them while the core is idle, `at_once` while it is busy."""

    def __init__(self, at_once: int = COMPOSING_AT_ONCE, gauge: CpuGauge | None = None) -> None:
        self._at_once = at_once
        self._gauge = gauge or CpuGauge()
        self._running = 0
        self._waiting: deque[_Waiter] = deque()

    @property
    def running(self) -> int:
        """Compositions holding a place now."""
        return self._running

    @property
    def waiting(self) -> int:
        """Compositions held back now."""
        return len(self._waiting)

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """Hold a place for one composition; wait for one while the process is CPU-bound.

        A cancelled wait gives up its turn (or the place it was just handed) to the next.
        """
        if self._waiting or (self._running >= self._at_once and self._gauge.busy()):
            await self._wait()
        else:
            self._running += 1
        try:
            yield
        finally:
            self._leave()

    async def _wait(self) -> None:
        waiter = _Waiter()
        self._waiting.append(waiter)
        try:
            while not waiter.handed:
                if self._waiting[0] is waiter:
                    # the first in line watches the core: idle, it lets every waiting turn in
                    with anyio.move_on_after(WATCH_SECONDS):
                        await waiter.wake.wait()
                    if not waiter.handed and not self._gauge.busy():
                        self._let_in(len(self._waiting))
                else:
                    await waiter.wake.wait()
                if not waiter.handed:
                    waiter.wake = anyio.Event()  # woken to watch: it is first in line now
        except BaseException:
            if waiter.handed:
                self._leave()  # the place it was just handed goes on to the next
            else:
                first = self._waiting[0] is waiter
                self._waiting.remove(waiter)
                if first and self._waiting:
                    self._waiting[0].wake.set()
            raise

    def _leave(self) -> None:
        self._running -= 1
        if not self._waiting:
            return
        free = self._at_once - self._running
        self._let_in(len(self._waiting) if not self._gauge.busy() else free)

    def _let_in(self, count: int) -> None:
        """Hand places to the first `count` waiting turns; wake the next one to watch."""
        for _ in range(min(count, len(self._waiting))):
            waiter = self._waiting.popleft()
            waiter.handed = True
            self._running += 1
            waiter.wake.set()
        if count > 0 and self._waiting:
            self._waiting[0].wake.set()
