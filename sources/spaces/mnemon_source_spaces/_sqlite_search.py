"""Recall over the SQLite store: FTS5 finds candidates, BM25 ranks them, bounded work.

FTS5's `bm25()` counts every posting of each query term once per query, so a common term
would make every search cost time in proportion to the store. Recall avoids that:

1. Terms are split by their exact document frequency in the whole store (`terms`, slot 0):
   *selective* terms are in fewer than `SELECTIVE` memories; the others are *common*.
2. With selective terms, FTS5 matches their OR within each parent's rowid range and orders
   by `bm25()`: the top `4 x limit` (at least 32) are candidates. Only selective postings
   are counted, so the cost is bounded by `SELECTIVE` per term, not by the store's size.
   When there are common terms too, the newest `WINDOW` memories holding a selective term
   and every common term join the candidates (no `bm25()`, so no full posting count).
3. When every term is common, or the candidates are still fewer than `limit`, the newest
   `WINDOW` memories containing all common terms (then any of them) are added.
4. Every candidate is scored from the term counts stored with it at write time (only its
   rowid, length and counts are read for this; stop words are not stored, so a query of
   nothing but stop words counts them from the candidate's text), with BM25 (k1 1.2, b 0.75, IDF
   `ln(1 + (N - n + 0.5) / (n + 0.5))`) over all query terms, using its own parent's
   statistics (documents, average length, document frequencies), so scores in one parent
   never depend on another parent's data. Tags count half a word and entities three
   quarters. Ties go to the newer memory.
5. The reported `score` is `coverage x (0.5 + 0.5 x bm25 / best bm25 of this search)`.
   Coverage is the IDF-weighted share of the query terms occurring in the memory's parent
   that the memory contains (terms the parent never mentions cannot tell memories apart):
   1.0 for the best-scoring memory holding every such term. Hits are ordered by this score,
   then by BM25, then newest first, so a memory holding every term outranks a shorter one
   holding only the rarest.
6. Only the memories returned are read in full and validated.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._provider import Memory, SearchHit, SearchRequest, SearchResult
from ._sqlite_layout import (
    COUNTER_SPAN,
    STORE_SLOT,
    document_terms,
    packed_counts,
    packed_needles,
    slot_range,
    term_counts,
    term_needles,
)
from ._sqlite_rows import MEMORY_COLUMNS, json_list, memory_from_row
from ._text import STOPWORDS, bm25_term, fts_phrase, inverse_document_frequency, query_terms

__all__ = ["SELECTIVE", "WINDOW", "search_store"]

SELECTIVE = 1_000
WINDOW = 64
MIN_CANDIDATES = 32

# a candidate is its rowid, length and stored counts: its text is read only if it is returned
_FTS_FROM = (
    "SELECT m.seq, m.tokens, m.terms FROM memories_fts JOIN memories m "
    "ON m.seq = memories_fts.rowid "
    "WHERE memories_fts MATCH ? AND memories_fts.rowid BETWEEN ? AND ? "
)
_BY_BM25 = _FTS_FROM + "ORDER BY bm25(memories_fts, 1.0, 0.5, 0.75) LIMIT ?"
_NEWEST = _FTS_FROM + "ORDER BY memories_fts.rowid DESC LIMIT ?"


@dataclass(frozen=True, slots=True)
class _Namespace:
    slot: int
    documents: int
    tokens: int


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


def _expression(terms: Sequence[str], operator: str) -> str:
    return f" {operator} ".join(fts_phrase(term) for term in terms)


def _frequencies(connection: sqlite3.Connection, slot: int, terms: Sequence[str]) -> dict[str, int]:
    marks = _placeholders(len(terms))
    rows = connection.execute(
        f"SELECT term, documents FROM terms WHERE slot = ? AND term IN ({marks})",
        (slot, *terms),
    ).fetchall()
    return {term: int(documents) for term, documents in rows}


def _namespaces(connection: sqlite3.Connection, parents: Iterable[str]) -> list[_Namespace]:
    wanted = list(dict.fromkeys(parents))
    rows = connection.execute(
        "SELECT slot, documents, tokens FROM namespaces "
        f"WHERE parent IN ({_placeholders(len(wanted))}) ORDER BY slot",
        wanted,
    ).fetchall()
    return [_Namespace(int(slot), int(documents), int(tokens)) for slot, documents, tokens in rows]


def _candidates(
    connection: sqlite3.Connection,
    namespace: _Namespace,
    present: Sequence[str],
    selective: Sequence[str],
    limit: int,
) -> list[Any]:
    low, high = slot_range(namespace.slot)
    rows: list[Any] = []
    seen: set[int] = set()

    def add(statement: str, expression: str, count: int) -> None:
        for row in connection.execute(statement, (expression, low, high, count)):
            if row[0] not in seen:
                seen.add(row[0])
                rows.append(row)

    common = [term for term in present if term not in selective]
    if selective:
        add(_BY_BM25, _expression(selective, "OR"), max(limit * 4, MIN_CANDIDATES))
        if common:
            # bm25() above ranks by the selective terms alone; memories that also hold every
            # common term are the likeliest answers, so the newest of them join as candidates
            either = f"({_expression(selective, 'OR')})"
            add(_NEWEST, f"{either} AND {_expression(common, 'AND')}", WINDOW)
    if common and len(rows) < limit:
        expressions = [_expression(common, "AND")]
        if len(common) > 1:
            expressions.append(_expression(common, "OR"))
        for expression in expressions:
            add(_NEWEST, expression, WINDOW)
            if len(rows) >= limit:
                break
    return rows


def search_store(connection: sqlite3.Connection, request: SearchRequest) -> SearchResult:
    """Run one recall (see the module docstring) on a connection outside a transaction."""
    terms = query_terms(request.query)
    if not terms:
        return SearchResult()
    namespaces = [ns for ns in _namespaces(connection, request.parents) if ns.documents > 0]
    if not namespaces:
        return SearchResult()
    # the store-wide rows hold each term's document frequency and its number
    rows = connection.execute(
        "SELECT term, documents, number FROM terms WHERE slot = ? "
        f"AND term IN ({_placeholders(len(terms))})",
        (STORE_SLOT, *terms),
    ).fetchall()
    in_store = {term: int(documents) for term, documents, _ in rows}
    numbers = {term: int(number) for term, _, number in rows if number is not None}
    present = [term for term in terms if in_store.get(term, 0) > 0]
    if not present:
        return SearchResult()
    selective = [term for term in present if in_store[term] < SELECTIVE]
    needles = term_needles(present)
    numbered = packed_needles(numbers, present)
    # packed counts leave stop words out: a query that needs them counts them from the text
    packed_complete = not any(term in STOPWORDS for term in present)
    scored: list[tuple[float, float, int, int]] = []
    for namespace in namespaces:
        rows = _candidates(connection, namespace, present, selective, request.limit)
        if not rows:
            continue
        frequencies = _frequencies(connection, namespace.slot, present)
        average = namespace.tokens / namespace.documents
        idf = {
            term: inverse_document_frequency(namespace.documents, frequencies.get(term, 0))
            for term in present
        }
        known = [term for term in present if frequencies.get(term, 0) > 0]
        weight = sum(idf[term] for term in known)
        # per term: its IDF, and that IDF again when the parent holds the term (coverage)
        weights = [(term, idf[term], idf[term] if term in known else 0.0) for term in present]
        for seq, length, encoded in rows:
            if isinstance(encoded, bytes) and packed_complete:
                counts = packed_counts(encoded, numbered)
            elif isinstance(encoded, str):  # counts that did not fit the packed layout
                counts = term_counts(encoded, needles)
            else:  # stop words asked for, or a row written without counts
                counts = _counted(connection, seq)
            # the sums of `bm25_term` and of the held terms' IDF, in the query's term order:
            # a term the memory lacks adds exactly 0, so it is skipped without changing a bit
            score: float = 0
            held: float = 0
            for term, term_idf, known_idf in weights:
                frequency = counts.get(term, 0.0)
                if frequency > 0:
                    score += bm25_term(frequency, int(length), average, term_idf)
                    held += known_idf
            coverage = held / weight if weight > 0 else 0.0
            # the newer memory first on equal scores: a higher in-parent position is newer
            scored.append((score, coverage, seq % COUNTER_SPAN, seq))
    best = max((item[0] for item in scored), default=0.0)
    ranked = []
    for bm25, coverage, newness, seq in scored:
        relative = min(bm25 / best, 1.0) if best > 0 else 1.0
        ranked.append((round(coverage * (0.5 + 0.5 * relative), 4), bm25, newness, seq))
    ranked.sort(reverse=True)
    hits: list[SearchHit] = []
    start = 0
    # malformed rows are skipped: read the next few ranked until `limit` memories are found
    while len(hits) < request.limit and start < len(ranked):
        chunk = ranked[start : start + request.limit - len(hits)]
        start += len(chunk)
        memories = _memories(connection, [seq for _, _, _, seq in chunk])
        for score, _, _, seq in chunk:
            memory = memories.get(seq)
            if memory is not None:
                hits.append(SearchHit.model_construct(memory=memory, score=score))
    return SearchResult(hits=tuple(hits))


def _memories(connection: sqlite3.Connection, seqs: Sequence[int]) -> dict[int, Memory]:
    rows = connection.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.seq IN ({_placeholders(len(seqs))})",
        seqs,
    ).fetchall()
    found = {}
    for row in rows:
        memory = memory_from_row(row)
        if memory is not None:
            found[int(row[0])] = memory
    return found


def _counted(connection: sqlite3.Connection, seq: int) -> dict[str, float]:
    row = connection.execute(
        "SELECT text, tags, entities FROM memories WHERE seq = ?", (seq,)
    ).fetchone()
    if row is None or not isinstance(row[0], str):
        return {}
    return document_terms(row[0], json_list(row[1]), json_list(row[2]))
