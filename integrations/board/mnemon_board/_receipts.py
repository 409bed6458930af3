"""How the board says what a change did: one toast, the same on every page.

A toast says whether the change was made, what moved, and offers Undo when it can be undone.
The pages that write memory (a later set of pages) say each write's receipt the same way:
stored, replayed, refused or unknown, never more than the receipt says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._control import Applied
from ._i18n import Words

__all__ = ["Toast", "applied_toast", "refused_toast"]


@dataclass(frozen=True, slots=True)
class Toast:
    """What a change did, for the toast (and the page drawn after a form without scripts)."""

    ok: bool
    title: str
    lines: tuple[str, ...] = ()
    undo: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The toast as the page's script reads it."""
        return {"ok": self.ok, "title": self.title, "lines": list(self.lines), "undo": self.undo}


def applied_toast(words: Words, applied: Applied, title: str = "moved") -> Toast:
    """The toast of a change the host took: what moved, and Undo."""
    if not applied.moved:
        return Toast(True, words["nothing-changed"])
    return Toast(True, words[title], applied.moved, applied.undo)


def refused_toast(words: Words, why: str) -> Toast:
    """The toast of a change that was refused, with why (nothing changed)."""
    return Toast(False, words["refused"], (why,))
