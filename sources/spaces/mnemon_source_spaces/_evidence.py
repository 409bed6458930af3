"""Evidence for the model: relevance tiers, excerpts that fit the ceilings, the directory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from mnemon.sdk import EvidenceItem

from ._calls import ProviderCalls
from ._config import SpacesSettings
from ._grants import PinnedSpace
from ._provider import EntityIndexRequest, EntityIndexResult
from ._text import excerpt

__all__ = [
    "MIN_EXCERPT",
    "RELATED_SCORE",
    "STRONG_SCORE",
    "directory_item",
    "fit_texts",
    "read_directory",
    "tier",
]

#: a Provider score (in [0, 1]) at or above this is `strong`
STRONG_SCORE = 0.7
#: at or above this (and below strong) is `related`; anything lower is `weak`
RELATED_SCORE = 0.4
#: a text is excerpted only when at least this many characters are left for it
MIN_EXCERPT = 40
#: how many of a space's most mentioned entities the directory shows
DIRECTORY_ENTITIES = 5


def tier(score: float) -> str:
    """The relevance tier of a Provider score: strong, related or weak."""
    if score >= STRONG_SCORE:
        return "strong"
    if score >= RELATED_SCORE:
        return "related"
    return "weak"


def fit_texts(
    texts: Sequence[str], terms: Sequence[str], budget: int, item_limit: int
) -> list[str | None]:
    """Fit texts into `budget` characters: whole when they fit, else excerpts, else None.

    Shares are filled shortest first (a short memory is never cut to give a long one room),
    and no share is longer than `item_limit`, the route's per-item ceiling; a text whose
    share is below `MIN_EXCERPT` is left out (None) rather than mangled.
    """
    count = len(texts)
    shares = [0] * count
    remaining = budget
    for done, index in enumerate(sorted(range(count), key=lambda i: len(texts[i]))):
        share = min(len(texts[index]), remaining // (count - done), item_limit)
        shares[index] = share
        remaining -= share
    fitted: list[str | None] = []
    for text, share in zip(texts, shares, strict=True):
        if len(text) <= share:
            fitted.append(text)
        elif share >= MIN_EXCERPT:
            fitted.append(excerpt(text, terms, share))
        else:
            fitted.append(None)
    return fitted


def directory_item(directory: dict[str, Any], budget: int) -> EvidenceItem | None:
    """The directory as one JSON item within `budget`, dropping detail until it fits."""
    spaces = directory["spaces"]
    for detail in ("full", "no-entities", "bare"):
        if detail == "no-entities":
            spaces = [{k: v for k, v in space.items() if k != "entities"} for space in spaces]
        elif detail == "bare":
            spaces = [{k: v for k, v in space.items() if k != "description"} for space in spaces]
        text = orjson.dumps({**directory, "spaces": spaces}).decode()
        if len(text) <= budget:
            return EvidenceItem(id="directory", text=text, provenance={"kind": "directory"})
    return None


async def read_directory(
    calls: ProviderCalls,
    settings: SpacesSettings,
    pinned: Sequence[PinnedSpace],
    by_meaning: bool,
) -> dict[str, Any]:
    """The directory of the visible spaces and the Provider's health, as plain JSON.

    It names spaces, never their parents, and says how recall matches a query: by its words
    and, when `by_meaning`, by its meaning. A failing `status()` shows as health, not as an
    error.

    Raises:
        SourceError: the entity index failed.
    """
    status = await calls.status(pinned, count=True)
    counts = {item.parent: item.memories for item in status.namespaces}
    live = calls.live(status)
    spaces = []
    for space in pinned:
        configured = settings.space(space.name)
        entry: dict[str, Any] = {
            "name": space.name,
            "writable": space.writable,
            "memories": counts.get(space.parent),
        }
        if configured is not None and configured.description:
            entry["description"] = configured.description
        if "entity_index" in live:
            index = await calls.call(
                "entity_index",
                EntityIndexRequest(parent=space.parent, limit=DIRECTORY_ENTITIES),
                EntityIndexResult,
            )
            entry["entities"] = [
                {"name": item.name, "memories": item.memories} for item in index.entities
            ]
        spaces.append(entry)
    health: dict[str, Any] = {
        "availability": status.availability,
        "provider": calls.type_id,
        "capabilities": sorted(live),
    }
    if status.reason:
        health["reason"] = status.reason
    recall = ["words", "meaning"] if by_meaning else ["words"]
    return {"health": health, "recall": recall, "spaces": spaces}
