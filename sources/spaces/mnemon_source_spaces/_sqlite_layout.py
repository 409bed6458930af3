"""The SQLite store's rowid layout and term counts: what its schema and its rows both build on.

One parent's memories are one rowid range: `seq = slot * 2**40 + (2**40 - 1 - counter)`,
where `slot` numbers the parent and `counter` counts its writes, so ascending rowids within a
parent are newest first. `terms` keeps exact document frequencies per parent (slot) and for
the whole store (slot 0).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable

from ._text import words

__all__ = [
    "COUNTER_SPAN",
    "MAX_SLOT",
    "STORE_SLOT",
    "document_terms",
    "idempotency_digest",
    "record_terms",
    "slot_range",
]

COUNTER_SPAN = 1 << 40
MAX_SLOT = (1 << 22) - 1
STORE_SLOT = 0  # the row of `namespaces` and `terms` that counts the whole store
TAG_WEIGHT = 0.5
ENTITY_WEIGHT = 0.75


def slot_range(slot: int) -> tuple[int, int]:
    """The inclusive rowid range of one parent's memories."""
    return slot * COUNTER_SPAN, slot * COUNTER_SPAN + COUNTER_SPAN - 1


def idempotency_digest(key: str) -> str:
    """What the store keeps of an idempotency key: its SHA-256, fixed-size and opaque."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def document_terms(text: str, tags: Iterable[str], entities: Iterable[str]) -> dict[str, float]:
    """Weighted term frequencies of one memory (text 1, tags 0.5, entities 0.75)."""
    counts: dict[str, float] = {}
    for weight, parts in ((1.0, (text,)), (TAG_WEIGHT, tags), (ENTITY_WEIGHT, entities)):
        for part in parts:
            for term in words(part):
                counts[term] = counts.get(term, 0.0) + weight
    return counts


def record_terms(
    connection: sqlite3.Connection, slot: int, terms: Iterable[str], delta: int
) -> None:
    """Add `delta` to the document frequency of `terms` in `slot` and in the whole store."""
    rows = [(target, term, delta) for term in terms for target in (slot, STORE_SLOT)]
    connection.executemany(
        "INSERT INTO terms (slot, term, documents) VALUES (?, ?, ?) "
        "ON CONFLICT (slot, term) DO UPDATE SET documents = documents + excluded.documents",
        rows,
    )
    if delta < 0:
        connection.executemany(
            "DELETE FROM terms WHERE slot = ? AND term = ? AND documents <= 0",
            [(target, term) for target, term, _ in rows],
        )
