"""Memories imported into a Raven backend through the records contract, each stored once.

The backends are the foreign ones (`foreign/`, written from Raven's contract alone), driven by
the `mnemon` command in its own process, as a person runs it: an export of the spaces Source
goes in, a second import stores nothing again, a failed store is not recorded, a damaged
ledger stops the import with the file named, and two processes importing at once never both
store one record.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import mnemon_source_raven as raven
import pytest
from click.testing import CliRunner
from mnemon_source_raven._ledger import ImportLedger

from mnemon import ManagementError, SourceError
from mnemon._cli._commands import main
from mnemon_testing import MemoryCompositionRunner, SelectAll

HERE = Path(__file__).parent
FOREIGN = HERE / "foreign"
TEXTS = ["Ada prefers green tea in the morning", "Ada's sister lives in Lyon"]
PROFILE = """\
data_dir = "data"

[strategy]
use = "general"

[[entries]]
id = "general"
plugin = "general"

[[entries]]
id = "raven"
plugin = "raven"
[entries.config]
backend = "{backend}"
{extra}
"""


def mnemon(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`mnemon --no-color ARGUMENTS` on `cwd`'s profile, its home under `cwd`, in this process.

    It runs `main()` as the console script does (errors as its exit status and message), in
    this process: a new interpreter per command would cost most of this file's time. The
    concurrency test below runs real processes.
    """
    variables = {"MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1", "MNEMON_PROFILE": None}
    with CliRunner().isolation(env=variables) as (out, err, _):
        try:
            main(["--no-color", "--profile", str(cwd / "mnemon.toml"), *arguments])
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        texts = [stream.getvalue().decode("utf-8") for stream in (out, err)]
    return subprocess.CompletedProcess(arguments, status, *texts)


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def raven_project(folder: Path, plugin: str, backend: str, extra: str = "") -> Path:
    """A profile whose only memory is a Raven entry on the foreign `plugin`'s `backend`."""
    shutil.copytree(FOREIGN / plugin, folder / ".mnemon" / "plugins" / plugin)
    profile = PROFILE.format(backend=backend, extra=extra)
    (folder / "mnemon.toml").write_text(profile, encoding="utf-8")
    return folder


def export_file(folder: Path, texts: list[str]) -> Path:
    """A version 2 export of the spaces Source's `memory` records, as `mnemon export` writes."""
    lines: list[dict[str, Any]] = [
        {"format": "mnemon-export", "version": 2, "scope": {"user_id": "ada"}},
        *(
            {
                "source": "source:spaces",
                "type": "spaces",
                "kind": "memory",
                "record": {"id": f"m{n}", "space": "personal", "text": text, "tags": []},
            }
            for n, text in enumerate(texts)
        ),
    ]
    lines.append({"kind": "end", "records": len(texts)})
    path = folder / "memories.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def rows(folder: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.rglob(name)):
        found += [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    return found


def ledgers(folder: Path) -> list[Path]:
    """The import ledgers under `folder`."""
    return sorted(folder.rglob("imports/*.sqlite3"))


def test_an_export_of_spaces_memories_goes_into_a_foreign_backend_once(tmp_path: Path) -> None:
    # the memories come from a real export of the starter profile's spaces Source
    starter = tmp_path / "starter"
    starter.mkdir()
    assert mnemon(starter, "init", "--embedder", "none").returncode == 0
    for text in TEXTS:
        assert mnemon(starter, "remember", text, "--user", "ada", "--yes").returncode == 0
    exported = tmp_path / "ada.jsonl"
    assert as_json(mnemon(starter, "export", "--user", "ada", "--out", str(exported), "--json"))[
        "records"
    ] == len(TEXTS)
    project = raven_project(tmp_path / "raven", "jsonl-memory", "jsonl")

    imported = mnemon(project, "import", str(exported), "--user", "ada", "--yes")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    # a backend's store says it took them, never that they are durable
    assert "imported 2 of 2 record(s) (2 of them accepted by a store that does not " in (
        imported.stdout
    )
    stored = rows(project / "data", "memories.jsonl")
    assert sorted(row["text"] for row in stored) == sorted(TEXTS)
    # each record is one user message of a session of its own, under the scope's identity
    assert {row["owner"][0] for row in stored} == {"user"}
    assert {row["owner"][1] for row in stored} == {"ada"}
    sessions = [row["session"] for row in stored]
    assert len(set(sessions)) == 2
    assert all(session.startswith("mnemon-import-") for session in sessions)

    again = as_json(mnemon(project, "import", str(exported), "--user", "ada", "--yes", "--json"))
    assert (again["written"], again["unchanged"], again["refused"]) == (0, 2, 0)
    assert len(rows(project / "data", "memories.jsonl")) == 2  # nothing stored twice

    # what the backend keeps is recalled through the Source, for the same identity only
    found = as_json(
        mnemon(
            project, "route", "source:raven/recall", '{"query": "tea"}', "--user", "ada", "--json"
        )
    )
    assert [item["text"] for item in found["items"]] == [TEXTS[0]]

    # list says the backend's memory cannot be read back instead of showing nothing as all
    listed = as_json(mnemon(project, "list", "--user", "ada", "--json"))
    assert listed["items"] == []
    assert listed["unlisted"] == [
        {
            "source_key": "source:raven",
            "kind": "memory",
            "reason": "its memory records are taken by import but cannot be read back",
        }
    ]
    shown = mnemon(project, "list", "--user", "ada")
    assert "not listed: source:raven: its memory records are taken by import" in shown.stdout
    asked = mnemon(project, "list", "--user", "ada", "--kind", "memory", "--json")
    error = json.loads(asked.stdout)["error"]
    assert error["code"] == "unknown-kind"
    assert "source:raven: its memory records are taken by import but cannot" in error["message"]
    out = tmp_path / "back.jsonl"
    summary = as_json(mnemon(project, "export", "--user", "ada", "--out", str(out), "--json"))
    assert summary["records"] == 0
    assert [u["source_key"] for u in summary["unexported"]] == ["source:raven"]
    assert mnemon(project, "forget", "m0", "--user", "ada", "--yes").returncode != 0


def test_a_failed_store_is_refused_not_recorded_and_stored_by_the_next_import(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"  # the indexing service's folder: down, so not there
    extra = f'backend_config = {{ outbox = "{outbox}" }}'
    project = raven_project(tmp_path / "project", "outbox-memory", "outbox", extra)
    source = export_file(tmp_path, TEXTS)

    failed = mnemon(project, "import", str(source), "--user", "ada", "--yes", "--json")
    assert failed.returncode == 1, failed.stderr
    summary = json.loads(failed.stdout)
    assert (summary["written"], summary["refused"]) == (0, 2)
    assert {refusal["code"] for refusal in summary["refusals"]} == {"provider-error"}
    message = summary["refusals"][0]["message"]
    assert message.startswith("the Raven backend's store failed (FileNotFoundError): it may")
    assert "importing again stores it again" in message
    for secret in (*TEXTS, str(outbox)):  # neither the memory nor the backend's error text
        assert secret not in failed.stdout + failed.stderr

    outbox.mkdir()  # the service is back
    stored = as_json(mnemon(project, "import", str(source), "--user", "ada", "--yes", "--json"))
    assert (stored["written"], stored["accepted"], stored["unchanged"]) == (2, 2, 0)
    again = as_json(mnemon(project, "import", str(source), "--user", "ada", "--yes", "--json"))
    assert (again["written"], again["unchanged"]) == (0, 2)
    handed = [json.loads(path.read_text("utf-8")) for path in outbox.glob("*.json")]
    assert sorted(m["content"] for h in handed for m in h["messages"]) == sorted(TEXTS)
    assert {h["owner"]["user_id"] for h in handed} == {"ada"}


def test_a_damaged_ledger_is_named_left_as_it_is_and_nothing_is_stored(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    extra = f'backend_config = {{ outbox = "{outbox}" }}'
    project = raven_project(tmp_path / "project", "outbox-memory", "outbox", extra)
    first = export_file(tmp_path, TEXTS[:1])
    assert (
        as_json(mnemon(project, "import", str(first), "--user", "ada", "--yes", "--json"))[
            "written"
        ]
        == 1
    )
    (ledger,) = ledgers(project / "data")
    damaged = b"this is not a SQLite database, but it is someone's file\n" * 100
    ledger.write_bytes(damaged)
    for sidecar in ledger.parent.glob(ledger.name + "-*"):
        sidecar.unlink()

    second = export_file(tmp_path, TEXTS)
    refused = mnemon(project, "import", str(second), "--user", "ada", "--yes", "--json")
    assert refused.returncode == 1
    summary = json.loads(refused.stdout)
    assert (summary["written"], summary["refused"]) == (0, 2)
    (code,) = {refusal["code"] for refusal in summary["refusals"]}
    assert code == "ledger-damaged"
    message = summary["refusals"][0]["message"]
    assert f"imports/{ledger.name}" in message
    assert "nothing was stored" in message
    assert ledger.read_bytes() == damaged  # never reset: what it recorded is not lost
    assert len(list(outbox.glob("*.json"))) == 1  # the backend was not called


def test_two_processes_importing_the_same_records_store_each_once(tmp_path: Path) -> None:
    shutil.copytree(FOREIGN / "jsonl-memory", tmp_path / ".mnemon" / "plugins" / "jsonl-memory")
    count = 25
    writers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "records_writer.py"), str(tmp_path), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MNEMON_HOME": str(tmp_path / "home")},
        )
        for _ in range(2)
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "ready"
        for writer in writers:  # both start writing together
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        results = [writer.communicate(timeout=60) for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    outcomes = []
    for writer, (out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    stored = rows(tmp_path / "data", "memories.jsonl")
    texts = [row["text"] for row in stored]
    assert len(texts) == count
    assert len(set(texts)) == count  # no record stored twice
    for key in outcomes[0]:
        # exactly one of the two stored it; the other replayed it
        assert sorted([outcomes[0][key], outcomes[1][key]]) == [False, True], key


async def write(client: Any, texts: list[str]) -> list[dict[str, Any]]:
    records = [{"record": {"text": text}, "idempotency_key": f"k:{text}"} for text in texts]
    result = await client.mutate(
        "records-write",
        {"kind": "memory", "records": records},
        confirmed=True,
        expected_revision=await client.revision(),
    )
    return [dict(outcome) for outcome in result.output["results"]]


async def with_strategy(runner: MemoryCompositionRunner) -> MemoryCompositionRunner:
    await runner.mount(SelectAll(), instance_id="all", config={"required": False})
    return runner


def reference(directory: Path, **backend_config: Any) -> dict[str, Any]:
    return {
        "backend": "raven_reference:make_backend",
        "data_dir": str(directory),
        "backend_config": backend_config,
    }


async def test_a_store_cut_off_by_the_deadline_is_not_recorded(tmp_path: Path) -> None:
    # the host gives up on manage() after its short deadline, while store() is under way
    async with await with_strategy(MemoryCompositionRunner(source_timeout=0.05)) as runner:
        await runner.mount(raven, instance_id="raven", config=reference(tmp_path, hang_store=True))
        client = runner.management_client("source:raven", {"user_id": "ada"})
        with pytest.raises(ManagementError) as caught:
            await write(client, [TEXTS[0]])
        assert caught.value.code == "timeout"
    async with await with_strategy(MemoryCompositionRunner()) as runner:
        await runner.mount(raven, instance_id="raven", config=reference(tmp_path))
        client = runner.management_client("source:raven", {"user_id": "ada"})
        # the key was never recorded: this import stores it, and the next one replays it
        assert await write(client, [TEXTS[0]]) == [{"index": 0, "completion": "accepted"}]
        assert await write(client, [TEXTS[0]]) == [
            {"index": 0, "completion": "accepted", "replayed": True}
        ]


async def test_each_identity_and_track_keeps_its_own_ledger(tmp_path: Path) -> None:
    async with await with_strategy(MemoryCompositionRunner()) as runner:
        await runner.mount(raven, instance_id="raven", config=reference(tmp_path))
        await runner.mount(
            raven, instance_id="agent", config={**reference(tmp_path), "track": "agent"}
        )
        ada = runner.management_client("source:raven", {"user_id": "ada"})
        bob = runner.management_client("source:raven", {"user_id": "bob"})
        agent = runner.management_client("source:agent", {"user_id": "ada", "agent_id": "a1"})
        for client in (ada, bob, agent):
            (outcome,) = await write(client, [TEXTS[0]])
            assert outcome == {"index": 0, "completion": "accepted"}
        (outcome,) = await write(ada, [TEXTS[0]])
        assert outcome["replayed"] is True
        nobody = runner.management_client("source:raven", {"agent_id": "a1"})
        with pytest.raises(ManagementError):
            await write(nobody, [TEXTS[0]])  # no user: no identity to store for
    assert len(ledgers(tmp_path)) == 3


async def test_a_record_breaking_the_text_rule_is_refused_alone(tmp_path: Path) -> None:
    async with await with_strategy(MemoryCompositionRunner()) as runner:
        await runner.mount(raven, instance_id="raven", config=reference(tmp_path))
        client = runner.management_client("source:raven", {"user_id": "ada"})
        bad = "Ada \u202e reversed"
        results = await write(client, [bad, TEXTS[1]])
    assert results[0]["completion"] == "refused"
    assert results[0]["code"] == "invalid-input"
    assert bad not in results[0]["message"]
    assert results[1] == {"index": 1, "completion": "accepted"}


async def test_the_ingest_switch_off_refuses_every_record_and_stores_nothing(
    tmp_path: Path,
) -> None:
    switches = {"external-memory.ingest": False}
    async with await with_strategy(MemoryCompositionRunner(switches=switches)) as runner:
        await runner.mount(raven, instance_id="raven", config=reference(tmp_path))
        client = runner.management_client("source:raven", {"user_id": "ada"})
        results = await write(client, TEXTS)
    assert [(r["completion"], r["code"]) for r in results] == [
        ("refused", "ingest-switched-off")
    ] * 2
    assert not ledgers(tmp_path)


async def test_a_new_ledger_waits_for_another_process_switching_it_to_wal(tmp_path: Path) -> None:
    # two processes opening one new ledger at once: while the other holds the file's lock,
    # SQLite refuses the switch to WAL at once instead of waiting out its busy timeout
    path = tmp_path / "imports" / "id-x.sqlite3"
    path.parent.mkdir()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the other process, about to make the ledger itself
    finished = threading.Timer(0.2, lambda: other.execute("COMMIT"))
    finished.start()
    try:
        ledger = ImportLedger(path, "imports/id-x.sqlite3", "jsonl")
        async with ledger, ledger.hold("k") as held:
            assert held.present is False
            held.record()
        with sqlite3.connect(path) as check:
            assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        finished.join()
        other.close()


async def test_the_ledger_waits_for_another_holder_then_gives_up_honestly(tmp_path: Path) -> None:
    path = tmp_path / "imports" / "id-x.sqlite3"
    first = ImportLedger(path, "imports/id-x.sqlite3", "jsonl")
    second = ImportLedger(path, "imports/id-x.sqlite3", "jsonl", wait=0.05)
    async with first, second:
        async with first.hold("k") as held:
            assert held.present is False
            with pytest.raises(SourceError) as caught:
                async with second.hold("k"):
                    raise AssertionError("two holders of one ledger at once")
            assert caught.value.code == "timeout"
            assert caught.value.nothing_written is True
            held.record()
        async with second.hold("k") as again:
            assert again.present is True
