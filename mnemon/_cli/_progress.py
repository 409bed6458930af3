"""Progress for long work (import, export, a verb adding many files): on a terminal only.

`rich` draws the bar on stderr when stderr is a terminal; piped or redirected, nothing is
drawn, so scripts and `--json` output stay clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress"]


def _ignore(steps: int = 1) -> None:
    del steps


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A function advancing a progress bar by its argument (1 by default), for this block."""
    if not sys.stderr.isatty():
        yield _ignore
        return
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:  # pragma: no cover - rich comes with the `cli` extra
        yield _ignore
        return
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(steps: int = 1) -> None:
            bar.advance(task, steps)

        yield advance
