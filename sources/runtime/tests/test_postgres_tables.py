"""The runtime store's table layout on PostgreSQL: caps, records, revisions, the v1 migration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mnemon_source_runtime
import psycopg
import pytest
from runtime_kit import ADA, KEY, OFFER, add, allow, facts_of, open_host, postgres_config

from mnemon import ActionError, ManagementError, MutationReceipt
from mnemon_testing import MemoryCompositionRunner, SelectAll
from mnemon_testing.postgres import PostgresServer


async def mutate(
    runner: MemoryCompositionRunner,
    value: dict[str, Any],
    key: str | None = None,
    scope: dict[str, str] = ADA,
) -> MutationReceipt:
    turn = await runner.begin_turn({"scope": scope})
    try:
        return await turn.execute_action(OFFER, value, allow, idempotency_key=key)
    finally:
        await turn.release()


def rows(dsn: str, query: str, *values: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as connection:
        return [tuple(row) for row in connection.execute(query, values).fetchall()]


async def test_hosts_racing_to_the_byte_cap_never_exceed_it(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    limit = 4096
    config = postgres_config(dsn, schema, tmp_path, memory_limit_bytes=limit, lock_timeout=20.0)
    hosts = [await open_host(config) for _ in range(3)]
    committed: list[str] = []
    refused: list[str] = []
    try:

        async def fill(runner: MemoryCompositionRunner, name: str) -> None:
            # each host writes until the cap refuses it: the last writes race for the last bytes
            for index in range(40):
                text = f"{name} {index} " + "x" * 180
                try:
                    receipt = await mutate(runner, add(text))
                except ActionError as exc:
                    refused.append(exc.code)
                    return
                assert receipt.completion == "committed"
                committed.append(text)

        async with anyio.create_task_group() as group:
            for number, runner in enumerate(hosts):
                group.start_soon(fill, runner, f"host{number}")
        status = await hosts[0].management_client(KEY, ADA).read("read")
    finally:
        for runner in hosts:
            await runner.dispose()
    assert refused == ["runtime-capacity"] * 3, "every host reaches the cap, and only it"
    assert status["used_bytes"] <= limit
    # the cap the stores checked is the size the table records
    assert rows(dsn, f"SELECT used_bytes FROM {schema}.partitions") == [(status["used_bytes"],)]
    stored = [entry["text"] for entry in status["user"]]
    assert sorted(stored) == sorted(committed), "a committed write is stored, a refused one not"
    assert len(stored) >= 10


async def test_an_idempotent_retry_on_another_host_is_a_replay(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    first = await open_host(postgres_config(dsn, schema, tmp_path / "a"))
    second = await open_host(postgres_config(dsn, schema, tmp_path / "b"))
    try:
        original = await mutate(first, add("Ada takes tea."), key="tea-1")
        retried = await mutate(second, add("Ada takes tea."), key="tea-1")
        # the same key from another agent of the same user is that agent's own write
        other_agent = await mutate(
            second, add("Ada takes tea."), key="tea-1", scope={**ADA, "agent_id": "coder"}
        )
        with pytest.raises(ActionError) as reused:
            await mutate(second, add("Ada takes coffee."), key="tea-1")
        facts = await facts_of(first)
    finally:
        await first.dispose()
        await second.dispose()
    assert original.detail is not None
    assert retried.detail is not None
    assert original.detail["replayed"] is False
    assert retried.completion == "committed"
    assert retried.detail["replayed"] is True
    assert retried.detail["id"] == original.detail["id"]
    assert other_agent.detail is not None
    assert other_agent.detail["replayed"] is False
    assert reused.value.code == "invalid_payload"
    assert "Ada takes coffee" not in str(reused.value)
    assert facts == ["Ada takes tea.", "Ada takes tea."]
    assert sorted(rows(dsn, f"SELECT agent_id, key FROM {schema}.idempotency")) == [
        ("", "tea-1"),
        ("coder", "tea-1"),
    ]


async def test_idempotency_records_are_bounded_in_the_table(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    runner = await open_host(postgres_config(dsn, schema, tmp_path, idempotency_records=3))
    try:
        for index in range(5):
            await mutate(runner, add(f"fact {index}"), key=f"k{index}")
        # k0 is no longer remembered: the same key writes again
        again = await mutate(runner, add("fact 0"), key="k0")
        kept = await mutate(runner, add("fact 4"), key="k4")
    finally:
        await runner.dispose()
    assert again.detail is not None
    assert again.detail["replayed"] is False
    assert kept.detail is not None
    assert kept.detail["replayed"] is True
    keys = rows(dsn, f"SELECT key FROM {schema}.idempotency ORDER BY sequence")
    assert keys == [("k3",), ("k4",), ("k0",)]


async def test_every_write_is_a_revision_in_the_history(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    runner = await open_host(postgres_config(dsn, schema, tmp_path))
    try:
        receipts = [
            await mutate(runner, add("Ada is left-handed.")),
            await mutate(
                runner,
                {"target": "memory", "operation": "add", "text": "Check the build."},
                scope={**ADA, "agent_id": "coder"},
            ),
            await mutate(
                runner, {"target": "user", "operation": "replace", "id": "u1", "text": "Ada."}
            ),
            await mutate(runner, {"target": "user", "operation": "remove", "id": "u1"}),
        ]
        current = await runner.management_client(KEY, ADA).revision()
    finally:
        await runner.dispose()
    history = rows(
        dsn,
        f"SELECT sequence, revision, target, operation, entry_id, agent_id, committed_at "
        f"FROM {schema}.revisions ORDER BY sequence",
    )
    assert [row[0] for row in history] == [1, 2, 3, 4]
    assert [row[2:6] for row in history] == [
        ("user", "add", "u1", None),
        ("memory", "add", "m1", "coder"),
        ("user", "replace", "u1", None),
        ("user", "remove", "u1", None),
    ]
    assert [row[1] for row in history] == [receipt.revision for receipt in receipts]
    assert [row[6] for row in history] == [receipt.committed_at for receipt in receipts]
    assert history[-1][1] == current
    assert rows(dsn, f"SELECT count(*) FROM {schema}.entries") == [(1,)]  # the coder's note


def create_v1_store(dsn: str, schema: str, documents: dict[str, bytes]) -> None:
    """The layout of schema version 1: one row per partition holding its whole document."""
    with psycopg.connect(dsn) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"CREATE TABLE {schema}.schema_version (version integer NOT NULL)")
        connection.execute(f"INSERT INTO {schema}.schema_version VALUES (1)")
        connection.execute(
            f"CREATE TABLE {schema}.partitions (name text PRIMARY KEY, "
            "document bytea NOT NULL, row_version bigint NOT NULL)"
        )
        for name, document in documents.items():
            connection.execute(
                f"INSERT INTO {schema}.partitions VALUES (%s, %s, 7)", (name, document)
            )


async def file_store_documents(directory: Path) -> dict[str, dict[str, bytes]]:
    """Documents the file store wrote for ada (facts, notes, a keyed write) and for bob."""
    runner = MemoryCompositionRunner()
    await runner.mount(
        mnemon_source_runtime, instance_id="runtime", config={"data_dir": str(directory)}
    )
    await runner.mount(SelectAll(), instance_id="show")
    try:
        await mutate(runner, add("Ada is left-handed."), key="hand")
        await mutate(runner, add("Ada takes tea."))
        await mutate(
            runner,
            {"target": "memory", "operation": "add", "text": "Ada's build is slow."},
            scope={**ADA, "agent_id": "coder"},
        )
        await mutate(runner, add("Bob's fact"), scope={"user_id": "bob"})
    finally:
        await runner.dispose()
    found: dict[str, dict[str, bytes]] = {}
    for path in await anyio.to_thread.run_sync(lambda: list(directory.rglob("scope-*.json"))):
        stored = await anyio.Path(path).read_bytes()
        found["bob" if b'"bob"' in stored else "ada"] = {path.stem: stored}
    return found


async def test_a_one_row_store_is_migrated_forward_and_its_rows_kept(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    documents = await file_store_documents(tmp_path / "files")
    (bob_name,) = documents["bob"]
    damaged = {bob_name: b'{"format": "mnemon-runtime/2", "partition": '}
    create_v1_store(dsn, schema, {**documents["ada"], **damaged})
    config = postgres_config(dsn, schema, tmp_path / "pg")
    # two hosts meet the old layout at once: one migrates, the other finds it done
    hosts = [await open_host(config), await open_host(config)]
    try:
        async with anyio.create_task_group() as group:
            for runner in hosts:
                group.start_soon(facts_of, runner)
        facts = await facts_of(hosts[1])
        notes = await hosts[0].management_client(KEY, {**ADA, "agent_id": "coder"}).read("read")
        replay = await mutate(hosts[0], add("Ada is left-handed."), key="hand")
        after = await mutate(hosts[1], add("Ada reads in the evening."))
        turn = await hosts[0].begin_turn({"scope": {"user_id": "bob"}})
        bob = [(d.code, d.message) for d in turn.view.diagnostics]
        await turn.release()
        bob_client = hosts[0].management_client(KEY, {"user_id": "bob"})
        damaged_revision = await bob_client.revision()
        with pytest.raises(ManagementError) as bob_write:
            await bob_client.mutate(
                "mutate", add("into damage?"), confirmed=True, expected_revision=damaged_revision
            )
        final = await facts_of(hosts[0])
    finally:
        for runner in hosts:
            await runner.dispose()
    assert facts == ["Ada is left-handed.", "Ada takes tea."]
    assert [entry["text"] for entry in notes["memory"]] == ["Ada's build is slow."]
    assert replay.detail is not None
    assert replay.detail["replayed"] is True
    assert replay.detail["id"] == "u1"
    assert after.detail is not None
    assert after.detail["id"] == "u3"
    assert final == [*facts, "Ada reads in the evening."]
    assert bob == [("source-unavailable", f"Memory Source {KEY} is unavailable (damaged-file)")]
    assert bob_write.value.code == "schema_mismatch"
    assert rows(dsn, f"SELECT version FROM {schema}.schema_version ORDER BY version") == [
        (1,),
        (2,),
    ]
    # nothing of the old layout is destroyed: every row is kept, byte for byte
    kept = dict(rows(dsn, f"SELECT name, document FROM {schema}.partitions_v1"))
    assert {name: bytes(value) for name, value in kept.items()} == {
        **documents["ada"],
        **damaged,
    }


async def test_a_newer_schema_is_refused_and_left_alone(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    runner = await open_host(postgres_config(dsn, schema, tmp_path))
    try:
        await mutate(runner, add("written by this version"))
    finally:
        await runner.dispose()
    with psycopg.connect(dsn) as connection:
        connection.execute(f"INSERT INTO {schema}.schema_version VALUES (3)")
    runner = await open_host(postgres_config(dsn, schema, tmp_path))
    try:
        turn = await runner.begin_turn({"scope": ADA})
        await turn.release()
        with pytest.raises(ManagementError) as caught:
            await runner.management_client(KEY, ADA).read("read")
    finally:
        await runner.dispose()
    # the Source does not serve (no fragments, no offer) rather than misread the tables
    assert [d.message for d in turn.view.diagnostics] == [
        "Memory Source source:runtime is unavailable (schema-newer)"
    ]
    assert turn.view.offers == ()
    assert "schema" in str(caught.value)
    assert rows(dsn, f"SELECT text FROM {schema}.entries") == [("written by this version",)]
