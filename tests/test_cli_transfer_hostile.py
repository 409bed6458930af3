"""`mnemon export` and `mnemon import` facing a hostile folder or file, from the user's side."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from tests.test_cli import MNEMON, environment, mnemon

HEADER = {"format": "mnemon-export", "version": 1}


def as_json(result: subprocess.CompletedProcess[str]) -> object:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def export_file(path: Path, user: str, records: list[dict[str, object]]) -> Path:
    """An export file at `path` of `records`, exported from `user`'s scope."""
    lines = [
        {**HEADER, "scope": {"user_id": user}},
        *records,
        {"kind": "end", "records": len(records)},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def memory(text: str, space: str = "personal") -> dict[str, object]:
    return {
        "kind": "memory",
        "source": "source:spaces",
        "type": "spaces",
        "space": space,
        "text": text,
    }


def fact(text: str) -> dict[str, object]:
    return {
        "kind": "fact",
        "source": "source:runtime",
        "type": "runtime",
        "target": "user",
        "text": text,
    }


def texts(folder: Path, *flags: str) -> list[str]:
    listed = as_json(mnemon(folder, "list", *flags, "--json"))
    return sorted(item["text"] for item in listed["items"])  # type: ignore[index]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    assert (
        mnemon(folder, "remember", "Eve keeps a secret 3319.", "--user", "eve", "--yes").returncode
        == 0
    )
    return folder


# ------------------------------------------------------------------ export


def test_the_export_file_is_private_whatever_the_umask(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "eve.jsonl"
    out.write_text("an older export\n", encoding="utf-8")
    out.chmod(0o644)
    exported = subprocess.run(
        [MNEMON, "--no-color", "export", "--user", "eve", "--out", str(out), "--force"],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
        env=environment(project), umask=0o022,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "secret 3319" in out.read_text(encoding="utf-8")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["eve.jsonl"]  # no temporary left


def test_an_export_never_follows_a_link_planted_beside_its_file(
    project: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere.txt"
    out = folder / "eve.jsonl"
    # what an attacker who can write to the folder plants where a fixed temporary name would be
    (folder / "eve.jsonl.partial").symlink_to(victim)
    (folder / ".eve.jsonl.tmp").symlink_to(elsewhere)
    (folder / "eve.jsonl.tmp").symlink_to(elsewhere)
    exported = mnemon(project, "export", "--user", "eve", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert victim.read_text(encoding="utf-8") == "not yours\n"  # neither written nor truncated
    assert not elsewhere.exists()
    assert not out.is_symlink()
    assert stat.S_IMODE(out.lstat().st_mode) == 0o600
    lines = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1]) == {"kind": "end", "records": 1}
    assert sorted(path.name for path in folder.iterdir()) == [
        ".eve.jsonl.tmp",
        "eve.jsonl",
        "eve.jsonl.partial",
        "eve.jsonl.tmp",
    ]
    # a link planted under the final name is replaced, never followed, and needs --force
    out.unlink()
    out.symlink_to(victim)
    refused = mnemon(project, "export", "--user", "eve", "--out", str(out))
    assert refused.returncode == 1
    assert "exists; use --force" in refused.stderr
    forced = mnemon(project, "export", "--user", "eve", "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert victim.read_text(encoding="utf-8") == "not yours\n"
    assert not out.is_symlink()


def test_an_export_to_a_folder_that_does_not_exist_is_one_error_line(
    project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "missing" / "eve.jsonl"
    result = mnemon(project, "export", "--user", "eve", "--out", str(out), "--json")
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid-file"
    assert error["message"].endswith(
        "eve.jsonl: cannot be written (No such file or directory); nothing was exported"
    )
    assert "Traceback" not in result.stderr
    assert not out.parent.exists()


# ------------------------------------------------------------------ import: lines no store keeps


def _line(text: str) -> str:
    return json.dumps(memory(text))


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        ('{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "secret 4471", "tags": ' + "[" * 5_000 + "]" * 5_000 + "}", "is nested deeper than 64 levels"),
        ('{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "secret 4471", "tags": ' + "[" * 1_000 + "1234567890123456789" + "]" * 1_000 + "}", "is nested deeper than 64 levels"),
        ('{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "secret 4471", "tags": ' + "[" * 64 + "]" * 64 + "}", "is nested deeper than 64 levels"),
        ('{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "secret 4471", "importance": ' + "9" * 5_000 + "}", "holds an integer wider than 64 bits"),
        ('{"kind": "memory", "source": "source:spaces", "space": "personal", "text": "secret 4471", "importance": ' + "9" * 400 + "}", "holds an integer wider than 64 bits"),
    ],
    ids=["nested-past-orjson", "nested-with-long-digits", "nested-65", "5000-digits", "400-digits"],
)  # fmt: skip
def test_import_refuses_a_line_too_deep_or_too_wide_naming_the_line(
    project: Path, tmp_path: Path, bad: str, what: str
) -> None:
    header = json.dumps({**HEADER, "scope": {"user_id": "deep"}})
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join([header, _line("fine"), bad, '{"kind": "end", "records": 2}']) + "\n")
    result = mnemon(project, "import", str(path), "--yes")
    assert result.returncode == 1
    assert result.stderr == f"Error: …/hostile.jsonl: line 3 {what}\n"
    assert "4471" not in result.stdout + result.stderr
    structured = mnemon(project, "import", str(path), "--yes", "--json")
    assert json.loads(structured.stdout)["error"]["code"] == "invalid-file"
    assert texts(project, "--user", "deep") == []  # nothing was written


def test_import_never_quotes_a_hostile_header_or_kind(project: Path, tmp_path: Path) -> None:
    path = tmp_path / "quoted.jsonl"
    path.write_text(json.dumps({**HEADER, "version": "secret 5526 " * 50}) + "\n")
    result = mnemon(project, "import", str(path), "--yes")
    assert result.returncode == 1
    assert "not a mnemon export (its first line has no version number)" in result.stderr
    header = json.dumps({**HEADER, "scope": {"user_id": "kind"}})
    odd = json.dumps({"kind": "secret 5526 " * 50, "source": "source:spaces"})
    path.write_text("\n".join([header, odd, '{"kind": "end", "records": 1}']) + "\n")
    result = mnemon(project, "import", str(path), "--yes")
    assert result.returncode == 1
    assert result.stderr == "Error: …/quoted.jsonl: line 2: unknown record kind\n"
    end = '{"kind": "end", "records": "secret 5526"}'
    path.write_text("\n".join([header, _line("fine"), end]) + "\n")
    result = mnemon(project, "import", str(path), "--yes")
    assert result.returncode == 1
    assert "the end line has no record count (the file has 1)" in result.stderr
    assert "5526" not in result.stdout + result.stderr


# ------------------------------------------------------------------ import: records refused alone


def test_import_refuses_a_memory_of_a_space_the_scope_lacks_alone(
    project: Path, tmp_path: Path
) -> None:
    path = export_file(
        tmp_path / "spaces.jsonl",
        "spa",
        [
            memory("kept first"),
            memory("secret 6604 lost", "secret-space-6604"),
            memory("secret 6604 bad name", "not a space name/.."),
            memory("kept last"),
        ],
    )
    result = mnemon(project, "import", str(path), "--yes", "--json")
    assert result.returncode == 1  # some were refused: the others are in
    summary = json.loads(result.stdout)
    assert (summary["written"], summary["unchanged"], summary["refused"]) == (2, 0, 2)
    assert [(item["record"], item["code"]) for item in summary["refusals"]] == [
        (2, "unknown-space"),
        (3, "unknown-space"),
    ]
    assert "6604" not in result.stdout + result.stderr
    assert texts(project, "--user", "spa") == ["kept first", "kept last"]
    shown = mnemon(project, "import", str(path), "--yes")
    assert "imported 0 of 4 record(s); 2 already there, 2 refused" in shown.stdout
    assert "record 2 refused (unknown-space)" in shown.stdout + shown.stderr
    assert "6604" not in shown.stdout + shown.stderr


def test_import_refuses_a_fact_or_document_the_source_refuses_alone(
    project: Path, tmp_path: Path
) -> None:
    document = {"kind": "document", "source": "source:documents", "type": "documents",
                "title": "secret 8812\nsecond line", "body": "body"}  # fmt: skip
    path = export_file(
        tmp_path / "facts.jsonl",
        "fay",
        [
            fact("Fay likes rain."),
            fact("secret 8812 with a \x00 byte"),
            fact("secret 8812 " + "x" * 3_000),
            document,
            fact("Fay lives in Oslo."),
            memory("Fay's memory."),
        ],
    )
    result = mnemon(
        project, "import", str(path), "--workspace", "w", "--user", "fay", "--yes", "--json"
    )
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    assert (summary["written"], summary["unchanged"], summary["refused"]) == (3, 0, 3)
    assert [(item["record"], item["code"]) for item in summary["refusals"]] == [
        (2, "invalid-input"),
        (3, "invalid-input"),
        (4, "invalid-input"),
    ]
    assert "8812" not in result.stdout + result.stderr
    assert texts(project, "--user", "fay", "--workspace", "w") == [
        "Fay likes rain.",
        "Fay lives in Oslo.",
        "Fay's memory.",
    ]
    again = mnemon(
        project, "import", str(path), "--workspace", "w", "--user", "fay", "--yes", "--json"
    )
    assert json.loads(again.stdout)["unchanged"] == 3


# ------------------------------------------------------------------ import: the prompt


def test_the_import_prompt_names_the_scope_it_writes_into(project: Path, tmp_path: Path) -> None:
    path = export_file(tmp_path / "one.jsonl", "pia", [memory("Pia's memory.")])
    flagged = mnemon(
        project, "import", str(path), "--tenant", "acme", "--user", "ida", "--workspace", "w",
        stdin="n\n",
    )  # fmt: skip
    assert flagged.returncode == 1
    assert (
        "Import 1 record(s) into tenant 'acme', user 'ida', workspace 'w'? [y/N]" in flagged.stdout
    )
    from_file = mnemon(project, "import", str(path), stdin="n\n")
    assert from_file.returncode == 1
    assert (
        "Import 1 record(s) into user 'pia' (the scope the file was exported from)? [y/N]"
        in from_file.stdout
    )
    assert texts(project, "--user", "pia") == []
