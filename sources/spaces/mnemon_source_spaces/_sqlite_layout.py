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
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ._text import STOPWORDS, words

__all__ = [
    "COUNTER_SPAN",
    "DIGEST_BYTES",
    "IN_SLOT",
    "MAX_SLOT",
    "STORE_SLOT",
    "PackedNeedle",
    "created_at_text",
    "created_at_value",
    "document_terms",
    "encode_terms",
    "idempotency_digest",
    "number_terms",
    "pack_terms",
    "packed_counts",
    "packed_needles",
    "record_term_counts",
    "record_terms",
    "slot_range",
    "term_counts",
    "term_needles",
    "term_numbers",
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
NUMBER_BYTES = 3  # a term's number in a packed row: 16,777,216 terms, then rows fall back to text
MAX_NUMBER = 1 << (8 * NUMBER_BYTES)
MAX_QUARTERS = 255  # a weighted count is a whole number of quarters: tags 2, entities 3, text 4
MAX_SINGLES = (1 << 16) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# exactly what `datetime.isoformat(timespec="microseconds")` writes for a UTC time
_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


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


def created_at_value(created_at: str) -> int | str:
    """What the store keeps of a creation time: microseconds since 1970 when that is exact.

    Eight bytes instead of 32 for the times this store writes (UTC, microseconds). Any other
    text (a time kept from an older layout or written by something else) is kept as it is.
    """
    if _CREATED.fullmatch(created_at):
        moment = datetime.fromisoformat(created_at)
        value = (moment - _EPOCH) // timedelta(microseconds=1)
        if created_at_text(value) == created_at:  # only what reads back the same
            return value
    return created_at


def created_at_text(value: Any) -> Any:
    """A stored creation time as the text it was written as (see `created_at_value`)."""
    if type(value) is int:
        return (_EPOCH + timedelta(microseconds=value)).isoformat(timespec="microseconds")
    return value


def pack_terms(counts: Mapping[str, float], numbers: Mapping[str, bytes]) -> bytes | str:
    """A memory's weighted term counts, packed by term number; text when they do not fit.

    Layout: two bytes giving the number of *single* terms (count 1), then each of those as
    its 3-byte number, then each other term as its 3-byte number and its count in quarters
    (one byte). Stop words are left out: a query searches for them only when it holds
    nothing else, and then recall counts them from the text. A memory with a term that has
    no number (see `term_numbers`), a count above 63.75 or more than 65,535 single terms
    is kept as `encode_terms` text instead, every term included.
    """
    singles = []
    weighted = []
    try:
        for term, count in counts.items():
            if term in STOPWORDS:
                continue
            if count == 1.0:
                singles.append(numbers[term])
                continue
            quarters = int(count * 4)
            if quarters != count * 4 or quarters > MAX_QUARTERS:
                return encode_terms(dict(counts))
            weighted.append(numbers[term] + bytes((quarters,)))
    except KeyError:
        return encode_terms(dict(counts))
    if len(singles) > MAX_SINGLES:
        return encode_terms(dict(counts))
    return len(singles).to_bytes(2, "big") + b"".join(singles) + b"".join(weighted)


PackedNeedle = tuple[str, bytes | None]


def packed_needles(numbers: Mapping[str, int], terms: Iterable[str]) -> list[PackedNeedle]:
    """What `term_counts` looks for in packed rows: (term, its 3-byte number or None)."""
    return [
        (term, numbers[term].to_bytes(NUMBER_BYTES, "big") if term in numbers else None)
        for term in terms
    ]


def packed_counts(packed: bytes, needles: Iterable[PackedNeedle]) -> dict[str, float]:
    """The counts of the needles' terms in one `pack_terms` value (absent terms: 0)."""
    singles_end = 2 + NUMBER_BYTES * int.from_bytes(packed[:2], "big")
    counts: dict[str, float] = {}
    for term, needle in needles:
        if needle is None:
            continue
        # an entry starts at its own stride: a match across two entries is looked past
        at = packed.find(needle, 2, singles_end)
        while at >= 0 and (at - 2) % NUMBER_BYTES:
            at = packed.find(needle, at + 1, singles_end)
        if at >= 0:
            counts[term] = 1.0
            continue
        at = packed.find(needle, singles_end)
        while at >= 0 and (at - singles_end) % (NUMBER_BYTES + 1):
            at = packed.find(needle, at + 1)
        if at >= 0:
            counts[term] = packed[at + NUMBER_BYTES] / 4
    return counts


def term_numbers(connection: sqlite3.Connection, terms: Iterable[str]) -> dict[str, int]:
    """The numbers of `terms` in the store's vocabulary (terms it has none for are left out)."""
    wanted = sorted(terms)
    if not wanted:
        return {}
    rows = connection.execute(
        "SELECT term, number FROM vocabulary WHERE term IN (SELECT value FROM json_each(?))",
        (json.dumps(wanted, ensure_ascii=False),),
    ).fetchall()
    return {term: int(number) for term, number in rows}


def number_terms(connection: sqlite3.Connection, terms: Iterable[str]) -> dict[str, bytes]:
    """Each of `terms` (no stop words) with its 3-byte number, numbering new ones.

    Numbers are never reused or changed, so a packed row stays readable; the next one is
    kept in the store's own `namespaces` row (slot 0, which numbers no memories). Once
    `MAX_NUMBER` terms are numbered, new terms get none (see `pack_terms`).
    """
    wanted = [term for term in terms if term not in STOPWORDS]
    known = term_numbers(connection, wanted)
    new = sorted(term for term in wanted if term not in known)
    if new:
        first = connection.execute(
            "SELECT next_counter FROM namespaces WHERE slot = ?", (STORE_SLOT,)
        ).fetchone()[0]
        new = new[: max(0, MAX_NUMBER - first)]
        numbered = {term: first + offset for offset, term in enumerate(new)}
        connection.execute(
            "INSERT INTO vocabulary (term, number) SELECT key, value FROM json_each(?)",
            (json.dumps(numbered, ensure_ascii=False),),
        )
        connection.execute(
            "UPDATE namespaces SET next_counter = ? WHERE slot = ?", (first + len(new), STORE_SLOT)
        )
        known.update(numbered)
    return {term: number.to_bytes(NUMBER_BYTES, "big") for term, number in known.items()}


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
