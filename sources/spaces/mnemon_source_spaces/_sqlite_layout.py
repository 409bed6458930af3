"""The SQLite store's rowid layout and term counts: what its schema and its rows both build on.

One parent's memories are one rowid range: `seq = slot * 2**40 + counter`, where `slot`
numbers the parent and `counter` counts its writes, so within a parent a higher rowid is a
newer memory and new rows are always appended: FTS5 buffers a transaction's postings only
while rowids ascend, and b-tree pages stay full. `terms` keeps exact document frequencies
per parent (slot) and for the whole store (slot 0): FTS5's `bm25()` reads a term's whole
posting list, so recall needs the store-wide count to know what a term costs.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping

from ._text import words

__all__ = [
    "COUNTER_SPAN",
    "DIGEST_BYTES",
    "IN_SLOT",
    "MAX_SLOT",
    "STORE_SLOT",
    "document_terms",
    "encode_terms",
    "idempotency_digest",
    "record_term_counts",
    "record_terms",
    "slot_range",
    "term_counts",
    "term_needles",
]

COUNTER_SPAN = 1 << 40
DIGEST_BYTES = 16
MAX_SLOT = (1 << 22) - 1
STORE_SLOT = 0  # the row of `namespaces` and `terms` that counts the whole store
# a memory's slot from its rowid, as the id and idempotency indexes key it (schema 6): the
# expression must be written exactly so for SQLite to use them; `?` is the slot
IN_SLOT = f"(m.seq >> {COUNTER_SPAN.bit_length() - 1}) = ?"
TAG_WEIGHT = 0.5
ENTITY_WEIGHT = 0.75


def slot_range(slot: int) -> tuple[int, int]:
    """The inclusive rowid range of one parent's memories."""
    return slot * COUNTER_SPAN, slot * COUNTER_SPAN + COUNTER_SPAN - 1


def idempotency_digest(key: str) -> bytes:
    """What the store keeps of an idempotency key: the first 16 bytes of its SHA-256.

    Fixed-size and opaque; 128 bits keep two keys of one parent apart (a collision is
    expected after about 2**64 keys).
    """
    return hashlib.sha256(key.encode("utf-8")).digest()[:DIGEST_BYTES]


def document_terms(text: str, tags: Iterable[str], entities: Iterable[str]) -> dict[str, float]:
    """Weighted term frequencies of one memory (text 1, tags 0.5, entities 0.75)."""
    counts: dict[str, float] = dict(Counter(words(text)))  # counted in C: the text is the bulk
    for weight, parts in ((TAG_WEIGHT, tags), (ENTITY_WEIGHT, entities)):
        for part in parts:
            for term in words(part):
                counts[term] = counts.get(term, 0.0) + weight
    return counts


def encode_terms(counts: dict[str, float]) -> str:
    """A memory's weighted term counts as stored: `term` for a count of 1, else `term:<count>`.

    Terms are runs of letters and digits (see `words`), so neither a space nor `:` is in one.
    """
    return " ".join(term if count == 1.0 else f"{term}:{count:g}" for term, count in counts.items())


def term_needles(terms: Iterable[str]) -> list[tuple[str, str, str]]:
    """What `term_counts` looks for, built once per query: (term, ` term `, ` term:`)."""
    return [(term, f" {term} ", f" {term}:") for term in terms]


def term_counts(encoded: str, needles: Iterable[tuple[str, str, str]]) -> dict[str, float]:
    """The counts of the needles' terms in one stored `encode_terms` string (absent terms: 0)."""
    padded = f" {encoded} "
    counts: dict[str, float] = {}
    for term, alone, weighted in needles:
        if alone in padded:
            counts[term] = 1.0
            continue
        at = padded.find(weighted)
        if at >= 0:
            start = at + len(weighted)
            counts[term] = float(padded[start : padded.index(" ", start)])
    return counts


def record_term_counts(
    connection: sqlite3.Connection, slot: int, documents: Mapping[str, int]
) -> None:
    """Add each term's number of new documents in `slot` to its counts there and in the store."""
    if not documents:
        return
    # one statement for the whole batch, in key order (the store's row, then the slot's):
    # thousands of upserts cost a third of what as many executemany() rows do, and
    # neighbouring upserts land on the same b-tree pages
    connection.execute(
        "INSERT INTO terms (slot, term, documents) "
        "SELECT slots.value, counts.key, counts.value "
        "FROM json_each(?) AS slots, json_each(?) AS counts WHERE true "
        "ON CONFLICT (slot, term) DO UPDATE SET documents = documents + excluded.documents",
        (
            json.dumps(sorted({STORE_SLOT, slot})),
            json.dumps(dict(sorted(documents.items())), ensure_ascii=False),
        ),
    )


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
