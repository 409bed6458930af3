"""What the PostgreSQL Provider promises beyond the Provider suite: configuration, schema
migrations, full-text recall with relevance tiers, and partitions enforced in SQL."""

from __future__ import annotations

import anyio
import psycopg
import pytest
from mnemon_source_spaces import (
    STRONG_SCORE,
    ListRequest,
    ProviderError,
    RememberRequest,
    SearchRequest,
    StatusRequest,
)
from mnemon_spaces_postgres import POSTGRES_PROVIDER
from pg_kit import open_provider, provider_init

from mnemon import DefinitionError
from mnemon_testing.postgres import PostgresServer

SECRET_DSN = "host=/nowhere dbname=x user=u password=hunter2-secret-9d1e"


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({}, "dsn: required"),
        ({"dsn": ""}, "dsn: required"),
        (
            {"dsn": "host=x password='unterminated-secret-4c2b"},
            "dsn: not a valid connection string",
        ),
        ({"dsn": SECRET_DSN, "schema": "Bad-Name"}, "schema: must match"),
        ({"dsn": SECRET_DSN, "pool_min": 5, "pool_max": 2}, "pool_min: must not exceed pool_max"),
        ({"dsn": SECRET_DSN, "pool_max": 0}, "pool_max: must be an integer"),
        ({"dsn": SECRET_DSN, "statement_timeout": "5s"}, "statement_timeout: must be a number"),
        ({"dsn": SECRET_DSN, "text_search_config": "english; drop"}, "text_search_config:"),
        ({"dsn": SECRET_DSN, "passwd": "x"}, "passwd: unknown key"),
    ],
    ids=[
        "no-dsn",
        "empty-dsn",
        "bad-dsn",
        "schema",
        "pool-order",
        "pool-max",
        "timeout",
        "tsconfig",
        "unknown",
    ],
)
async def test_bad_configuration_names_the_key_never_the_value(
    configuration: dict[str, object], message: str
) -> None:
    init = provider_init("unused", "unused").model_copy(update={"configuration": configuration})
    with pytest.raises(DefinitionError, match=message) as caught:
        await POSTGRES_PROVIDER.open(init)
    assert "secret" not in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_the_adapter_and_its_settings_never_show_the_dsn() -> None:
    adapter = POSTGRES_PROVIDER.create(provider_init(SECRET_DSN, "s"))
    assert "hunter2" not in repr(adapter)
    assert "hunter2" not in repr(adapter._settings)  # type: ignore[union-attr]


async def test_an_unreachable_server_is_unavailable_without_the_dsn() -> None:
    async with open_provider(SECRET_DSN, "s", pool_timeout=0.5) as adapter:
        status = await adapter.status(StatusRequest())
        assert (status.availability, status.reason) == ("unavailable", "store-unreachable")
        with pytest.raises(ProviderError) as caught:
            await adapter.remember(RememberRequest(parent="p", text="never stored"))
        assert caught.value.code == "unavailable"
        assert "hunter2" not in repr(caught.value) + str(caught.value.__cause__)


async def test_hosts_starting_at_once_migrate_exactly_once(
    postgres_server: PostgresServer, schema: str
) -> None:
    dsn = postgres_server.dsn()

    async def start() -> None:
        async with open_provider(dsn, schema) as adapter:
            assert (await adapter.status(StatusRequest())).availability == "ready"

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(start)
    with psycopg.connect(dsn) as connection:
        versions = connection.execute(f"SELECT version FROM {schema}.schema_version").fetchall()
    assert versions == [(1,), (2,)]


async def test_a_database_newer_than_the_code_is_refused_and_kept(
    postgres_server: PostgresServer, schema: str
) -> None:
    dsn = postgres_server.dsn()
    async with open_provider(dsn, schema) as adapter:
        await adapter.remember(RememberRequest(parent="p", text="kept across versions"))
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"INSERT INTO {schema}.schema_version (version) VALUES (99)")
    async with open_provider(dsn, schema) as adapter:
        status = await adapter.status(StatusRequest())
        assert (status.availability, status.reason) == ("unavailable", "schema-mismatch")
        with pytest.raises(ProviderError) as caught:
            await adapter.list(ListRequest(parent="p"))
        assert caught.value.code == "schema_mismatch"
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(f"SELECT text FROM {schema}.memories").fetchall()
    assert rows == [("kept across versions",)]


async def test_an_unknown_text_search_configuration_is_reported(
    postgres_server: PostgresServer, schema: str
) -> None:
    async with open_provider(
        postgres_server.dsn(), schema, text_search_config="klingon"
    ) as adapter:
        status = await adapter.status(StatusRequest())
        assert (status.availability, status.reason) == ("unavailable", "unknown-text-search-config")


async def test_an_installed_configuration_stems_words(
    postgres_server: PostgresServer, schema: str
) -> None:
    async with open_provider(
        postgres_server.dsn(), schema, text_search_config="english"
    ) as adapter:
        await adapter.remember(
            RememberRequest(parent="p", text="Ada runs every morning", memory_id="m-1")
        )
        found = await adapter.search(SearchRequest(parents=("p",), query="running"))
        assert [hit.memory.id for hit in found.hits] == ["m-1"]
    async with open_provider(postgres_server.dsn(), f"{schema}_simple") as adapter:
        await adapter.remember(
            RememberRequest(parent="p", text="Ada runs every morning", memory_id="m-1")
        )
        found = await adapter.search(SearchRequest(parents=("p",), query="running"))
        assert found.hits == ()


async def test_every_term_outranks_the_rarest_alone(
    postgres_server: PostgresServer, schema: str
) -> None:
    async with open_provider(postgres_server.dsn(), schema) as adapter:
        for memory_id, text in (
            ("both", "the green tea ceremony with friends and more words around it"),
            ("rare", "tea"),
            ("rare2", "tea tea tea"),
            ("other", "coffee only"),
        ):
            await adapter.remember(RememberRequest(parent="p", text=text, memory_id=memory_id))
        found = await adapter.search(SearchRequest(parents=("p",), query="green tea"))
    ids = [hit.memory.id for hit in found.hits]
    assert ids[0] == "both"
    assert set(ids) == {"both", "rare", "rare2"}
    assert found.hits[0].score >= STRONG_SCORE
    assert all(hit.score < STRONG_SCORE for hit in found.hits[1:])
    assert [hit.score for hit in found.hits] == sorted(
        (hit.score for hit in found.hits), reverse=True
    )


async def test_a_common_word_brings_its_newest_memories_not_the_whole_store(
    postgres_server: PostgresServer, schema: str
) -> None:
    """Partial matches are bounded: a word in every memory never ranks every memory.

    They are the newest 16 memories holding each word (the README's window), so an older
    memory that would rank higher is not among them.
    """
    window, common = 16, 48
    async with open_provider(postgres_server.dsn(), schema) as adapter:
        await adapter.remember(RememberRequest(parent="p", text="tea tea tea tea", memory_id="old"))
        await adapter.remember(RememberRequest(parent="p", text="green tea", memory_id="both"))
        for index in range(common):
            await adapter.remember(
                RememberRequest(parent="p", text=f"tea number {index}", memory_id=f"t{index}")
            )
        found = await adapter.search(SearchRequest(parents=("p",), query="green tea", limit=8))
        # when whole matches fill the limit, partial ones are left out
        for index in range(8):
            await adapter.remember(
                RememberRequest(parent="p", text=f"green tea {index}", memory_id=f"g{index}")
            )
        whole = await adapter.search(SearchRequest(parents=("p",), query="green tea", limit=8))
    ids = [hit.memory.id for hit in found.hits]
    assert ids[0] == "both"
    # the partial matches are the newest memories holding the word
    newest = {f"t{index}" for index in range(common - window, common)}
    assert set(ids[1:]) <= newest
    assert len(ids) == 8
    assert {hit.memory.id for hit in whole.hits} <= {"both", *(f"g{i}" for i in range(8))}
    assert len(whole.hits) == 8


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a & b | !c", "'); DROP TABLE x; --", "tea:*", "-tea", "<-> (", "\\'\\\\"],
    ids=["quote", "operators", "injection", "prefix", "negation", "phrase-op", "escapes"],
)
async def test_any_text_is_a_valid_query(
    postgres_server: PostgresServer, schema: str, query: str
) -> None:
    async with open_provider(postgres_server.dsn(), schema) as adapter:
        await adapter.remember(RememberRequest(parent="p", text="green tea", memory_id="m-1"))
        await adapter.search(SearchRequest(parents=("p",), query=query))
        found = await adapter.search(SearchRequest(parents=("p",), query="tea"))
        assert [hit.memory.id for hit in found.hits] == ["m-1"]


async def test_every_statement_is_filtered_by_the_partition(
    postgres_server: PostgresServer, schema: str
) -> None:
    """The same id and the same words in two partitions: each sees only its own row."""
    async with open_provider(postgres_server.dsn(), schema) as adapter:
        for parent in ("tenant-a:ada", "tenant-b:ada"):
            await adapter.remember(
                RememberRequest(
                    parent=parent,
                    text=f"shared words of {parent}",
                    memory_id="m-1",
                    idempotency_key="same-key",
                    entities=("Ada",),
                )
            )
        for parent in ("tenant-a:ada", "tenant-b:ada"):
            found = await adapter.search(SearchRequest(parents=(parent,), query="shared words"))
            assert [hit.memory.parent for hit in found.hits] == [parent]
            page = await adapter.list(ListRequest(parent=parent))
            assert [memory.text for memory in page.memories] == [f"shared words of {parent}"]
            replay = await adapter.remember(
                RememberRequest(parent=parent, text="other text", idempotency_key="same-key")
            )
            assert (replay.created, replay.memory.parent) == (False, parent)
        status = await adapter.status(
            StatusRequest(parents=("tenant-a:ada", "tenant-c:x"), count=True)
        )
        assert [(ns.parent, ns.memories) for ns in status.namespaces] == [
            ("tenant-a:ada", 1),
            ("tenant-c:x", 0),
        ]


async def test_a_replayed_key_under_concurrency_stores_once(
    postgres_server: PostgresServer, schema: str
) -> None:
    results = []
    async with open_provider(postgres_server.dsn(), schema, pool_max=12) as adapter:

        async def write() -> None:
            results.append(
                await adapter.remember(
                    RememberRequest(parent="p", text="once", idempotency_key="k-1")
                )
            )

        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(write)
        page = await adapter.list(ListRequest(parent="p"))
    assert len(page.memories) == 1
    assert sum(result.created for result in results) == 1
    assert {result.memory.id for result in results} == {page.memories[0].id}
