"""The runtime Source with `store = "postgres"`: hosts share working memory, no write is lost."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mnemon_source_runtime
import orjson
import pytest
from runtime_kit import ADA, KEY, OFFER, add, allow, facts_of, open_host, postgres_config
from runtime_writer import entry_text

from mnemon import InstallError, RevisionConflict
from mnemon_testing import MemoryCompositionRunner
from mnemon_testing.postgres import PostgresServer

WRITER = Path(__file__).with_name("runtime_writer.py")
# the four writers contend for one partition's row throughout; 4 x 50 keeps this test to seconds
WRITES = 50
SECRET = "host=/nowhere dbname=x user=u password=runtime-secret-61c0"


def start_writer(config: dict[str, Any], prefix: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            orjson.dumps(config).decode(),
            "shared",
            prefix,
            str(WRITES),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"store": "postgres"}, "dsn: required"),
        ({"dsn": SECRET}, "dsn: only used"),
        ({"store": "postgres", "dsn": SECRET, "schema": "Bad Name"}, "schema"),
        (
            {"store": "postgres", "dsn": "host='open password=runtime-secret-61c0"},
            "dsn: not a valid connection string",
        ),
    ],
    ids=["no-dsn", "dsn-without-store", "bad-schema", "bad-dsn"],
)
async def test_the_store_configuration_is_checked_without_showing_the_dsn(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    runner = MemoryCompositionRunner()
    try:
        with pytest.raises(InstallError, match=message) as caught:
            await runner.mount(
                mnemon_source_runtime,
                instance_id="runtime",
                config={"data_dir": str(tmp_path), **config},
            )
    finally:
        await runner.dispose()
    assert "runtime-secret" not in str(caught.value)


async def test_two_hosts_share_facts_and_lose_no_concurrent_write(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    first = await open_host(postgres_config(dsn, schema, tmp_path / "a"))
    second = await open_host(postgres_config(dsn, schema, tmp_path / "b"))
    try:

        async def write(runner: MemoryCompositionRunner, name: str) -> None:
            for index in range(15):
                turn = await runner.begin_turn({"scope": ADA})
                receipt = await turn.execute_action(OFFER, add(f"{name} fact {index}"), allow)
                assert receipt.completion == "committed"
                await turn.release()

        async with anyio.create_task_group() as group:
            group.start_soon(write, first, "first")
            group.start_soon(write, second, "second")
        expected = {f"{name} fact {index}" for name in ("first", "second") for index in range(15)}
        assert set(await facts_of(first)) == expected
        assert set(await facts_of(second)) == expected
        # the other host's View shows what this one wrote
        turn = await second.begin_turn({"scope": ADA})
        assert "first fact 14" in "".join(fragment.text for fragment in turn.view.fragments)
        await turn.release()
        assert "runtime-secret" not in repr(turn.view)
    finally:
        await first.dispose()
        await second.dispose()


async def test_a_fenced_write_after_another_hosts_write_is_a_revision_conflict(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    dsn = postgres_server.dsn()
    first = await open_host(postgres_config(dsn, schema, tmp_path / "a"))
    second = await open_host(postgres_config(dsn, schema, tmp_path / "b"))
    try:
        mine = first.management_client(KEY, ADA)
        seen = await mine.revision()
        turn = await second.begin_turn({"scope": ADA})
        await turn.execute_action(OFFER, add("written elsewhere"), allow)
        await turn.release()
        with pytest.raises(RevisionConflict):
            await mine.mutate("mutate", add("stale"), confirmed=True, expected_revision=seen)
        current = await mine.revision()
        assert current != seen
        await mine.mutate("mutate", add("fresh"), confirmed=True, expected_revision=current)
        assert await facts_of(first) == ["written elsewhere", "fresh"]
    finally:
        await first.dispose()
        await second.dispose()


async def test_four_processes_mutating_one_partition_lose_nothing(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    config = postgres_config(postgres_server.dsn(), schema, tmp_path, lock_timeout=30.0)
    processes = [start_writer(config, f"p{n}") for n in range(4)]
    for process in processes:
        out, err = await anyio.to_thread.run_sync(process.communicate)
        # a writer asserts that each of its writes committed before printing it
        assert process.returncode == 0, err[-2_000:]
        assert out.splitlines()[-1] == f"wrote {WRITES - 1}"
    runner = await open_host(config)
    try:
        notes = await runner.management_client(KEY, {"user_id": "shared"}).read("read")
    finally:
        await runner.dispose()
    texts = [entry["text"] for entry in notes["memory"]]
    expected = {entry_text(f"p{n}", index) for n in range(4) for index in range(WRITES)}
    assert len(texts) == len(expected)
    assert set(texts) == expected


async def test_an_unreachable_database_is_a_coded_unavailability_and_logs_no_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    config = postgres_config(SECRET, "s", tmp_path, lock_timeout=0.5)
    runner = await open_host(config)
    try:
        turn = await runner.begin_turn({"scope": ADA})
        assert [d.message for d in turn.view.diagnostics] == [
            "Memory Source source:runtime is unavailable (store-unreachable)"
        ]
        await turn.release()
    finally:
        await runner.dispose()
    logged = "\n".join(
        record.getMessage() for record in caplog.records if record.levelno >= logging.INFO
    )
    assert "nowhere" not in logged
    assert "runtime-secret" not in logged
