"""Whether the process keeps a core busy: the share of CPU time it used since the last look.

The blocking lane and composition pacing both change what they do when the process is
CPU-bound: its threads are then slow because they wait for the GIL, and more work started at
once only adds to what the event loop juggles. The look is cheap (`time.process_time()`, all
threads of the process) and taken at most every couple of milliseconds; between looks the
last answer stands.
"""

from __future__ import annotations

import time

__all__ = ["CpuGauge"]

# the share of one core above which the process counts as CPU-bound
CPU_BOUND = 0.8
# a look spans at least this long: a shorter span measures the clock's grain, not the load
LOOK_SECONDS = 0.002


class CpuGauge:
    """The process's CPU share since the last look, for one owner (not shared across threads)."""

    __slots__ = ("_busy", "_cpu_at", "_looked_at")

    def __init__(self) -> None:
        self._looked_at = time.monotonic()
        self._cpu_at = time.process_time()
        self._busy = False

    def busy(self) -> bool:
        """Whether the process used at least `CPU_BOUND` of a core since the last look."""
        now = time.monotonic()
        span = now - self._looked_at
        if span >= LOOK_SECONDS:
            cpu = time.process_time()
            self._busy = cpu - self._cpu_at >= CPU_BOUND * span
            self._looked_at, self._cpu_at = now, cpu
        return self._busy
