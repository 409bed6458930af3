"""The `mnemon` command as a memory manager: list, forget, facts, docs, route, act, export, import."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import pytest

from tests.test_cli import MNEMON, environment, mnemon, start
from tests.test_cli_json_and_diagnostics import run, third_party

ADA = ("--user", "ada", "--workspace", "billing")


def as_json(result: object) -> object:
    stdout = result.stdout  # type: ignore[attr-defined]
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    return json.loads(stdout)


def memory_export(path: Path, user: str, texts: Iterable[str]) -> Path:
    """An export file at `path` of `texts` as memories of `user`'s `personal` space."""
    records = [
        {"kind": "memory", "source": "source:spaces", "space": "personal", "text": text}
        for text in texts
    ]
    header = {"format": "mnemon-export", "version": 1, "scope": {"user_id": user}}
    lines = [header, *records, {"kind": "end", "records": len(records)}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("manage")
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    for text in ("Ada prefers green tea.", "Ada's invoices are due on the 5th."):
        assert mnemon(folder, "remember", text, *ADA, "--yes").returncode == 0
    assert (
        mnemon(
            folder,
            "remember",
            "Billing uses euros.",
            *ADA,
            "--space",
            "project",
            "--tag",
            "money",
            "--yes",
        ).returncode
        == 0
    )
    assert mnemon(folder, "facts", "add", "Ada is left-handed.", *ADA, "--yes").returncode == 0
    assert (
        mnemon(
            folder,
            "facts",
            "add",
            "-",
            *ADA,
            "--yes",
            "--importance",
            "5",
            stdin="Ada lives in Lyon.\n",
        ).returncode
        == 0
    )
    docs = folder / "notes"
    (docs / "deep").mkdir(parents=True)
    (docs / "runbook.md").write_text("# Runbook\nRestart the worker.\n", encoding="utf-8")
    (docs / "deep" / "plain.md").write_text("No heading here.\n", encoding="utf-8")
    assert mnemon(folder, "docs", "import", str(docs), *ADA, "--yes").returncode == 0
    return folder


def test_list_shows_memories_facts_and_documents_of_the_scope(project: Path) -> None:
    listed = as_json(mnemon(project, "list", *ADA, "--json"))
    by_kind: dict[str, list[dict[str, object]]] = {}
    for item in listed["items"]:
        by_kind.setdefault(item["kind"], []).append(item)
    assert {m["text"] for m in by_kind["memory"]} == {
        "Ada prefers green tea.",
        "Ada's invoices are due on the 5th.",
        "Billing uses euros.",
    }
    assert [(f["id"], f["text"], f["importance"]) for f in by_kind["fact"]] == [
        ("u1", "Ada is left-handed.", 3),
        ("u2", "Ada lives in Lyon.", 5),  # stdin: no trailing newline
    ]
    assert sorted(d["title"] for d in by_kind["document"]) == ["Runbook", "plain"]
    assert listed["skipped"] == []
    only_project = as_json(mnemon(project, "list", *ADA, "--space", "project", "--json"))
    assert [m["text"] for m in only_project["items"]] == ["Billing uses euros."]
    assert only_project["items"][0]["tags"] == ["money"]
    other = as_json(mnemon(project, "list", "--user", "bob", "--json"))
    assert other["items"] == []
    (documents,) = other["skipped"]
    assert documents["reason"].endswith("(add --workspace)")
    unknown = mnemon(project, "list", *ADA, "--space", "nope")
    assert unknown.returncode == 1
    assert "--space: no space 'nope'" in unknown.stderr


def test_list_limit_shows_the_newest_of_each_kind_and_says_more_were_left_out(
    project: Path,
) -> None:
    one = as_json(mnemon(project, "list", *ADA, "--limit", "1", "--json"))
    by_kind: dict[str, list[object]] = {}
    for item in one["items"]:
        by_kind.setdefault(item["kind"], []).append(item.get("text", item.get("title")))
    assert by_kind["memory"] == ["Ada's invoices are due on the 5th.", "Billing uses euros."]
    assert by_kind["fact"] == ["Ada is left-handed."]  # the first, as without --limit
    assert len(by_kind["document"]) == 1
    assert one["more"] is True
    shown = mnemon(project, "list", *ADA, "--limit", "1")
    assert "more not shown: --limit 1 shows at most 1 of each kind" in shown.stdout
    every = as_json(mnemon(project, "list", *ADA, "--limit", "2", "--json"))
    assert len(every["items"]) == 3 + 2 + 2
    assert every["more"] is False
    assert as_json(mnemon(project, "list", *ADA, "--json"))["more"] is False
    assert "more not shown" not in mnemon(project, "list", *ADA, "--limit", "2").stdout
    nia = ("--user", "nia", "--agent", "helper")
    assert mnemon(project, "facts", "add", "Nia rows.", *nia, "--yes").returncode == 0
    for note in ("Check the invoices first.", "Nia prefers short answers."):
        assert mnemon(project, "facts", "add", note, "--note", *nia, "--yes").returncode == 0
    # only facts were asked for: the notes past the limit are not "more"
    facts = as_json(mnemon(project, "list", *nia, "--kind", "fact", "--limit", "1", "--json"))
    assert ([i["text"] for i in facts["items"]], facts["more"]) == (["Nia rows."], False)
    notes = as_json(mnemon(project, "list", *nia, "--kind", "note", "--limit", "1", "--json"))
    assert ([i["text"] for i in notes["items"]], notes["more"]) == (
        ["Check the invoices first."],
        True,
    )
    refused = mnemon(project, "list", *ADA, "--limit", "0")
    assert refused.returncode == 2
    assert "--limit" in refused.stderr


def test_list_limit_reads_past_a_page_and_stops_at_the_limit(project: Path, tmp_path: Path) -> None:
    texts = [f"ivy note {index}" for index in range(250)]  # newest first, as exported
    export = memory_export(tmp_path / "ivy.jsonl", "ivy", texts)
    assert mnemon(project, "import", str(export), "--yes").returncode == 0
    for limit, more in ((120, True), (249, True), (250, False), (400, False)):
        listed = as_json(mnemon(project, "list", "--user", "ivy", "--limit", str(limit), "--json"))
        assert [item["text"] for item in listed["items"]] == texts[:limit]
        assert listed["more"] is more


def test_remember_reads_standard_input_and_a_file_never_a_literal_dash(
    project: Path, tmp_path: Path
) -> None:
    piped = mnemon(project, "remember", "-", "--user", "eve", "--yes", stdin="Eve keeps bees.\n")
    assert piped.returncode == 0, piped.stderr
    note = tmp_path / "note.txt"
    note.write_text("Eve sells honey.\n", encoding="utf-8")
    filed = mnemon(project, "remember", "--file", str(note), "--user", "eve", "--yes")
    assert filed.returncode == 0, filed.stderr
    texts = {
        m["text"]
        for m in as_json(mnemon(project, "list", "--user", "eve", "--kind", "memory", "--json"))[
            "items"
        ]
    }
    assert texts == {"Eve keeps bees.", "Eve sells honey."}
    prompted = mnemon(project, "remember", "-", "--user", "eve", stdin="y\n")
    assert prompted.returncode == 2
    assert "needs --yes" in prompted.stderr
    empty = mnemon(project, "remember", "-", "--user", "eve", "--yes", stdin="\n")
    assert empty.returncode == 2
    assert "TEXT: is empty" in empty.stderr
    both = mnemon(project, "remember", "x", "--file", str(note), "--user", "eve", "--yes")
    assert "give TEXT or --file, not both" in both.stderr


def test_forget_deletes_a_memory_by_the_id_recall_shows(project: Path) -> None:
    mnemon(project, "remember", "Fay owns a kayak.", "--user", "fay", "--yes")
    found = as_json(mnemon(project, "recall", "kayak", "--user", "fay", "--json"))
    handle = found["items"][0]["id"]
    refused = mnemon(project, "forget", handle, "--user", "fay", stdin="n\n")
    assert refused.returncode == 1
    assert "you did not confirm" in refused.stderr
    gone = as_json(mnemon(project, "forget", handle, "--user", "fay", "--yes", "--json"))
    assert gone["forgotten"] is True
    assert as_json(mnemon(project, "recall", "kayak", "--user", "fay", "--json"))["items"] == []
    again = mnemon(project, "forget", handle, "--user", "fay", "--yes", "--json")
    assert json.loads(again.stdout)["error"]["code"] == "not-found"
    gone = mnemon(project, "forget", handle, "--user", "fay", "--yes")
    assert "it is already gone, or it was written in another scope" in gone.stderr


def test_forget_without_the_workspace_of_a_project_memory_names_the_flag(project: Path) -> None:
    written = mnemon(
        project, "remember", "We chose NATS.", "--space", "project", "--user", "fay",
        "--workspace", "queue", "--yes",
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    found = as_json(
        mnemon(project, "recall", "NATS", "--user", "fay", "--workspace", "queue", "--json")
    )
    handle = found["items"][0]["id"]
    missed = mnemon(project, "forget", handle, "--user", "fay", "--yes")
    assert missed.returncode == 1
    assert "one written with --workspace, --agent, --session or --tenant is seen only" in (
        missed.stderr
    )
    kept = mnemon(project, "recall", "NATS", "--user", "fay", "--workspace", "queue", "--json")
    assert [item["text"] for item in as_json(kept)["items"]] == ["We chose NATS."]  # kept
    forgotten = mnemon(project, "forget", handle, "--user", "fay", "--workspace", "queue", "--yes")
    assert forgotten.returncode == 0, forgotten.stderr


def test_forget_finds_the_space_of_an_old_memory_past_the_first_page(
    project: Path, tmp_path: Path
) -> None:
    texts = [f"hal note {index}" for index in range(150)]  # the last is the oldest
    export = memory_export(tmp_path / "hal.jsonl", "hal", texts)
    assert mnemon(project, "import", str(export), "--yes").returncode == 0
    other = ("--space", "project", "--user", "hal", "--yes")
    assert mnemon(project, "remember", "Hal's project", *other).returncode == 0
    items = as_json(mnemon(project, "list", "--user", "hal", "--json"))["items"]
    ids = {item["text"]: item["id"] for item in items}
    for text in ("hal note 149", "Hal's project"):  # the second page of one space; another
        gone = as_json(mnemon(project, "forget", ids[text], "--user", "hal", "--yes", "--json"))
        assert gone["forgotten"] is True
    left = {
        item["text"]
        for item in as_json(mnemon(project, "list", "--user", "hal", "--json"))["items"]
    }
    assert left == set(texts[:149])


def test_facts_replace_and_rm(project: Path) -> None:
    mnemon(project, "facts", "add", "Gus likes jazz.", "--user", "gus", "--yes")
    mnemon(project, "facts", "add", "Gus plays chess.", "--user", "gus", "--yes")
    replaced = mnemon(
        project, "facts", "replace", "u1", "Gus likes blues.", "--user", "gus", "--yes"
    )
    assert replaced.returncode == 0, replaced.stderr
    assert mnemon(project, "facts", "rm", "u2", "--user", "gus", "--yes").returncode == 0
    facts = as_json(mnemon(project, "list", "--user", "gus", "--kind", "fact", "--json"))["items"]
    assert [(f["id"], f["text"]) for f in facts] == [("u1", "Gus likes blues.")]
    bad = mnemon(project, "facts", "rm", "x9", "--user", "gus", "--yes")
    assert bad.returncode == 2
    assert "a fact is u1, u2" in bad.stderr


def test_docs_add_list_show_and_a_second_import_adds_nothing(project: Path) -> None:
    listed = as_json(mnemon(project, "docs", "list", *ADA, "--json"))["documents"]
    runbook = next(d for d in listed if d["title"] == "Runbook")
    shown = mnemon(project, "docs", "show", runbook["id"], *ADA)
    assert "Restart the worker." in shown.stdout
    again = as_json(
        mnemon(project, "docs", "import", str(project / "notes"), *ADA, "--yes", "--json")
    )
    assert {d["status"] for d in again["documents"]} == {"unchanged"}
    added = as_json(
        mnemon(
            project,
            "docs",
            "add",
            str(project / "notes" / "runbook.md"),
            "--title",
            "Copy",
            *ADA,
            "--yes",
            "--json",
        )
    )
    assert added["documents"][0]["status"] == "created"


# ------------------------------------------------------------------ export and import


def test_export_and_import_round_trip_without_loss_or_duplicates(
    project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ada.jsonl"
    summary = as_json(mnemon(project, "export", *ADA, "--out", str(out), "--json"))
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["format"] == "mnemon-export"
    assert lines[0]["version"] == 2
    assert {(line["source"], line["kind"]) for line in lines[1:-1]} == {
        ("source:spaces", "memory"),
        ("source:runtime", "fact"),
        ("source:documents", "document"),
    }
    assert lines[-1] == {"kind": "end", "records": summary["records"]}
    kinds = sorted(line["kind"] for line in lines[1:-1])
    assert all(isinstance(line["record"], dict) for line in lines[1:-1])
    assert kinds.count("memory") == 3
    assert kinds.count("fact") == 2
    assert kinds.count("document") >= 2
    # into a fresh profile, for another user: everything arrives once
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert mnemon(fresh, "init", "--embedder", "none").returncode == 0
    target = ("--user", "ida", "--workspace", "billing")
    imported = mnemon(fresh, "import", str(out), *target, "--yes", "--json")
    assert imported.stderr == ""  # piped: no progress bar
    first = as_json(imported)
    assert first["written"] == summary["records"]
    second = as_json(mnemon(fresh, "import", str(out), *target, "--yes", "--json"))
    assert second == {**first, "written": 0, "unchanged": summary["records"]}
    back = tmp_path / "back.jsonl"
    as_json(mnemon(fresh, "export", *target, "--out", str(back), "--json"))

    def content(path: Path) -> list[tuple[object, ...]]:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:-1]]
        records = [{**line["record"], "kind": line["kind"]} for line in lines]
        return sorted(
            (
                r["kind"],
                r.get("space"),
                r.get("text"),
                tuple(r.get("tags", ())),
                r.get("title"),
                r.get("body"),
                r.get("importance"),
            )
            for r in records
        )

    assert content(back) == content(out)
    # into the scope it came from (no identity flags): all there already, nothing written
    same = as_json(mnemon(project, "import", str(out), "--yes", "--json"))
    assert same["written"] == 0


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"format": "mnemon-export", "version": 3}', '{"kind": "end", "records": 0}'], "written in export format version 3; this mnemon reads versions 1 to 2 only"),
        (['{"format": "other"}'], "not a mnemon export"),
        (['{"format": "mnemon-export", "version": 1, "scope": {"user_id": "x"}}', '{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "cut"}'], "cut short (no end line): nothing was imported"),
        (['{"format": "mnemon-export", "version": 1, "scope": {}}', "{oops"], "line 2 is not JSON"),
        (['{"format": "mnemon-export", "version": 1, "scope": {}}', '{"kind": "memory", "source": "source:spaces", "text": "t"}', '{"kind": "end", "records": 1}'], "line 2: a memory record needs 'space'"),
    ],
    ids=["other-version", "not-an-export", "cut-short", "bad-line", "missing-field"],
)  # fmt: skip
def test_import_refuses_a_file_it_cannot_take_whole(
    project: Path, tmp_path: Path, lines: list[str], message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = mnemon(project, "import", str(bad), "--user", "kim", "--yes")
    assert result.returncode == 1
    assert message in result.stderr
    if "cut" in message:  # the one file whose records could have been written
        assert as_json(mnemon(project, "list", "--user", "kim", "--json"))["items"] == []


def test_import_refuses_a_file_that_is_not_utf8_by_that_name(project: Path, tmp_path: Path) -> None:
    latin1 = (
        b'{"format": "mnemon-export", "version": 1, "scope": {"user_id": "lat"}}\n'
        b'{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "caf\xe9"}\n'
        b'{"kind": "end", "records": 1}\n'
    )
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(latin1)
    from_file = mnemon(project, "import", str(bad), "--yes")
    assert from_file.returncode == 1
    assert from_file.stderr.endswith("latin1.jsonl: must be UTF-8 text\n")
    # standard input is read as bytes too: not mistaken for a lone surrogate escape
    from_stdin = subprocess.run(
        [MNEMON, "--no-color", "import", "-", "--yes"],
        cwd=project, input=latin1, capture_output=True, timeout=120, check=False,
        env=environment(project),
    )  # fmt: skip
    assert from_stdin.returncode == 1
    assert from_stdin.stderr == b"Error: standard input: must be UTF-8 text\n"
    assert as_json(mnemon(project, "list", "--user", "lat", "--json"))["items"] == []


def test_export_to_stdout_and_import_from_stdin(project: Path) -> None:
    exported = mnemon(project, "export", "--user", "ada", "--workspace", "billing")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines()[0].startswith('{"format": "mnemon-export"')
    # documents need a workspace: without one, nothing at all is imported
    refused = mnemon(
        project, "import", "-", "--user", "jo", "--yes", "--json", stdin=exported.stdout
    )
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "missing-scope"
    assert error["message"].startswith("nothing was imported: source:documents cannot be written")
    assert as_json(mnemon(project, "list", "--user", "jo", "--json"))["items"] == []
    imported = as_json(
        mnemon(
            project,
            "import",
            "-",
            "--user",
            "jo",
            "--workspace",
            "w",
            "--yes",
            "--json",
            stdin=exported.stdout,
        )
    )
    assert imported["unchanged"] == 0


# ------------------------------------------------------------------ any Source: route and act


def test_route_and_act_drive_a_third_party_source(tmp_path: Path) -> None:
    folder = third_party(tmp_path)
    found = json.loads(
        run(
            folder, "route", "source:todo/lookup", '{"query": "milk"}', "--user", "ada", "--json"
        ).stdout
    )
    assert [item["text"] for item in found["items"]] == ["buy oat milk"]
    receipt = json.loads(
        run(
            folder, "act", "todo/add", '{"query": "bread"}', "--user", "ada", "--yes", "--json"
        ).stdout
    )
    assert receipt["completion"] == "accepted"
    refused = run(folder, "act", "todo/add", '{"query": "bread"}', "--user", "ada", stdin="n\n")
    assert refused.returncode == 1
    assert "Error: nothing was changed: you did not confirm" in refused.stderr
    bad = run(folder, "route", "todo/lookup", "{not json", "--user", "ada")
    assert bad.returncode == 2
    assert "JSON: not valid JSON (line 1, column 2)" in bad.stderr
    unknown = run(folder, "route", "todo/nope", "{}", "--user", "ada", "--json")
    assert json.loads(unknown.stdout)["error"]["code"] == "unknown-route"


def test_import_shows_progress_on_a_terminal_only(project: Path, tmp_path: Path) -> None:
    import os
    import pty

    out = tmp_path / "ada.jsonl"
    as_json(mnemon(project, "export", *ADA, "--out", str(out), "--json"))
    terminal, stderr = pty.openpty()
    result = subprocess.run(
        [MNEMON, "import", str(out), "--user", "lu", "--workspace", "w", "--yes", "--json"],
        cwd=project, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
        env=environment(project), timeout=120, check=False,
    )  # fmt: skip
    os.close(stderr)
    drawn = b""
    try:
        while chunk := os.read(terminal, 65536):
            drawn += chunk
    except OSError:  # the terminal's other end is closed: all was read
        pass
    os.close(terminal)
    assert result.returncode == 0
    assert json.loads(result.stdout)["written"] > 0  # stdout stays clean JSON
    assert b"reading source:spaces" in drawn  # what it holds, before the first write
    assert b"import" in drawn
    assert b"100%" in drawn


def test_import_writes_memories_in_batches_and_refuses_bad_ones_alone(
    project: Path, tmp_path: Path
) -> None:
    def memory(text: str) -> dict[str, object]:
        return {"kind": "memory", "source": "source:spaces", "type": "spaces", "space": "personal",
                "text": text}  # fmt: skip

    records = [memory(f"bulk memory {index}") for index in range(1_500)]
    records.insert(10, memory("secret 4412 " + "x" * 9_000))
    records.insert(20, memory("secret 4412 with a \x00 byte"))
    header = {"format": "mnemon-export", "version": 1, "scope": {"user_id": "bulk"}}
    lines = [header, *records, {"kind": "end", "records": len(records)}]
    export = tmp_path / "bulk.jsonl"
    export.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    first = mnemon(project, "import", str(export), "--yes", "--json")
    assert first.returncode == 1  # some records were refused: the others are in
    summary = json.loads(first.stdout)
    assert (summary["written"], summary["unchanged"], summary["refused"]) == (1_500, 0, 2)
    refusals = [(item["record"], item["code"]) for item in summary["refusals"]]
    assert refusals == [(11, "too-large"), (21, "invalid-item")]
    assert "4412" not in first.stdout + first.stderr
    again = json.loads(mnemon(project, "import", str(export), "--yes", "--json").stdout)
    assert (again["written"], again["unchanged"], again["refused"]) == (0, 1_500, 2)
    shown = mnemon(project, "import", str(export), "--yes")
    # replayed and refused records are never called imported
    assert "imported 0 of 1502 record(s); 1500 already there, 2 refused" in shown.stdout
    assert "record 11 refused (too-large)" in shown.stdout + shown.stderr


def test_import_fills_batches_to_the_input_limit_with_their_keys_counted(
    project: Path, tmp_path: Path
) -> None:
    # 900 records of about 420 bytes: two batches by the record count alone, but each one
    # larger than max_input_bytes (256 KiB) once every record's idempotency key is added
    records = [
        {"kind": "memory", "source": "source:spaces", "type": "spaces", "space": "personal",
         "text": f"wide memory {index} " + "lorem ipsum dolor " * 20}
        for index in range(900)
    ]  # fmt: skip
    header = {"format": "mnemon-export", "version": 1, "scope": {"user_id": "full-batches"}}
    lines = [header, *records, {"kind": "end", "records": len(records)}]
    export = tmp_path / "full-batches.jsonl"
    export.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = mnemon(project, "import", str(export), "--yes", "--json")
    summary = json.loads(result.stdout)
    assert result.returncode == 0, summary
    assert (summary["written"], summary["unchanged"], summary["refused"]) == (900, 0, 0)


def test_import_refuses_values_no_store_keeps_naming_the_line(
    project: Path, tmp_path: Path
) -> None:
    header = '{"format": "mnemon-export", "version": 1, "scope": {"user_id": "sur"}}'
    good = '{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "fine"}'
    lone = '{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "a \\ud800"}'
    bad = tmp_path / "surrogate.jsonl"
    bad.write_text("\n".join([header, good, lone, '{"kind": "end", "records": 2}']) + "\n")
    result = mnemon(project, "import", str(bad), "--yes")
    assert result.returncode == 1
    assert "line 3 holds text that is not valid Unicode (a lone surrogate)" in result.stderr
    nan = good.replace('"text": "fine"', '"text": "fine", "tags": [NaN]')
    bad.write_text("\n".join([header, good, nan, '{"kind": "end", "records": 2}']) + "\n")
    result = mnemon(project, "import", str(bad), "--yes")
    assert result.returncode == 1
    assert "line 3 holds NaN or Infinity" in result.stderr
    assert as_json(mnemon(project, "list", "--user", "sur", "--json"))["items"] == []


def test_import_refuses_an_integer_wider_than_64_bits_instead_of_rounding_it(
    project: Path, tmp_path: Path
) -> None:
    header = '{"format": "mnemon-export", "version": 1, "scope": {"user_id": "wide"}}'
    digits = '{"kind": "memory", "source": "source:spaces", "space": "personal", '
    digits += '"text": "order 123456789012345678901234"}'  # long digits in text are text
    wide = digits.replace("}", ', "importance": 18446744073709551616}')
    path = tmp_path / "wide.jsonl"
    path.write_text("\n".join([header, digits, wide, '{"kind": "end", "records": 2}']) + "\n")
    result = mnemon(project, "import", str(path), "--yes")
    assert result.returncode == 1
    assert "line 3 holds an integer wider than 64 bits" in result.stderr
    assert as_json(mnemon(project, "list", "--user", "wide", "--json"))["items"] == []
    path.write_text("\n".join([header, digits, '{"kind": "end", "records": 1}']) + "\n")
    assert mnemon(project, "import", str(path), "--yes").returncode == 0
    items = as_json(mnemon(project, "list", "--user", "wide", "--json"))["items"]
    assert [item["text"] for item in items] == ["order 123456789012345678901234"]


def test_an_interrupted_import_says_how_far_it_got() -> None:
    from mnemon._cli._transfer import ImportTally

    tally = ImportTally()
    assert tally.interrupted() == "interrupted: nothing was imported"
    tally.written, tally.unchanged, tally.in_flight = 2000, 5, 1000
    assert tally.interrupted() == (
        "interrupted: 2000 record(s) written and 5 already there; the 1000 being written "
        "may or may not have been stored. Run the same import again to finish: it never "
        "duplicates"
    )
    tally.in_flight = 0
    assert "may or may not" not in tally.interrupted()


def test_ctrl_c_during_an_import_says_how_far_it_got(tmp_path: Path) -> None:
    folder = tmp_path / "interrupted"
    folder.mkdir()
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    export = memory_export(tmp_path / "many.jsonl", "ctrl", (f"note {i}" for i in range(20_000)))
    process = start(folder, "import", str(export), "--yes")
    # polls for a state, not for time: once the store is open, the import is under way
    while not list(folder.glob(".mnemon/**/spaces.sqlite3-wal")):
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert err.startswith("interrupted: "), err
    assert "imported" not in out  # no summary claims what did not finish
    if err.strip() != "interrupted: nothing was imported":
        assert "Run the same import again to finish: it never duplicates" in err
    finished = as_json(mnemon(folder, "import", str(export), "--yes", "--json"))
    assert finished["written"] + finished["unchanged"] == 20_000


def test_an_export_interrupted_part_way_leaves_no_file(tmp_path: Path) -> None:
    folder = tmp_path / "exporting"
    folder.mkdir()
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    source = memory_export(tmp_path / "many.jsonl", "big", (f"note {i}" for i in range(20_000)))
    assert mnemon(folder, "import", str(source), "--yes").returncode == 0
    out = tmp_path / "out.jsonl"
    process = start(folder, "export", "--user", "big", "--out", str(out))

    def temporaries() -> list[Path]:  # written aside under a fresh name: .out.jsonl.<hex>.tmp
        return list(tmp_path.glob(".out.jsonl.*.tmp"))

    def started() -> bool:
        sizes = []
        for partial in temporaries():
            with suppress(FileNotFoundError):  # renamed into place meanwhile
                sizes.append(partial.stat().st_size)
        return any(sizes)

    # polls for a state, not for time: once its header is written, the export is under way
    while not started():
        assert process.poll() is None, process.communicate()
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    out_text, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out_text, err)
    # nothing that looks like an export, whole or half
    assert temporaries() == []
    assert not out.exists()
    finished = as_json(mnemon(folder, "export", "--user", "big", "--out", str(out), "--json"))
    assert finished["records"] == 20_000
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[-1]) == {
        "kind": "end",
        "records": 20_000,
    }


def test_an_import_batch_past_the_deadline_is_finished_by_running_it_again(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "late"
    folder.mkdir()
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    profile = folder / "mnemon.toml"
    text = profile.read_text(encoding="utf-8")
    assert "source_timeout = 10.0" in text
    profile.write_text(text.replace("source_timeout = 10.0", "source_timeout = 1.0"), "utf-8")
    first = memory_export(tmp_path / "one.jsonl", "late", ["first"])
    assert mnemon(folder, "import", str(first), "--yes").returncode == 0
    [store] = folder.glob(".mnemon/**/spaces.sqlite3")
    late_notes = (f"late note {index}" for index in range(30))
    many = memory_export(tmp_path / "many.jsonl", "late", late_notes)
    other = sqlite3.connect(store, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing: the batch must wait
    try:
        late = mnemon(folder, "import", str(many), "--yes")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert late.returncode == 1
    assert late.stderr == (
        "Error: source:spaces/records-write: timeout: a batch of 30 records failed and may or "
        "may not have been stored; nothing was written before it. Run the same import again to "
        "finish: it never duplicates\n"
    )
    assert "imported" not in late.stdout  # nothing claims the batch
    # the deadline was the point of the first run; the second one only has to finish (a loaded
    # machine may need more than a second for 30 memories)
    profile.write_text(text, "utf-8")
    finished = as_json(mnemon(folder, "import", str(many), "--yes", "--json"))
    assert finished["written"] + finished["unchanged"] == 30
    with sqlite3.connect(store) as connection:
        texts = [row[0] for row in connection.execute("SELECT text FROM memories")]
    assert sorted(texts) == sorted(["first", *(f"late note {index}" for index in range(30))])


@pytest.mark.parametrize(
    "arguments",
    [
        ("remember", "Ada keeps bees.", *ADA),
        ("facts", "add", "Ada keeps bees.", *ADA),
        ("docs", "add", "notes.md", *ADA, "--workspace", "w"),
        ("forget", "0123456789abcdef", *ADA),
        ("act", "runtime/mutate", '{"target": "user", "operation": "add", "text": "Bees."}', *ADA),
    ],
    ids=["remember", "facts-add", "docs-add", "forget", "act"],
)
def test_every_declined_prompt_says_the_same_on_stderr(
    project: Path, arguments: tuple[str, ...]
) -> None:
    (project / "notes.md").write_text("# Notes\n\nBees.\n", encoding="utf-8")
    declined = mnemon(project, *arguments, stdin="n\n")
    assert declined.returncode == 1, declined.stderr
    assert declined.stderr.strip().splitlines()[-1] == (
        "Error: nothing was changed: you did not confirm"
    )
    assert "not written" not in declined.stdout


def test_a_source_failure_is_said_in_the_users_terms(project: Path) -> None:
    write = ("act", "spaces/remember", *ADA, "--key", "weekly-note", "--yes")
    assert (
        mnemon(project, *write[:2], '{"text": "Ada bakes on Sundays."}', *write[2:]).returncode == 0
    )
    reused = mnemon(project, *write[:2], '{"text": "Ada bakes on Mondays."}', *write[2:])
    assert reused.returncode == 1
    assert reused.stderr.strip() == (
        "Error: idempotency-conflict: source:spaces did not write: this idempotency key was "
        "already used for a different write; nothing was written"
    )
    assert "mutate()" not in reused.stderr
    assert "Memory Source" not in reused.stderr
    # scripts keep the code and the receipt
    error = json.loads(
        mnemon(
            project, *write[:2], '{"text": "Ada bakes on Mondays."}', *write[2:], "--json"
        ).stdout
    )["error"]
    assert error["code"] == "idempotency-conflict"
    assert error["receipt"]["completion"] == "failed"


BUSY = """\
from mnemon.sdk import SourceError
from mnemon_testing import StubSource


def _throttled(request):
    raise SourceError("rate_limited", "quota tok_SECRET spent", retry_after=2.5, origin_code="E429")


busy = StubSource("busy", type_id="busy", routes=["lookup"], items=_throttled)
"""


def test_a_throttled_read_says_when_to_try_again(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init", "--embedder", "none").returncode == 0
    (tmp_path / "busy_plugin.py").write_text(BUSY, encoding="utf-8")
    with (tmp_path / "mnemon.toml").open("a", encoding="utf-8") as profile:
        profile.write('\n[[entries]]\nid = "busy"\nuse = "busy_plugin:busy"\n')
    result = run(tmp_path, "route", "busy/lookup", '{"query": "x"}', *ADA)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "Error: rate_limited: source:busy could not be read: it is rate limited "
        "(its own code: E429); try again in 3 s"
    )
    assert "SECRET" not in result.stderr
