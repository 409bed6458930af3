"""The SQLite store's rowid layout and term counts: what its schema and its rows both build on.

One parent's memories are one rowid range: `seq = slot * 2**40 + counter`, where `slot`
numbers the parent and `counter` counts its writes, so within a parent a higher rowid is a
newer memory and new rows are always appended: FTS5 buffers a transaction's postings only
while rowids ascend, and b-tree pages stay full. `terms` keeps exact document frequencies
per parent (slot) and for the whole store (slot 0): FTS5's `bm25()` reads a term's whole
posting list, so recall needs the store-wide count to know what a term costs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import orjson

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
    # counted in C (the text is the bulk); a Counter is a dict, so it is not copied into one
    counts = cast(dict[str, float], Counter(words(text)))
    for weight, parts in ((TAG_WEIGHT, tags), (ENTITY_WEIGHT, entities)):
        if parts:  # words never span a space: one pass over all of them
            for term in words(" ".join(parts)):
                counts[term] = counts.get(term, 0.0) + weight
    return counts


def encode_terms(counts: dict[str, float]) -> str:
    """A memory's weighted term counts as stored: `term` for a count of 1, else `term:<count>`.

    Terms are runs of letters and digits (see `words`), so neither a space nor `:` is in one.
    """
    return " ".join(term if count == 1.0 else f"{term}:{count:g}" for term, count in counts.items())


@functools.lru_cache(maxsize=1)  # a batch writes one time over and over
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
    (one byte; `document_terms` weighs by quarters only). Stop words are left out
    (`numbers` maps them to no bytes, see `record_term_counts`): a query searches for them
    only when it holds nothing else, and then recall counts them from the text. A memory
    with a term that has no number, a count above 63.75 or more than 65,535 single terms is
    kept as `encode_terms` text instead, every term included.
    """
    singles: list[bytes] = []
    weighted: list[bytes] = []
    try:
        # one pass over the counts: this runs once per memory written
        for term, count in counts.items():
            if count == 1.0:
                singles.append(numbers[term])
            elif number := numbers[term]:
                weighted.append(number + bytes((int(count * 4),)))
    except (KeyError, ValueError):  # no number, or more quarters than a byte holds
        return encode_terms(dict(counts))
    packed = b"".join(singles)
    single_count = len(packed) // NUMBER_BYTES
    if single_count > MAX_SINGLES:
        return encode_terms(dict(counts))
    return single_count.to_bytes(2, "big") + packed + b"".join(weighted)


PackedNeedle = tuple[str, bytes | None]


def packed_needles(numbers: Mapping[str, int], terms: Iterable[str]) -> list[PackedNeedle]:
    """What `packed_counts` looks for: (term, its 3-byte number, or None when it has none)."""
    return [
        (term, numbers[term].to_bytes(NUMBER_BYTES, "big"))
        if numbers.get(term, MAX_NUMBER) < MAX_NUMBER
        else (term, None)
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
    """The numbers the store gave `terms` (terms it never numbered are left out)."""
    wanted = list(terms)
    if not wanted:
        return {}
    # the terms lead (CROSS JOIN keeps that order): one seek each, not a scan of the table
    rows = connection.execute(
        "SELECT t.term, t.number FROM json_each(?) AS j CROSS JOIN terms AS t "
        "ON t.slot = ? AND t.term = j.value WHERE t.number IS NOT NULL",
        (json.dumps(wanted, ensure_ascii=False), STORE_SLOT),
    ).fetchall()
    return {term: int(number) for term, number in rows}


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


_ADD_DOCUMENTS = (
    "INSERT INTO terms (slot, term, documents) SELECT ?, key, value FROM json_each(?) "
    "WHERE true ON CONFLICT (slot, term) DO UPDATE SET documents = documents + excluded.documents"
)


def record_term_counts(
    connection: sqlite3.Connection, slot: int, documents: Mapping[str, int]
) -> dict[str, bytes]:
    """Add each term's number of new documents in `slot` and in the store; number new terms.

    Returns each term's 3-byte number for `pack_terms`, stop words mapped to no bytes. A
    term's number is on its store-wide row (slot 0), given the first time the store sees
    it and never changed: those rows are kept at 0 documents, so a packed row stays
    readable. The next number is kept in the store's own `namespaces` row (slot 0, which
    numbers no memories). Terms numbered past `MAX_NUMBER` are left out (see `pack_terms`).
    """
    numbers = dict.fromkeys(STOPWORDS, b"")
    if not documents:
        return numbers
    # one statement per slot for the whole batch, in key order: thousands of upserts cost
    # a third of what as many executemany() rows do, and neighbours share b-tree pages;
    # the store's rows hand back the numbers on the way, so no second lookup is needed
    counts = orjson.dumps(documents, option=orjson.OPT_SORT_KEYS).decode()
    if slot != STORE_SLOT:
        connection.execute(_ADD_DOCUMENTS, (slot, counts))
    rows = connection.execute(
        _ADD_DOCUMENTS + " RETURNING term, number", (STORE_SLOT, counts)
    ).fetchall()
    new = sorted(term for term, number in rows if number is None)
    if new:
        # two statements however many terms are new: the numbers are taken from the
        # store's counter, then given in term order by an upsert of rows that all exist
        # (driven by the new terms, one seek each; an UPDATE ... FROM would scan `terms`)
        (end,) = connection.execute(
            "UPDATE namespaces SET next_counter = next_counter + ? WHERE slot = ? "
            "RETURNING next_counter",
            (len(new), STORE_SLOT),
        ).fetchone()
        first = end - len(new)
        connection.execute(
            "INSERT INTO terms (slot, term, documents, number) "
            "SELECT ?3, value, 0, ?1 + key FROM json_each(?2) WHERE true "
            "ON CONFLICT (slot, term) DO UPDATE SET number = excluded.number",
            (first, orjson.dumps(new).decode(), STORE_SLOT),
        )
        rows += [(term, first + offset) for offset, term in enumerate(new)]
    for term, number in rows:
        if number is not None and number < MAX_NUMBER and term not in STOPWORDS:
            numbers[term] = number.to_bytes(NUMBER_BYTES, "big")
    return numbers


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
    if delta < 0 and slot != STORE_SLOT:
        # the store's own rows stay at 0 documents: they hold the terms' numbers
        connection.executemany(
            "DELETE FROM terms WHERE slot = ? AND term = ? AND documents <= 0",
            [(slot, term) for term in terms],
        )
