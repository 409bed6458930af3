"""Recall: `websearch_to_tsquery` and the query's lexemes, a GIN match, `ts_rank_cd` ranking.

The work is bounded however common the query's words are, as on SQLite:

1. The query's lexemes are those of the configured text search configuration (the same
   parser and dictionaries that indexed the memories). For plain text under `simple` they
   are told in Python (`_words`), and the statement checks them against the server's own
   (a wrong guess skips every scan and is searched again with the server's lexemes), so a
   recall is one round trip, as the operator's own query is; otherwise the server is asked
   first. Any user text is a valid query: the text is only ever a bound parameter, and the
   lexemes are quoted into a `tsquery` here.
2. One statement gathers the candidates. *Whole matches*: the memories of the asked parents
   matching the whole `websearch_to_tsquery` query, best `ts_rank_cd` first, the top
   `4 x limit` (at least 32); this is the query an operator would write, and it costs what
   it costs them: when every word is common, the planner is left to read the partition as
   it would for them; with a rare word, through that word's short GIN posting list. *Partial
   matches*: for each lexeme (the first `MAX_LEXEMES`) and each parent, the newest `WINDOW`
   memories holding it. Each of those is a small query of its own, so the planner picks per
   lexeme the GIN index (a rare word) or a walk down the `(parent, seq)` index that stops at
   the window (a common word): a word in half the memories never makes a recall rank half
   the store. The tsqueries are computed once per statement, never per row, and a
   statement is composed once per shape (`RecallStatements`).
3. Each candidate's score is the SQLite Provider's, so relevance tiers read the same on both:
   `coverage x (0.5 + 0.5 x rank / best rank of this search)`, where coverage is the share of
   the query's lexemes the memory holds. A memory holding every term outranks one holding
   only some, whatever their ranks. Ties go to the memory matching the whole query, then the
   higher rank, then the newer memory. When the whole matches alone fill `limit`, partial
   matches are left out. Only the rows returned are made into memories.
"""

from __future__ import annotations

import math
import time
from typing import Any

from mnemon_source_spaces import SearchHit, SearchRequest, SearchResult
from psycopg import AsyncConnection, sql

from ._rows import memory_from_row
from ._words import predicted_lexemes

__all__ = [
    "MAX_LEXEMES",
    "MIN_CANDIDATES",
    "WINDOW",
    "RecallStatements",
    "WordFrequencies",
    "any_lexeme_query",
    "search_memories",
]

MIN_CANDIDATES = 32
#: partial matches gathered per lexeme and parent: the newest ones
WINDOW = 16
#: lexemes of one query that gather partial matches (all of them count in coverage)
MAX_LEXEMES = 8
_STATISTICS_SECONDS = 60.0
#: statement shapes kept per table
_SHAPES = 1024


def any_lexeme_query(lexemes: list[str]) -> str:
    """A `tsquery` text matching any of `lexemes`, each quoted (no operator survives)."""
    return " | ".join(_quoted(lexeme) for lexeme in lexemes)


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


class WordFrequencies:
    """How common each word is in the store, from the planner's own statistics (cached).

    `pg_stats` keeps the most common lexemes of the `search` column and their frequencies
    (as ANALYZE, or autovacuum, last saw them); a word not among them is rarer than the
    least common one listed. They are read at most once a minute per Provider.
    """

    def __init__(self, schema: str) -> None:
        self._schema = schema
        self._read_at = -math.inf
        self._frequencies: dict[str, float] = {}
        self._rarest = 0.0
        self._rows = 0.0

    async def walk(self, connection: AsyncConnection[Any], lexemes: list[str]) -> list[bool]:
        """For each lexeme, whether to walk the partition's newest memories to find it.

        Walking suits a common word (a few rows hold it); the GIN index suits a rare one.
        """
        if time.monotonic() - self._read_at >= _STATISTICS_SECONDS:
            await self._read(connection)
        walks = []
        for lexeme in lexemes:
            frequency = self._frequencies.get(lexeme, self._rarest)
            # walking reads about WINDOW / frequency rows; the index, frequency x rows
            walks.append(frequency > 0 and WINDOW / frequency < frequency * self._rows)
        return walks

    async def _read(self, connection: AsyncConnection[Any]) -> None:
        self._read_at = time.monotonic()
        cursor = await connection.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
            "FROM pg_catalog.pg_stats s JOIN pg_catalog.pg_namespace n "
            "ON n.nspname = s.schemaname JOIN pg_catalog.pg_class c "
            "ON c.relnamespace = n.oid AND c.relname = s.tablename "
            "WHERE s.schemaname = %s AND s.tablename = 'memories' AND s.attname = 'search'",
            (self._schema,),
        )
        row = await cursor.fetchone()
        if row is None or not row[0] or not row[1]:
            self._frequencies, self._rarest, self._rows = {}, 0.0, 0.0
            return
        words, frequencies = list(row[0]), [float(value) for value in row[1]]
        self._frequencies = dict(zip(words, frequencies, strict=False))
        # after each word's frequency come the least and the greatest of them
        self._rarest = frequencies[len(words)] if len(frequencies) > len(words) else 0.0
        self._rows = max(float(row[2] or 0.0), 0.0)


def _statement(memories: sql.Composable, parents: int, walks: list[bool]) -> sql.Composed:
    # the whole query of common words only is planned freely, as an operator's query would
    # be (the planner reads the partition through its index and ranks what matches there);
    # with a rare word, its GIN posting list is the short way, so the partition is hidden
    partition = sql.SQL("w.parent" if all(walks) else "w.parent || ''")
    # the forms fix the plan: `(... @@ ...) IS TRUE` cannot use the GIN index, so a common
    # word walks the (parent, seq) index newest first and stops at the window; a parent
    # compared as `parent || ''` cannot use a btree, so a rare word's GIN matches are
    # filtered by partition rather than intersected with a bitmap of the whole partition
    walk = sql.SQL(
        "(SELECT p.parent, p.seq FROM {memories} p WHERE p.parent = %(parent_{i})s "
        "AND (p.search @@ %(lexeme_{j})s::tsquery) IS TRUE AND {guessed} "
        "ORDER BY p.seq DESC LIMIT %(window)s)"
    )
    index = sql.SQL(
        "(SELECT p.parent, p.seq FROM {memories} p WHERE p.parent || '' = %(parent_{i})s "
        "AND p.search @@ %(lexeme_{j})s::tsquery AND {guessed} "
        "ORDER BY p.seq DESC LIMIT %(window)s)"
    )
    # the lexemes the statement was built from must be the server's own: checked once (an
    # init plan), and every scan is skipped when they are not, since the results would be
    # thrown away
    guessed = sql.SQL("(SELECT lexemes FROM words) = %(lexemes)s::text[]")
    partial = [
        (walk if walked else index).format(
            memories=memories, i=sql.SQL(str(i)), j=sql.SQL(str(j)), guessed=guessed
        )
        for i in range(parents)
        for j, walked in enumerate(walks)
    ]
    return sql.SQL(
        "WITH words AS MATERIALIZED (SELECT "
        "tsvector_to_array(to_tsvector(%(config)s::regconfig, %(query)s)) AS lexemes), "
        "whole AS MATERIALIZED (SELECT w.parent, w.seq FROM {memories} w, "
        "websearch_to_tsquery(%(config)s::regconfig, %(query)s) q "
        "WHERE {partition} = ANY(%(parents)s) AND w.search @@ q AND {guessed} "
        "ORDER BY ts_rank_cd(w.search, q) DESC, w.seq DESC LIMIT %(candidates)s), "
        "found AS (SELECT parent, seq FROM whole UNION {partial}) "
        "SELECT words.lexemes, r.* FROM words LEFT JOIN ("
        "SELECT m.parent, m.id, m.text, m.tags, m.entities, m.created_at, m.seq, "
        "m.search @@ q.whole AS complete, ts_rank_cd(m.search, q.any) AS rank, "
        # the query's lexemes a memory holds: what deleting them takes away (no subquery)
        "length(m.search) - length(ts_delete(m.search, %(lexemes)s::text[])) AS held "
        "FROM found f JOIN {memories} m ON m.parent = f.parent AND m.seq = f.seq, "
        "(SELECT websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS whole, "
        "%(any)s::tsquery AS any) q) r ON true"
    ).format(
        memories=memories,
        partition=partition,
        guessed=guessed,
        partial=sql.SQL(" UNION ").join(partial),
    )


class RecallStatements:
    """The recall statements of one table, composed once per shape and kept as bytes.

    A shape is the number of parents and, per gathered lexeme, walk or index: at most a few
    hundred of them, so composing and encoding a statement is not repeated on every recall.
    """

    def __init__(self, memories: sql.Composable) -> None:
        self._memories = memories
        self._texts: dict[tuple[int, tuple[bool, ...]], bytes] = {}

    def text(self, connection: AsyncConnection[Any], parents: int, walks: list[bool]) -> bytes:
        """The statement for `parents` parents and these `walks` (see `_statement`)."""
        shape = (parents, tuple(walks))
        text = self._texts.get(shape)
        if text is None:
            if len(self._texts) >= _SHAPES:
                self._texts.clear()  # many parents at once is rare: start again
            text = self._texts[shape] = _statement(self._memories, parents, walks).as_bytes(
                connection
            )
        return text


async def _server_lexemes(connection: AsyncConnection[Any], config: str, query: str) -> list[str]:
    cursor = await connection.execute(
        "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", (config, query)
    )
    row = await cursor.fetchone()
    return list(row[0]) if row is not None and row[0] else []


async def _candidates(
    connection: AsyncConnection[Any],
    statements: RecallStatements,
    config: str,
    request: SearchRequest,
    lexemes: list[str],
    frequencies: WordFrequencies,
) -> tuple[list[Any], list[str]]:
    """The candidate rows for `lexemes`, and the query's lexemes as the server found them.

    When the two lists of lexemes differ, the rows are empty: the statement skipped its scans.
    """
    parents = list(dict.fromkeys(request.parents))
    gathering = lexemes[:MAX_LEXEMES]
    values: dict[str, Any] = {
        "lexemes": lexemes,
        "config": config,
        "query": request.query,
        "any": any_lexeme_query(lexemes),
        "parents": parents,
        "candidates": max(request.limit * 4, MIN_CANDIDATES),
        "window": WINDOW,
    }
    values.update({f"parent_{i}": parent for i, parent in enumerate(parents)})
    values.update({f"lexeme_{j}": _quoted(lexeme) for j, lexeme in enumerate(gathering)})
    # never a prepared statement: a generic plan would pick one way to find every word's
    # newest memories, and walking a partition for a rare word reads all of it
    walks = await frequencies.walk(connection, gathering)
    cursor = await connection.execute(
        statements.text(connection, len(parents), walks), values, prepare=False
    )
    rows = await cursor.fetchall()
    # the words row comes back even when nothing matched (a left join): its first column
    found = list(rows[0][0]) if rows and rows[0][0] else []
    return [row[1:] for row in rows if row[1] is not None], found


async def search_memories(
    connection: AsyncConnection[Any],
    statements: RecallStatements,
    config: str,
    request: SearchRequest,
    frequencies: WordFrequencies,
) -> SearchResult:
    """Run one recall (see the module docstring); bounded by `statement_timeout`.

    One statement when the query's lexemes can be told without the server (see `_words`),
    which the statement checks; two when they cannot or the guess was wrong.
    """
    lexemes = predicted_lexemes(request.query, config)
    if lexemes is None:
        lexemes = await _server_lexemes(connection, config, request.query)
    if not lexemes:
        return SearchResult()
    rows, found = await _candidates(connection, statements, config, request, lexemes, frequencies)
    if found != lexemes:
        lexemes = found
        if not lexemes:
            return SearchResult()
        rows, _ = await _candidates(connection, statements, config, request, lexemes, frequencies)
    return _ranked(rows, lexemes, request.limit)


def _ranked(rows: list[Any], lexemes: list[str], limit: int) -> SearchResult:
    complete = [row for row in rows if row[7]]
    if len(complete) >= limit:
        rows = complete
    best = max((float(row[8]) for row in rows), default=0.0)
    scored = []
    for row in rows:
        rank = float(row[8])
        coverage = min(int(row[9]) / len(lexemes), 1.0)
        relative = min(rank / best, 1.0) if best > 0 else 1.0
        score = round(coverage * (0.5 + 0.5 * relative), 4)
        scored.append((score, bool(row[7]), rank, int(row[6]), row))
    # seq is unique, so the order is total; only the rows returned become memories
    scored.sort(key=lambda item: item[:4], reverse=True)
    hits: list[SearchHit] = []
    for score, *_, row in scored:
        memory = memory_from_row(row)
        if memory is None:
            continue  # a malformed row is skipped; the next one takes its place
        hits.append(SearchHit(memory=memory, score=score))
        if len(hits) == limit:
            break
    return SearchResult(hits=tuple(hits))
