"""Recall: `websearch_to_tsquery` and the query's lexemes, a GIN match, `ts_rank_cd` ranking.

The work is bounded however common the query's words are, as on SQLite:

1. The query's lexemes come from the configured text search configuration (the same parser
   and dictionaries that indexed the memories). Any user text is a valid query: the text is
   only ever a bound parameter, and the lexemes are quoted into a `tsquery` here.
2. One statement gathers the candidates. *Whole matches*: the memories of the asked parents
   matching the whole `websearch_to_tsquery` query (through the GIN index), best `ts_rank_cd`
   first, the top `4 x limit` (at least 32); this is the query an operator would write, and
   it costs what it costs them. *Partial matches*: for each lexeme (the first
   `MAX_LEXEMES`) and each parent, the newest `WINDOW` memories holding it. Each of those is
   a small query of its own, so the planner picks per lexeme the GIN index (a rare word) or
   a walk down the `(parent, seq)` index that stops at the window (a common word): a word in
   half the memories never makes a recall rank half the store. The tsqueries are computed
   once per statement, never per row.
3. Each candidate's score is the SQLite Provider's, so relevance tiers read the same on both:
   `coverage x (0.5 + 0.5 x rank / best rank of this search)`, where coverage is the share of
   the query's lexemes the memory holds. A memory holding every term outranks one holding
   only some, whatever their ranks. Ties go to the memory matching the whole query, then the
   higher rank, then the newer memory. When the whole matches alone fill `limit`, partial
   matches are left out.
"""

from __future__ import annotations

from typing import Any

from mnemon_source_spaces import SearchHit, SearchRequest, SearchResult
from psycopg import AsyncConnection, sql

from ._rows import memory_from_row

__all__ = ["MAX_LEXEMES", "MIN_CANDIDATES", "WINDOW", "any_lexeme_query", "search_memories"]

MIN_CANDIDATES = 32
#: partial matches gathered per lexeme and parent: the newest ones
WINDOW = 16
#: lexemes of one query that gather partial matches (all of them count in coverage)
MAX_LEXEMES = 8


def any_lexeme_query(lexemes: list[str]) -> str:
    """A `tsquery` text matching any of `lexemes`, each quoted (no operator survives)."""
    return " | ".join(_quoted(lexeme) for lexeme in lexemes)


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _statement(memories: sql.Composable, parents: int, lexemes: int) -> sql.Composed:
    partial = [
        sql.SQL(
            "(SELECT p.parent, p.seq FROM {memories} p WHERE p.parent = %(parent_{i})s "
            "AND p.search @@ %(lexeme_{j})s::tsquery ORDER BY p.seq DESC LIMIT %(window)s)"
        ).format(memories=memories, i=sql.SQL(str(i)), j=sql.SQL(str(j)))
        for i in range(parents)
        for j in range(lexemes)
    ]
    return sql.SQL(
        "WITH whole AS MATERIALIZED (SELECT w.parent, w.seq FROM {memories} w, "
        "websearch_to_tsquery(%(config)s::regconfig, %(query)s) q "
        "WHERE w.parent = ANY(%(parents)s) AND w.search @@ q "
        "ORDER BY ts_rank_cd(w.search, q) DESC, w.seq DESC LIMIT %(candidates)s), "
        "found AS (SELECT parent, seq FROM whole UNION {partial}) "
        "SELECT m.parent, m.id, m.text, m.tags, m.entities, m.created_at, m.seq, "
        "m.search @@ q.whole AS complete, ts_rank_cd(m.search, q.any) AS rank, "
        "(SELECT count(*) FROM unnest(tsvector_to_array(m.search)) AS t(lexeme) "
        "WHERE t.lexeme = ANY(%(lexemes)s)) AS held "
        "FROM found f JOIN {memories} m ON m.parent = f.parent AND m.seq = f.seq, "
        "(SELECT websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS whole, "
        "%(any)s::tsquery AS any) q"
    ).format(
        memories=memories,
        partial=sql.SQL(" UNION ").join(partial),
    )


async def search_memories(
    connection: AsyncConnection[Any],
    memories: sql.Composable,
    config: str,
    request: SearchRequest,
) -> SearchResult:
    """Run one recall (see the module docstring); bounded by `statement_timeout`."""
    cursor = await connection.execute(
        "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", (config, request.query)
    )
    row = await cursor.fetchone()
    lexemes: list[str] = list(row[0]) if row is not None and row[0] else []
    if not lexemes:
        return SearchResult()
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
    cursor = await connection.execute(_statement(memories, len(parents), len(gathering)), values)
    rows = await cursor.fetchall()
    complete = [row for row in rows if row[7]]
    if len(complete) >= request.limit:
        rows = complete
    best = max((float(row[8]) for row in rows), default=0.0)
    ranked = []
    for row in rows:
        memory = memory_from_row(row)
        if memory is None:
            continue
        rank = float(row[8])
        coverage = min(int(row[9]) / len(lexemes), 1.0)
        relative = min(rank / best, 1.0) if best > 0 else 1.0
        score = round(coverage * (0.5 + 0.5 * relative), 4)
        ranked.append((score, bool(row[7]), rank, int(row[6]), memory))
    ranked.sort(key=lambda item: item[:4], reverse=True)
    return SearchResult(
        hits=tuple(
            SearchHit(memory=memory, score=score) for score, *_, memory in ranked[: request.limit]
        )
    )
