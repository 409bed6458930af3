"""Composition pacing: while the process keeps a core busy, only so many Views are composed at once.

A composition holds a few hundred objects for as long as it runs: its tasks, cancel scopes,
coroutine frames and the models it builds. A thousand turns started together all compose at
once and finish together, each taking the whole burst's time, and their objects live long
enough to reach the oldest generation of Python's cyclic collector, whose full passes then
walk every one of them (a third of the burst's CPU in the benchmark). Composing them in
order, a few dozen at a time, does the same work with a fraction of the objects alive, and
a turn's View comes when its own work is done instead of when everyone's is.

Pacing only holds a composition back while the process is CPU-bound: compositions that wait
on remote Sources leave the core idle, and then admitted turns start without waiting, as
before. Held-back turns go in arrival order; a running composition's end hands its place to
the next, and the first turn in line looks at the core every few milliseconds, so waiting
turns are not kept behind compositions that only wait. Each look that finds the core idle
lets as many more start as are running (64, 128, 256...), and one that finds it busy brings
the number back to 64: a moment of idleness (another process took the core, say) lets a
burst grow by a step, not all at once. Admission (`max_concurrent_compositions`) still
counts every turn, running or held back.
"""

from __future__ import annotations

import math
import time
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
    """Places for compositions: `at_once` while the core is busy, doubling while it is idle."""

    def __init__(self, at_once: int = COMPOSING_AT_ONCE, gauge: CpuGauge | None = None) -> None:
        self._at_once = at_once
        self._gauge = gauge or CpuGauge()
        self._cap = at_once  # how many may run now
        self._raised = -math.inf  # when the core was last found idle and the cap raised
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
        if self._waiting or (self._running >= self._at_once and self._room() <= 0):
            await self._wait()
        else:
            self._running += 1
        try:
            yield
        finally:
            self._leave()

    def _room(self) -> int:
        """How many more may start now: the cap follows the core (see the module)."""
        if self._gauge.busy():
            self._cap = self._at_once
        else:
            now = time.monotonic()
            if now - self._raised >= WATCH_SECONDS:  # one step per look, not per call
                self._cap = max(self._cap, self._at_once, 2 * self._running)
                self._raised = now
        return self._cap - self._running

    async def _wait(self) -> None:
        waiter = _Waiter()
        self._waiting.append(waiter)
        try:
            while not waiter.handed:
                if self._waiting[0] is waiter:
                    # the first in line watches the core: idle, it lets more turns in
                    with anyio.move_on_after(WATCH_SECONDS):
                        await waiter.wake.wait()
                    if not waiter.handed:
                        self._let_in(self._room())
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
        if self._waiting:
            self._let_in(self._room())

    def _let_in(self, count: int) -> None:
        """Hand places to the first `count` waiting turns; wake the next one to watch."""
        for _ in range(min(count, len(self._waiting))):
            waiter = self._waiting.popleft()
            waiter.handed = True
            self._running += 1
            waiter.wake.set()
        if count > 0 and self._waiting:
            self._waiting[0].wake.set()
