"""Recall: `websearch_to_tsquery` and the query's lexemes, a GIN match, `ts_rank_cd` ranking.

1. The query's lexemes come from the configured text search configuration (the same parser
   and dictionaries that indexed the memories). Any user text is a valid query: the text is
   only ever a bound parameter, and the lexemes are quoted into a `tsquery` here.
2. Candidates are the memories of the asked parents matching the whole
   `websearch_to_tsquery` query (through the GIN index), best `ts_rank_cd` first: the top
   `4 x limit` (at least 32). Only when they are fewer than `limit`, the candidates are those
   matching *any* lexeme, those matching the whole query first.
3. Each candidate's score is the SQLite Provider's, so relevance tiers read the same on both:
   `coverage x (0.5 + 0.5 x rank / best rank of this search)`, where coverage is the share of
   the query's lexemes the memory holds. A memory holding every term outranks one holding
   only some, whatever their ranks. Ties go to the memory matching the whole query, then the
   higher rank, then the newer memory.
"""

from __future__ import annotations

from typing import Any

from mnemon_source_spaces import SearchHit, SearchRequest, SearchResult
from psycopg import AsyncConnection, sql

from ._rows import memory_from_row

__all__ = ["MIN_CANDIDATES", "any_lexeme_query", "search_memories"]

MIN_CANDIDATES = 32


def any_lexeme_query(lexemes: list[str]) -> str:
    """A `tsquery` text matching any of `lexemes`, each quoted (no operator survives)."""
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " | ".join(quoted)


async def _candidates(
    connection: AsyncConnection[Any],
    memories: sql.Composable,
    values: dict[str, Any],
    match: str,
) -> list[Any]:
    statement = sql.SQL(
        "SELECT c.*, (SELECT count(*) FROM unnest(tsvector_to_array(c.search)) AS t(lexeme) "
        "WHERE t.lexeme = ANY(%(lexemes)s)) AS held FROM ("
        "SELECT m.parent, m.id, m.text, m.tags, m.entities, m.created_at, m.seq, m.search, "
        "m.search @@ websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS complete, "
        "ts_rank_cd(m.search, %(any)s::tsquery) AS rank "
        "FROM {memories} m WHERE m.parent = ANY(%(parents)s) AND m.search @@ {match} "
        "ORDER BY complete DESC, ts_rank_cd(m.search, {match}) DESC, m.seq DESC "
        "LIMIT %(candidates)s) c"
    ).format(memories=memories, match=sql.SQL(match))
    cursor = await connection.execute(statement, values)
    return await cursor.fetchall()


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
    candidates = max(request.limit * 4, MIN_CANDIDATES)
    values = {
        "lexemes": lexemes,
        "config": config,
        "query": request.query,
        "any": any_lexeme_query(lexemes),
        "parents": list(dict.fromkeys(request.parents)),
        "candidates": candidates,
    }
    # memories matching the whole query first: usually enough, and far fewer to rank than
    # those holding any one (often common) word
    rows = await _candidates(
        connection, memories, values, "websearch_to_tsquery(%(config)s::regconfig, %(query)s)"
    )
    if len(rows) < request.limit:
        rows = await _candidates(connection, memories, values, "%(any)s::tsquery")
    best = max((float(row[9]) for row in rows), default=0.0)
    ranked = []
    for row in rows:
        memory = memory_from_row(row)
        if memory is None:
            continue
        rank = float(row[9])
        coverage = min(int(row[10]) / len(lexemes), 1.0)
        relative = min(rank / best, 1.0) if best > 0 else 1.0
        score = round(coverage * (0.5 + 0.5 * relative), 4)
        ranked.append((score, bool(row[8]), rank, int(row[6]), memory))
    ranked.sort(key=lambda item: item[:4], reverse=True)
    return SearchResult(
        hits=tuple(
            SearchHit(memory=memory, score=score) for score, *_, memory in ranked[: request.limit]
        )
    )
