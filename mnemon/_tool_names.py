"""Tool names for a View's routes and offers: valid for model APIs, stable, one to one.

Model APIs accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`. A View's route and offer ids
(`source:spaces/recall`) do not, so each gets a name derived from it alone and the View's other
ids: equal Views give equal names, and every name maps back to exactly one route or offer.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from ._models import View

__all__ = ["MAX_TOOL_NAME", "TOOL_NAME_PATTERN", "NamedTool", "name_tools"]

TOOL_NAME_PATTERN = "^[a-zA-Z0-9_-]{1,64}$"
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SOURCE_PREFIX = "source:"


@dataclass(frozen=True, slots=True)
class NamedTool:
    """One route or offer of a View under its tool name."""

    name: str
    kind: Literal["route", "action"]
    id: str
    source_key: str
    local_id: str


def _qualifier(source_key: str) -> str:
    entry = source_key.removeprefix(_SOURCE_PREFIX)
    return _UNSAFE.sub("_", entry)


def _hashed(base: str, kind: str, view_wide_id: str, digits: int) -> str:
    # kind is part of the hash: a route and an offer of one Source may share an id
    digest = hashlib.sha256(f"{kind}:{view_wide_id}".encode()).hexdigest()[:digits]
    return f"{base[: MAX_TOOL_NAME - digits - 1]}_{digest}"


def name_tools(view: View) -> tuple[NamedTool, ...]:
    """Name every route and offer of `view`, routes first, in the View's order.

    Names are decided over every route and action the View's generation declares
    (`View.tool_ids`), not only those this View offers, so a scope that adds or drops a Source
    does not rename the others' tools. The rule, applied to all of them together:

    1. a tool is named by its Source-local id (`recall`, `remember`);
    2. when several share a local id, each is named `<entry>_<local id>`, the entry being its
       Source's instance key without `source:`, every character outside `[A-Za-z0-9_-]`
       replaced by `_` (`source:team/x` gives `team_x_recall`);
    3. a name longer than 64 characters, or still shared, keeps its first characters and ends
       with `_` and 8 hex digits of the SHA-256 of `route:<id>` or `action:<id>` (16, then
       32 digits if those collide).

    Returns:
        One `NamedTool` per route and offer; names are unique and match the model APIs' rule.
    """
    offered: list[_Entry] = [
        ("route", route.id, route.source_key, route.route_id) for route in view.routes
    ]
    offered += [("action", offer.id, offer.source_key, offer.action_id) for offer in view.offers]
    declared = [_declared(tool_id) for tool_id in view.tool_ids]
    names = _names({entry[:2]: entry for entry in (*declared, *offered)})
    return tuple(
        NamedTool(
            name=names[kind, view_wide_id],
            kind=kind,
            id=view_wide_id,
            source_key=source,
            local_id=local,
        )
        for kind, view_wide_id, source, local in offered
    )


_Entry = tuple[Literal["route", "action"], str, str, str]


def _declared(tool_id: str) -> _Entry:
    # `route:source:spaces/recall`: the kind, then the View-wide id (instance key/local id)
    kind, _, view_wide_id = tool_id.partition(":")
    source, _, local = view_wide_id.rpartition("/")
    return ("action" if kind == "action" else "route", view_wide_id, source, local)


def _names(
    entries: dict[tuple[str, str], _Entry],
) -> dict[tuple[str, str], str]:
    """The tool name of each `(kind, View-wide id)`, by the rule `name_tools` states."""
    ordered = list(entries.values())
    shared = Counter(local for _, _, _, local in ordered)
    names = [
        local if shared[local] == 1 else f"{_qualifier(source)}_{local}"
        for _, _, source, local in ordered
    ]
    bases = list(names)
    for digits in (8, 16, 32):
        counts = Counter(names)
        clashing = [
            index
            for index, name in enumerate(names)
            if len(name) > MAX_TOOL_NAME or counts[name] > 1
        ]
        if not clashing:
            break
        for index in clashing:
            kind, view_wide_id, _, _ = ordered[index]
            names[index] = _hashed(bases[index], kind, view_wide_id, digits)
    return {
        (kind, view_wide_id): name
        for (kind, view_wide_id, _, _), name in zip(ordered, names, strict=True)
    }
