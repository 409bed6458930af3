"""The `collector = "serving"` host setting: Python's cyclic collector set up for many turns.

With a thousand turns in flight, every object a turn holds lives long enough to reach the
oldest generation, and each full pass of the collector then walks the whole process: the
objects of every turn in flight and everything made at start-up (modules, schemas, plugins).
A host that serves turns as the process's main job can opt in to two standard measures:

- when the first such host is made, one full collection, then `gc.freeze()`: what exists
  then (start-up objects, mostly alive for the life of the process) is left out of every
  later pass. It is never unfrozen: a host cannot tell its own freeze from the process's.
- while such a host is open, the young generation's threshold is `SERVING_THRESHOLD`
  instead of Python's 700: a tenth as many young passes, each on more objects. The
  previous thresholds come back when the last such host is closed, unless something else
  changed them meanwhile.

Reference counting still frees every object that is not part of a cycle at once; only
cyclic garbage waits longer (or, for objects frozen at start-up, is never reclaimed).
"""

from __future__ import annotations

import gc
import threading

__all__ = ["SERVING_THRESHOLD", "release_serving", "take_serving"]

SERVING_THRESHOLD = 20_000

_lock = threading.Lock()
_holders = 0
_frozen = False
_saved: tuple[int, int, int] | None = None


def take_serving() -> None:
    """Set the collector up for serving (counted: each call is matched by `release_serving`)."""
    global _holders, _frozen, _saved
    with _lock:
        if _holders == 0:
            if not _frozen:
                gc.collect()  # garbage left now would otherwise be frozen with the rest
                gc.freeze()
                _frozen = True
            _saved = gc.get_threshold()
            gc.set_threshold(SERVING_THRESHOLD, _saved[1], _saved[2])
        _holders += 1


def release_serving() -> None:
    """Undo one `take_serving`; the last one restores the thresholds it found."""
    global _holders, _saved
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0 and _saved is not None:
            if gc.get_threshold()[0] == SERVING_THRESHOLD:
                gc.set_threshold(*_saved)
            _saved = None
