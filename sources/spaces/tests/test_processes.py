"""Several OS processes on one SQLite store: nothing lost, nothing torn, even under SIGKILL."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio.to_thread
import mnemon_source_spaces as spaces
import orjson
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    ListRequest,
    ProviderInit,
    RememberRequest,
    SearchRequest,
)
from mnemon_source_spaces._sqlite_layout import document_terms
from spaces_kit import KEY, SelectSpaces
from spaces_writer import PARENT, entities_of, text_is_whole

from mnemon_testing import MemoryCompositionRunner

WRITER = Path(__file__).with_name("spaces_writer.py")
PROCESSES = 4
WRITES = 200


def start(*arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def check_store(path: Path) -> list[tuple[Any, ...]]:
    """Integrity of the file, of the FTS index and of every derived row; returns the memories."""
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        connection.execute(
            "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)"
        )
        rows = connection.execute(
            "SELECT m.seq, n.parent, m.id, m.text, m.entities, m.tags FROM memories m "
            "JOIN namespaces n ON n.slot = m.seq >> 40"
        ).fetchall()
        mentions: dict[tuple[int, str], int] = {}
        documents_of: dict[tuple[int, str], int] = {}
        for seq, _, _, text, entities, tags in rows:
            assert text_is_whole(text), "a memory's text is torn"
            names = json.loads(entities)
            for key in {" ".join(name.casefold().split()) for name in names}:
                mentions[(seq >> 40, key)] = mentions.get((seq >> 40, key), 0) + 1
            for term in document_terms(text, json.loads(tags), names):
                for counted in ((seq >> 40, term), (0, term)):  # the parent's and the store's
                    documents_of[counted] = documents_of.get(counted, 0) + 1
        terms = connection.execute("SELECT slot, term, documents FROM terms WHERE documents != 0")
        assert {(slot, term): n for slot, term, n in terms} == documents_of, (
            "the term counts disagree with the memories"
        )
        stored = connection.execute("SELECT slot, key, memories FROM entities").fetchall()
        assert {(slot, key): count for slot, key, count in stored} == mentions, (
            "the entity counts disagree with the memories"
        )
        documents = connection.execute(
            "SELECT documents FROM namespaces WHERE slot = 0"
        ).fetchone()[0]
        assert documents == len(rows), "the store's document count disagrees with its rows"
        indexed = connection.execute("SELECT count(*) FROM memories_fts").fetchone()[0]
        assert indexed == len(rows)
        return rows
    finally:
        connection.close()


async def wait_all(processes: list[subprocess.Popen[str]]) -> list[str]:
    lines: list[str] = []
    for process in processes:
        out, err = await anyio.to_thread.run_sync(process.communicate)
        assert process.returncode == 0, err[-2_000:]
        lines += out.split()
    return lines


async def test_four_processes_writing_through_the_source_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite3"
    config = {"data_dir": str(tmp_path), "provider": {"type": "sqlite", "path": str(store)}}
    processes = [
        start("source", orjson.dumps(config).decode(), f"p{number}", str(WRITES))
        for number in range(PROCESSES)
    ]
    acknowledged = await wait_all(processes)
    assert len(acknowledged) == PROCESSES * WRITES
    rows = check_store(store)
    assert len(rows) == PROCESSES * WRITES, f"{PROCESSES * WRITES - len(rows)} writes were lost"
    async with MemoryCompositionRunner() as runner:
        await runner.mount(spaces, instance_id="spaces", config=config)
        await runner.mount(SelectSpaces(), instance_id="strategy")
        client = runner.management_client(KEY, {"user_id": "shared"})
        seen: list[str] = []
        cursor = None
        while True:
            page = await client.read(
                "list",
                {"space": "memories", "limit": 100, **({"cursor": cursor} if cursor else {})},
            )
            seen += [
                memory["text"].split(" ", 3)[0] + "-" + memory["text"].split(" ", 3)[2]
                for memory in page["memories"]
            ]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(acknowledged), "a committed write is missing from the store"
        turn = await runner.begin_turn({"scope": {"user_id": "shared"}})
        found = await turn.execute_route(f"{KEY}/recall", {"query": "p3 entry 199"})
        assert any(item.text.startswith("p3 entry 199 ") for item in found.items)
        await turn.release()


async def test_processes_writing_the_same_batches_store_each_memory_once(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite3"
    count = 400
    # each process stores every memory, starting at another quarter, so their batches
    # overlap: every key must be created by exactly one of them and replayed by the others
    processes = [
        start("batches", str(store), str(number * count // PROCESSES), str(count))
        for number in range(PROCESSES)
    ]
    lines = await wait_all(processes)
    created = sorted(line.split(":", 1)[1] for line in lines if line.startswith("created:"))
    assert created == sorted(f"shared-{index}" for index in range(count))
    assert len(lines) == PROCESSES * count
    rows = check_store(store)
    assert len(rows) == count, f"{len(rows) - count} memories were stored twice"


async def test_a_writer_killed_while_writing_leaves_a_clean_store(tmp_path: Path) -> None:
    store = tmp_path / "killed.sqlite3"
    writer = start("provider", str(store), "k", "-1")
    assert writer.stdout is not None
    acknowledged = []
    for line in writer.stdout:
        acknowledged.append(line.strip())
        if len(acknowledged) >= 40:
            break
    writer.send_signal(signal.SIGKILL)
    writer.communicate()
    assert writer.returncode == -signal.SIGKILL
    rows = check_store(store)
    ids = {row[2] for row in rows}
    assert len(rows) >= len(acknowledged), "an acknowledged write was lost"
    adapter = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="k", data_directory=str(tmp_path), configuration={"path": str(store)}
        )
    )
    try:
        page = await adapter.list(ListRequest(parent=PARENT, limit=100))
        assert {memory.id for memory in page.memories} <= ids
        hits = await adapter.search(SearchRequest(parents=(PARENT,), query="k entry 0"))
        assert hits.hits
        assert hits.hits[0].memory.entities == entities_of(0)
        again = await adapter.remember(RememberRequest(parent=PARENT, text="after the kill"))
        assert again.created, "the store does not accept writes after the kill"
    finally:
        await adapter.dispose()


async def test_a_write_killed_inside_its_transaction_leaves_no_partial_record(
    tmp_path: Path,
) -> None:
    store = tmp_path / "torn.sqlite3"
    adapter = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="k", data_directory=str(tmp_path), configuration={"path": str(store)}
        )
    )
    try:
        await adapter.remember(
            RememberRequest(parent=PARENT, text="k entry before|x", entities=("Kept",))
        )
        writer = start("hang", str(store), "torn")
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "mid"
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
        connection = sqlite3.connect(store)
        try:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            connection.execute(
                "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)"
            )
            assert (
                connection.execute("SELECT count(*) FROM memories WHERE id = 'torn'").fetchone()[0]
                == 0
            )
            assert (
                connection.execute("SELECT count(*) FROM entities WHERE name = 'Torn'").fetchone()[
                    0
                ]
                == 0
            )
            assert (
                connection.execute("SELECT count(*) FROM terms WHERE term = 'torn'").fetchone()[0]
                == 0
            )
            assert (
                connection.execute("SELECT documents FROM namespaces WHERE slot = 0").fetchone()[0]
                == 1
            )
        finally:
            connection.close()
        page = await adapter.list(ListRequest(parent=PARENT))
        assert [memory.entities for memory in page.memories] == [("Kept",)]
    finally:
        await adapter.dispose()
