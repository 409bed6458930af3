"""Eager projection: whole entries as compact lines, the most important and most recent first.

Entries are chosen in priority order (importance, then most recently updated) across both
targets; an entry that does not fit the characters left is skipped whole and a later, smaller
one may still fit, as the core does with evidence. The chosen entries are then shown grouped:
user facts, then agent notes, each group in priority order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from mnemon.sdk import Fragment

from ._document import DEFAULT_IMPORTANCE, TARGETS, Document, Entry, Target

__all__ = ["CONTINUATION", "HEADINGS", "Mode", "render_fragments", "render_line"]

Mode = Literal["eager", "routed"]

HEADINGS: dict[Target, str] = {
    "user": "User facts (runtime memory):",
    "memory": "Agent notes (runtime memory):",
}


CONTINUATION = "  | "
"""What starts each further line of a multi-line entry, in place of its line break."""


def render_line(entry: Entry) -> str:
    r"""One entry as the model sees it: `- [u3] text`, with its importance when not default.

    Every further line of a multi-line entry starts with `CONTINUATION`, so each row of a
    fragment starts with a heading, `- [<handle>]` for an entry this Source rendered, or
    `  | `: text such as `\n- [u9] ...` in an entry cannot pose as another entry.
    """
    handle = entry.id
    if entry.importance != DEFAULT_IMPORTANCE:
        handle += f", importance {entry.importance}"
    # every line break Python knows (older stored text may hold \r or \x0b), not only \n
    lines = entry.text.splitlines() or [""]
    return f"- [{handle}] " + ("\n" + CONTINUATION).join(lines)


def _priority(item: tuple[Target, Entry]) -> tuple[int, float, int, int]:
    target, entry = item
    updated = datetime.fromisoformat(entry.updated_at).timestamp()
    # most important, then most recently updated, then user facts, then the newest handle
    return (-entry.importance, -updated, TARGETS.index(target), -int(entry.id[1:]))


def render_fragments(
    document: Document, agent_id: str | None, source_key: str, mode: Mode, max_characters: int
) -> tuple[Fragment, ...]:
    """The fragments of `document` within `max_characters` in total (never a cut entry).

    They show the user facts and the notes of `agent_id` (None: the scope without an agent),
    never another agent's notes.
    """
    candidates = [
        (target, entry) for target in TARGETS for entry in document.entries(target, agent_id)
    ]
    candidates.sort(key=_priority)
    chosen: dict[Target, list[str]] = {target: [] for target in TARGETS}
    used = 0
    omitted = 0
    for target, entry in candidates:
        line = render_line(entry)
        lines = chosen[target]
        # a fragment is its heading and its lines, one per row
        cost = len(line) + 1 + (0 if lines else len(HEADINGS[target]))
        if used + cost <= max_characters:
            lines.append(line)
            used += cost
        else:
            omitted += 1
    texts = ["\n".join((HEADINGS[target], *chosen[target])) for target in TARGETS if chosen[target]]
    if omitted:
        note = f"({omitted} more {'entry' if omitted == 1 else 'entries'} not shown)"
        if texts and used + 1 + len(note) <= max_characters:
            texts[-1] += "\n" + note
        elif not texts and len(note) <= max_characters:
            texts.append(note)
    return tuple(Fragment(source_key=source_key, mode=mode, text=text) for text in texts)
