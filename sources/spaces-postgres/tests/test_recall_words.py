"""Recall in one round trip: the query's words told in Python, checked by the server.

The Provider splits a plain query into words itself (the `simple` configuration's rule), so
a recall is one statement; the statement checks the guess against the server's own parser
and a wrong guess is searched again. These tests hold the guess to the server's answer and
show that the results never depend on it.
"""

from __future__ import annotations

import random

import psycopg
import pytest
from mnemon_source_spaces import RememberRequest, SearchRequest, SearchResult
from mnemon_spaces_postgres import PostgresProvider, _search
from mnemon_spaces_postgres._words import predicted_lexemes
from pg_kit import open_provider
from psycopg import sql

from mnemon_testing.postgres import PostgresServer

WORDS = [
    "tea", "green", "coffee", "Ada", "prefers", "morning", "billing", "report", "quarter",
    "invoice", "meeting", "Lovelace", "engine", "notes", "garden", "rain", "x1", "2026",
]  # fmt: skip
QUERIES = [
    "green tea",
    "Ada prefers green tea?",
    "What does ADA prefer in the morning!",
    "tea or coffee",
    "-coffee tea",
    '"green tea" morning',
    "billing, report; quarter: invoice",
    "well-known engine",
    "notes.txt garden",
    "rain (garden) [notes] {x1}",
    "2026 x1",
    "it's Ada's tea",
    "tea tea tea",
    "nothing matches this",
    "?!",
]


def _text(rng: random.Random) -> str:
    # the first words are common, the last rare, as words are in memories
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 9)))


async def _remember_corpus(adapter: PostgresProvider, dsn: str, schema: str) -> None:
    rng = random.Random(16)
    for index in range(240):
        parent = "p" if index % 4 else "q"
        await adapter.remember(RememberRequest(parent=parent, text=_text(rng)))
    with psycopg.connect(dsn, autocommit=True) as connection:
        # the planner's word statistics, from which recall picks how to find each word
        connection.execute(sql.SQL("ANALYZE {}.memories").format(sql.Identifier(schema)))


def _hits(result: SearchResult) -> list[tuple[str, str, float]]:
    return [(hit.memory.parent, hit.memory.id, hit.score) for hit in result.hits]


def test_the_words_told_in_python_are_the_servers(postgres_server: PostgresServer) -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019 \t,;:!?\"'()[]{}_*=#%$^`|\\@-./+~&<>é"
    told = 0
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as connection:
        for _ in range(3000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
            guess = predicted_lexemes(text, "simple")
            if guess is None:
                continue
            told += 1
            row = connection.execute(
                "SELECT tsvector_to_array(to_tsvector('simple', %s))", (text,)
            ).fetchone()
            assert row is not None
            assert guess == list(row[0]), text
    # the rule covers everyday text, and leaves the rest to the server
    assert told > 100
    assert predicted_lexemes("What does Ada drink?", "simple") == ["ada", "does", "drink", "what"]
    assert predicted_lexemes("well-known", "simple") is None
    assert predicted_lexemes("thé", "simple") is None
    assert predicted_lexemes("tea", "english") is None


async def test_recall_finds_the_same_whether_the_words_are_told_or_asked(
    postgres_server: PostgresServer, schema: str
) -> None:
    """The same hits, scores and order as with the server's own split of every query.

    A copy of `simple` under another name has the same parser and dictionary, but the
    Provider does not know its rule, so it asks the server for the words every time.
    """
    dsn = postgres_server.dsn()
    async with open_provider(dsn, schema) as told:
        await _remember_corpus(told, dsn, schema)
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(
                sql.SQL("CREATE TEXT SEARCH CONFIGURATION {}.simple_copy (COPY = simple)").format(
                    sql.Identifier(schema)
                )
            )
        async with open_provider(dsn, schema, text_search_config=f"{schema}.simple_copy") as asked:
            compared = 0
            for query in QUERIES:
                for parents in (("p",), ("p", "q")):
                    request = SearchRequest(parents=parents, query=query, limit=10)
                    expected = _hits(await asked.search(request))
                    assert _hits(await told.search(request)) == expected, query
                    compared += len(expected)
    assert compared > 100  # most queries found something to compare


async def test_a_wrong_guess_costs_a_statement_never_a_result(
    postgres_server: PostgresServer, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = postgres_server.dsn()
    async with open_provider(dsn, schema) as adapter:
        await _remember_corpus(adapter, dsn, schema)
        requests = [SearchRequest(parents=("p",), query=query) for query in QUERIES]
        expected = [_hits(await adapter.search(request)) for request in requests]

        def wrong(text: str, config: str) -> list[str]:
            return sorted({*text.split(), "zzz"})  # not lowercased, one word too many

        monkeypatch.setattr(_search, "predicted_lexemes", wrong)
        assert [_hits(await adapter.search(request)) for request in requests] == expected
