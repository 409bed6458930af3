"""Against a real server: several processes, a crash mid-write, timeouts within the deadline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson
import psycopg
import pytest
from mnemon_source_spaces import ListRequest, ProviderError, RememberRequest
from pg_kit import REMEMBER, allow, open_provider, open_source, source_config

from mnemon import ActionError
from mnemon_testing.postgres import PostgresServer

WRITER = Path(__file__).with_name("pg_writer.py")
PROCESSES = 4
WRITES = 200


def start_writer(
    mode: str, config: dict[str, Any], prefix: str, count: int = WRITES
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), mode, orjson.dumps(config).decode(), prefix, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stored_texts(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn) as connection:
        return [row[0] for row in connection.execute(f"SELECT text FROM {schema}.memories")]


async def test_four_processes_lose_and_duplicate_nothing(
    postgres_server: PostgresServer, schema: str
) -> None:
    config = source_config(postgres_server.dsn(), schema, pool_max=2)
    processes = [start_writer("spaces", config, f"w{n}") for n in range(PROCESSES)]
    lines: list[str] = []
    for process in processes:
        out, err = await anyio.to_thread.run_sync(process.communicate)
        assert process.returncode == 0, err[-2_000:]
        lines += out.splitlines()
    assert len(lines) == PROCESSES * WRITES
    assert {line.split()[1] for line in lines} == {"committed"}
    texts = stored_texts(postgres_server.dsn(), schema)
    expected = {f"memory w{n}-{i} of the fleet" for n in range(PROCESSES) for i in range(WRITES)}
    assert len(texts) == len(expected)  # nothing duplicated
    assert set(texts) == expected  # nothing lost


@pytest.mark.timeout(120)
async def test_a_crash_mid_loop_keeps_every_committed_write(
    postgres_server: PostgresServer, schema: str
) -> None:
    dsn = postgres_server.dsn()
    config = source_config(dsn, schema, pool_timeout=1.0, statement_timeout=2.0)
    committed: list[str] = []
    uncertain: list[str | None] = []
    enough = anyio.Event()
    runner = await open_source(config, provider_timeout=4)
    try:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})

        async def write_loop() -> None:
            index = 0
            while len(uncertain) < 3:
                text = f"crash loop write {index}"
                try:
                    receipt = await turn.execute_action(
                        REMEMBER, {"text": text}, allow, idempotency_key=f"crash-{index}"
                    )
                except ActionError as exc:
                    uncertain.append(None if exc.receipt is None else exc.receipt.completion)
                else:
                    assert receipt.completion == "committed"
                    committed.append(text)
                    if len(committed) == 20:
                        enough.set()
                index += 1

        async def crash() -> None:
            await enough.wait()
            await anyio.to_thread.run_sync(postgres_server.kill)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(write_loop)
                group.start_soon(crash)
        await turn.release()
        # a write in flight at the crash, or after it, may or may not have landed: never
        # claimed as committed
        assert set(uncertain) == {"unknown"}

        down = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert [d.message for d in down.view.diagnostics] == [
            "Memory Source source:spaces is unavailable (store-unreachable)"
        ]
        assert down.view.offers == ()
        await down.release()

        await anyio.to_thread.run_sync(postgres_server.resume)
        # the same host serves again once the server is back: no restart, no remount
        with anyio.fail_after(30):
            while True:
                back = await runner.begin_turn({"scope": {"user_id": "ada"}})
                if not back.view.diagnostics:
                    break
                await back.release()
                await anyio.sleep(0.2)
        receipt = await back.execute_action(
            REMEMBER, {"text": "after the restart"}, allow, idempotency_key="after"
        )
        assert receipt.completion == "committed"
        await back.release()
    finally:
        await runner.dispose()
    texts = set(stored_texts(dsn, schema))
    assert set(committed) <= texts, "a write whose receipt said committed was lost"
    assert "after the restart" in texts
    assert len(committed) >= 20


async def test_a_statement_timeout_and_an_exhausted_pool_are_timeouts(
    postgres_server: PostgresServer, schema: str
) -> None:
    dsn = postgres_server.dsn()
    async with open_provider(
        dsn, schema, pool_max=1, pool_timeout=0.2, statement_timeout=0.5
    ) as adapter:
        await adapter.remember(RememberRequest(parent="p", text="before"))
        codes: dict[str, str] = {}

        async def write(name: str) -> None:
            started = anyio.current_time()
            with pytest.raises(ProviderError) as caught:
                await adapter.remember(RememberRequest(parent="p", text=name))
            codes[name] = caught.value.code
            assert anyio.current_time() - started < 2.0, f"{name} outlived its deadline"

        with psycopg.connect(dsn) as blocker:
            blocker.execute(f"LOCK TABLE {schema}.memories IN EXCLUSIVE MODE")
            with anyio.fail_after(5):
                async with anyio.create_task_group() as group:
                    group.start_soon(write, "holds the only connection")
                    await anyio.sleep(0.05)
                    group.start_soon(write, "finds the pool exhausted")
            blocker.rollback()
        assert codes == {
            "holds the only connection": "timeout",
            "finds the pool exhausted": "timeout",
        }
        after = await adapter.remember(RememberRequest(parent="p", text="after"))
        assert after.created


async def test_the_first_call_migrates_past_its_statement_timeout(
    postgres_server: PostgresServer, schema: str
) -> None:
    """Migrating is not a call: it may wait for another host's migration, or a loaded server.

    Another host holds the migration lock five times as long as the per-call timeout; the
    first call waits for it, migrates and answers. Later calls, on the same connection, are
    still bound by the timeout.
    """
    dsn = postgres_server.dsn()
    with psycopg.connect(dsn) as other_host:
        other_host.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"mnemon-spaces-postgres:{schema}",),
        )
        async with open_provider(dsn, schema, statement_timeout=0.2, pool_max=1) as adapter:

            async def other_host_finishes() -> None:
                await anyio.sleep(1.0)
                await anyio.to_thread.run_sync(other_host.rollback)

            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(other_host_finishes)
                    page = await adapter.list(ListRequest(parent="p"))
            assert page.memories == ()
            with psycopg.connect(dsn) as connection:
                versions = connection.execute(
                    f"SELECT version FROM {schema}.schema_version ORDER BY version"
                ).fetchall()
            assert versions == [(1,), (2,)]

            other_host.execute(f"LOCK TABLE {schema}.memories IN EXCLUSIVE MODE")
            started = anyio.current_time()
            with pytest.raises(ProviderError) as caught:
                await adapter.remember(RememberRequest(parent="p", text="stalled"))
            assert caught.value.code == "timeout"
            assert anyio.current_time() - started < 2.0
            other_host.rollback()


async def test_a_stalled_write_through_the_source_ends_within_the_deadline(
    postgres_server: PostgresServer, schema: str
) -> None:
    dsn = postgres_server.dsn()
    runner = await open_source(source_config(dsn, schema, statement_timeout=0.3))
    try:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        with psycopg.connect(dsn) as blocker:
            blocker.execute(f"LOCK TABLE {schema}.memories IN EXCLUSIVE MODE")
            started = anyio.current_time()
            with pytest.raises(ActionError) as caught:
                await turn.execute_action(REMEMBER, {"text": "stalled"}, allow)
            assert anyio.current_time() - started < 2.0
            blocker.rollback()
        assert caught.value.receipt is not None
        assert caught.value.receipt.completion == "unknown"
        assert "timeout" in str(caught.value)
        await turn.release()
    finally:
        await runner.dispose()
    assert "stalled" not in stored_texts(dsn, schema)
