"""The PostgreSQL Provider keeps vectors: what is its own beyond the Provider suite.

The rules every Provider keeps are checked by `ProviderConformance` (test_conformance.py) on
both servers. Here: hosts sharing one schema, the migration of a store made before vectors,
a role that may not create the extension, the log saying which way vectors are kept, damaged
rows, numpy only where it is needed, and the spaces Source recalling by meaning on PostgreSQL
with a toy embedder.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import uuid

import mnemon_spaces_postgres
import psycopg
import pytest
from mnemon_source_spaces import (
    ForgetRequest,
    ListRequest,
    MemoryVectors,
    MissingVectorsRequest,
    ProviderError,
    RegisterSpaceRequest,
    RememberRequest,
    SearchRequest,
    SegmentVector,
    StoreVectorsRequest,
    VectorSearchRequest,
)
from mnemon_spaces_postgres import PostgresProvider
from pg_kit import ADA, RECALL, REMEMBER, allow, open_provider, source_config

from mnemon.sdk import (
    EmbedQueryRequest,
    PluginContext,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    VectorSpace,
    define_embedder,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner, SelectAll
from mnemon_testing.postgres import PostgresServer

SPACE = VectorSpace(id="test.toy", version="1", model="toy", dimensions=3, metric="cosine")
P = "personal.user-ada"


@pytest.fixture(params=["fallback", "pgvector"])
def server(request: pytest.FixtureRequest) -> PostgresServer:
    """Each test here runs on the server without pgvector and on the one with it."""
    name = "postgres_server" if request.param == "fallback" else "pgvector_server"
    found: PostgresServer = request.getfixturevalue(name)
    return found


def has_pgvector(server: PostgresServer) -> bool:
    with psycopg.connect(server.dsn()) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return row == (1,)


def vectors(memory_id: str, *segments: tuple[float, ...]) -> MemoryVectors:
    return MemoryVectors(
        id=memory_id,
        segments=tuple(SegmentVector(start=0, end=1, vector=vector) for vector in segments),
    )


async def remember(adapter: PostgresProvider, *texts: str) -> list[str]:
    return [
        (await adapter.remember(RememberRequest(parent=P, text=text))).memory.id for text in texts
    ]


async def nearest(adapter: PostgresProvider, vector: tuple[float, ...]) -> list[str]:
    found = await adapter.vector_search(
        VectorSearchRequest(parents=(P,), space=SPACE.key, vector=vector)
    )
    return [hit.memory.text for hit in found.hits]


async def test_another_hosts_vector_writes_and_forgets_are_seen_by_the_next_search(
    server: PostgresServer, schema: str
) -> None:
    """A host caching a partition's vectors reads them again once any host changed them."""
    dsn = server.dsn()
    async with open_provider(dsn, schema) as reader, open_provider(dsn, schema) as writer:
        await writer.register_space(RegisterSpaceRequest(space=SPACE))
        first, second, third = await remember(writer, "first", "second", "third")
        await writer.store_vectors(
            StoreVectorsRequest(parent=P, space=SPACE.key, memories=(vectors(first, (1, 0, 0)),))
        )
        assert await nearest(reader, (0.0, 1.0, 0.0)) == ["first"]
        await writer.store_vectors(
            StoreVectorsRequest(
                parent=P,
                space=SPACE.key,
                memories=(vectors(second, (0, 1, 0)), vectors(third, (0, 0.5, 0.5))),
            )
        )
        assert await nearest(reader, (0.0, 1.0, 0.0)) == ["second", "third", "first"]
        await writer.forget(ForgetRequest(parent=P, id=second))
        assert await nearest(reader, (0.0, 1.0, 0.0)) == ["third", "first"]
        # a delete by another program, straight in SQL, is seen as well
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(
                f"DELETE FROM {schema}.memories WHERE parent = %s AND id = %s", (P, third)
            )
        assert await nearest(reader, (0.0, 1.0, 0.0)) == ["first"]


async def test_a_store_made_before_vectors_gains_them_and_keeps_its_memories(
    server: PostgresServer, schema: str
) -> None:
    dsn = server.dsn()
    async with open_provider(dsn, schema) as adapter:
        kept = await remember(adapter, "older memory", "newer memory")
    # back to what version 1 of the schema was: no vector objects, version 1 recorded
    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in (
            "DROP TABLE {s}.vectors",
            "DROP TABLE {s}.vector_versions",
            "DROP TABLE {s}.vector_spaces",
            "DROP FUNCTION {s}.vectors_deleted()",
            "DELETE FROM {s}.schema_version WHERE version > 1",
        ):
            connection.execute(statement.format(s=schema))
    async with open_provider(dsn, schema) as adapter:
        page = await adapter.list(ListRequest(parent=P))
        assert [memory.text for memory in page.memories] == ["newer memory", "older memory"]
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        missing = await adapter.missing_vectors(MissingVectorsRequest(parent=P, space=SPACE.key))
        assert [memory.id for memory in missing.memories] == kept
        assert missing.remaining == 2
        await adapter.store_vectors(
            StoreVectorsRequest(parent=P, space=SPACE.key, memories=(vectors(kept[1], (1, 0, 0)),))
        )
        assert await nearest(adapter, (1.0, 0.0, 0.0)) == ["newer memory"]
    with psycopg.connect(dsn) as connection:
        versions = connection.execute(f"SELECT version FROM {schema}.schema_version").fetchall()
    assert versions == [(1,), (2,)]


async def test_a_role_that_may_not_create_the_extension_keeps_vectors_without_it(
    pgvector_server: PostgresServer, schema: str
) -> None:
    """pgvector installed on the server but not in the database, and no right to add it."""
    role, database = f"plain_{uuid.uuid4().hex[:8]}", f"novector_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pgvector_server.dsn(), autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"CREATE DATABASE {database} OWNER {role}")
    dsn = f"host={pgvector_server.socket_directory} dbname={database} user={role}"
    async with open_provider(dsn, schema) as adapter:
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        [memory_id] = await remember(adapter, "kept without pgvector")
        await adapter.store_vectors(
            StoreVectorsRequest(
                parent=P, space=SPACE.key, memories=(vectors(memory_id, (1, 0, 0)),)
            )
        )
        assert await nearest(adapter, (1.0, 0.0, 0.0)) == ["kept without pgvector"]
    with psycopg.connect(dsn) as connection:
        kind = connection.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            (f"{schema}.vectors",),
        ).fetchone()
        extension = connection.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    assert kind == ("bytea",)
    assert extension == (0,)


async def test_the_way_vectors_are_kept_is_logged_once_at_info(
    server: PostgresServer, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mnemon_spaces_postgres")
    async with open_provider(server.dsn(), schema) as adapter:
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        await remember(adapter, "a memory")
    said = [r.getMessage() for r in caplog.records if r.name.startswith("mnemon_spaces_postgres")]
    if has_pgvector(server):
        with psycopg.connect(server.dsn()) as connection:
            row = connection.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        assert row is not None
        assert said == [f"spaces-postgres vectors: pgvector {row[0]}, searched by the server"]
    else:
        assert said == [
            "spaces-postgres vectors: float16 bytea, searched exactly in this process "
            "(pgvector was not usable)"
        ]


async def test_damaged_vectors_are_refused_plainly_and_nothing_is_lost(
    server: PostgresServer, schema: str
) -> None:
    """Rows this Provider did not write fail the vector search, never the memories."""
    dsn = server.dsn()
    async with open_provider(dsn, schema) as adapter:
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        first, second = await remember(adapter, "secret recipe one", "secret recipe two")
        await adapter.store_vectors(
            StoreVectorsRequest(
                parent=P,
                space=SPACE.key,
                memories=(vectors(first, (1, 0, 0)), vectors(second, (0, 1, 0))),
            )
        )
        assert await nearest(adapter, (1.0, 0.0, 0.0)) == ["secret recipe one", "secret recipe two"]
        # another program writes a vector of two numbers where the space has three
        damaged = "'[1,0]'::vector" if has_pgvector(server) else "'\\x003c0000'::bytea"
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(
                f"UPDATE {schema}.vectors SET embedding = {damaged} WHERE memory = %s",
                (second,),
            )
            connection.execute(
                f"UPDATE {schema}.vector_versions SET version = version + 1 WHERE parent = %s",
                (P,),
            )
        with pytest.raises(ProviderError) as caught:
            await nearest(adapter, (1.0, 0.0, 0.0))
        assert caught.value.code == "provider_error"
        assert str(caught.value).startswith("the store holds a damaged vector (its ")
        assert "secret" not in repr(caught.value)  # nothing of a memory in the error
        # the memories are all there, found by their words
        found = await adapter.search(SearchRequest(parents=(P,), query="recipe"))
        assert sorted(hit.memory.text for hit in found.hits) == [
            "secret recipe one",
            "secret recipe two",
        ]
        # storing the memory's vectors again replaces the damaged row
        await adapter.store_vectors(
            StoreVectorsRequest(parent=P, space=SPACE.key, memories=(vectors(second, (0, 1, 0)),))
        )
        assert await nearest(adapter, (0.0, 1.0, 0.0)) == ["secret recipe two", "secret recipe one"]
    # a damaged record of the space: refused by the next host, the memories kept
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"UPDATE {schema}.vector_spaces SET metric = 'manhattan'")
    async with open_provider(dsn, schema) as adapter:
        with pytest.raises(ProviderError, match="damaged vector space record") as caught:
            await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        assert caught.value.code == "provider_error"
        with pytest.raises(ProviderError, match="damaged vector space record") as caught:
            await nearest(adapter, (1.0, 0.0, 0.0))
        assert caught.value.code == "provider_error"
        page = await adapter.list(ListRequest(parent=P))
        assert len(page.memories) == 2


async def test_a_zero_vector_is_refused_under_cosine(server: PostgresServer, schema: str) -> None:
    async with open_provider(server.dsn(), schema) as adapter:
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        [memory_id] = await remember(adapter, "text")
        with pytest.raises(ProviderError, match="zero vector") as caught:
            await adapter.store_vectors(
                StoreVectorsRequest(
                    parent=P, space=SPACE.key, memories=(vectors(memory_id, (0, 0, 0)),)
                )
            )
        assert caught.value.code == "invalid_payload"
        await adapter.store_vectors(
            StoreVectorsRequest(
                parent=P, space=SPACE.key, memories=(vectors(memory_id, (1.0, 0.0, 0.0)),)
            )
        )
        # a zero query has no direction either: every memory scores as (1 + 0) / 2
        found = await adapter.vector_search(
            VectorSearchRequest(parents=(P,), space=SPACE.key, vector=(0.0, 0.0, 0.0))
        )
        assert [(hit.memory.id, hit.score) for hit in found.hits] == [(memory_id, 0.5)]


async def test_numbers_past_float16_are_refused_only_by_the_fallback(
    server: PostgresServer, schema: str
) -> None:
    """The fallback keeps float16 (at most 65504); pgvector keeps float32."""
    dot = SPACE.model_copy(update={"id": "test.dot", "metric": "dot"})
    async with open_provider(server.dsn(), schema) as adapter:
        await adapter.register_space(RegisterSpaceRequest(space=dot))
        [memory_id] = await remember(adapter, "large")
        request = StoreVectorsRequest(
            parent=P, space=dot.key, memories=(vectors(memory_id, (1e6, 0, 0)),)
        )
        if has_pgvector(server):
            assert (await adapter.store_vectors(request)).stored == 1
            found = await adapter.vector_search(
                VectorSearchRequest(parents=(P,), space=dot.key, vector=(1e-6, 0.0, 0.0))
            )
            assert [round(hit.score, 3) for hit in found.hits] == [round(1 / (1 + math.e**-1), 3)]
        else:
            with pytest.raises(ProviderError, match="beyond 65504") as caught:
                await adapter.store_vectors(request)
            assert caught.value.code == "invalid_payload"


async def test_pgvector_searches_without_numpy_and_the_fallback_says_it_needs_it(
    server: PostgresServer, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now fails
    async with open_provider(server.dsn(), schema) as adapter:
        if not has_pgvector(server):
            with pytest.raises(ProviderError, match=r"mnemon-spaces-postgres\[vectors\]") as caught:
                await adapter.register_space(RegisterSpaceRequest(space=SPACE))
            assert caught.value.code == "unsupported"
            return
        await adapter.register_space(RegisterSpaceRequest(space=SPACE))
        [memory_id] = await remember(adapter, "found by the server")
        await adapter.store_vectors(
            StoreVectorsRequest(
                parent=P, space=SPACE.key, memories=(vectors(memory_id, (1, 0, 0)),)
            )
        )
        assert await nearest(adapter, (1.0, 0.0, 0.0)) == ["found by the server"]


def test_importing_the_provider_does_not_import_numpy() -> None:
    code = "import sys, mnemon_spaces_postgres; print('numpy' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


# ------------------------------------------------------------------ end to end

CONCEPTS = {"tea": 0, "chai": 0, "drink": 0, "cat": 1, "feline": 1, "berlin": 2, "lives": 2}


def concept_vector(text: str) -> tuple[float, ...]:
    """A toy embedding: one dimension per concept, so what meaning finds is known exactly."""
    vector = [0.0] * 4
    for word in text.lower().replace(".", " ").replace("?", " ").split():
        vector[CONCEPTS.get(word, 3)] += 1.0 if word in CONCEPTS else 0.05
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return tuple(x / norm for x in vector)


class Concepts:
    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        return SegmentAnswer(
            segments=tuple(
                Segment(
                    part_key=part.key,
                    start=0,
                    end=len(part.text),
                    vectors={space: concept_vector(part.text) for space in request.spaces},
                )
                for part in request.parts
                if part.text
            )
        )

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        return QueryVector(vector=concept_vector(request.text))


class ConceptsPlugin:
    definition = define_embedder(
        {
            "type_id": "concepts",
            "package_name": "mnemon-test-concepts",
            "spaces": [
                {
                    "id": "test.concepts",
                    "version": "1",
                    "model": "concepts",
                    "dimensions": 4,
                    "metric": "cosine",
                }
            ],
        },
        lambda configuration: Concepts(),
    )

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, embedders=[self.definition])


async def test_the_spaces_source_on_postgres_recalls_by_meaning(
    pgvector_server: PostgresServer, schema: str
) -> None:
    runner = MemoryCompositionRunner()
    async with runner:
        await runner.mount(ConceptsPlugin(), instance_id="concepts")
        await runner.mount(
            mnemon_spaces_postgres,
            instance_id="spaces",
            config=source_config(pgvector_server.dsn(), schema),
        )
        await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
        turn = await runner.begin_turn({"scope": ADA})
        for text in (
            "Ada's first cup every morning is chai.",
            "Ada adopted a feline named Turing.",
            "Ada lives in Berlin since 2019.",
        ):
            await turn.execute_action(REMEMBER, {"text": text}, allow)
        found = await turn.execute_route(RECALL, {"query": "What does she drink? tea", "limit": 2})
        await turn.release()
    assert found.items[0].text == "Ada's first cup every morning is chai."
    why = found.items[0].provenance["explain"]
    assert why["meaning"] == 1  # no word of the question is in it: meaning found it
    assert why["keywords"] is None
    assert why["similarity"] > 0.9
    with psycopg.connect(pgvector_server.dsn()) as connection:
        rows = connection.execute(f"SELECT count(*) FROM {schema}.vectors").fetchone()
    assert rows == (3,)
