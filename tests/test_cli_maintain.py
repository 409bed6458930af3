"""`mnemon maintain`: usage against the cap, the plan, and the same plan applied once confirmed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import mnemon

PROFILE = """\
data_dir = ".mnemon"

[strategy]
use = "layered"

[[entries]]
id = "runtime"
plugin = "runtime"
config = { memory_limit_bytes = 2048 }

[[entries]]
id = "spaces"
plugin = "spaces"
[[entries.config.spaces]]
name = "personal"
writable = true

[[entries]]
id = "layered"
plugin = "layered"
"""

FILLER = "x" * 250


@pytest.fixture
def full(tmp_path: Path) -> Path:
    """A project whose working memory for ada is 98% full (four facts of 2,048 bytes)."""
    (tmp_path / "mnemon.toml").write_text(PROFILE, encoding="utf-8")
    for number in range(4):
        done = mnemon(tmp_path, "facts", "add", f"fact {number} {FILLER}", "--user", "ada", "--yes")
        assert done.returncode == 0, done.stderr
    return tmp_path


def facts(project: Path) -> list[str]:
    done = mnemon(project, "list", "--user", "ada", "--json")
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_the_dry_run_shows_use_and_plan_and_changes_nothing(full: Path) -> None:
    before = facts(full)
    done = mnemon(full, "maintain", "--dry-run", "--user", "ada")
    assert done.returncode == 0, done.stderr
    assert "source:runtime" in done.stdout
    assert "of 2,048 bytes (9" in done.stdout
    assert "source:runtime fact u1 -> source:spaces: would be archived" in done.stdout
    assert "dry run: nothing was changed" in done.stdout
    assert facts(full) == before


def test_the_applied_plan_is_the_one_the_dry_run_showed(full: Path) -> None:
    shown = mnemon(full, "maintain", "--dry-run", "--user", "ada", "--json")
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)["plan"]
    applied = mnemon(full, "maintain", "--user", "ada", "--yes", "--json")
    assert applied.returncode == 0, applied.stderr
    body = json.loads(applied.stdout)
    assert body["plan"]["plan_digest"] == plan["plan_digest"]
    planned = [(e["record_id"], e["to_source_key"]) for e in plan["entries"]]
    done = [(e["record_id"], e["to_source_key"]) for e in body["done"]["entries"]]
    assert planned
    assert done == planned
    assert {entry["outcome"] for entry in body["done"]["entries"]} == {"archived"}
    assert body["done"]["usage"][0]["source"] == "source:runtime"
    # a second run finds room: nothing to do
    again = mnemon(full, "maintain", "--user", "ada", "--yes")
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout


def test_without_confirmation_nothing_moves(full: Path) -> None:
    before = facts(full)
    done = mnemon(full, "maintain", "--user", "ada", stdin="n\n")
    assert done.returncode == 1
    assert "would be archived" in done.stdout
    assert "nothing was changed" in done.stderr
    assert facts(full) == before


def test_a_confirmed_run_says_what_happened_to_each_entry(full: Path) -> None:
    done = mnemon(full, "maintain", "--user", "ada", stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert "source:runtime fact u1 -> source:spaces: archived" in done.stdout
    assert FILLER not in done.stdout + done.stderr  # entries by id, never their text


GENERAL = PROFILE.replace('use = "layered"', 'use = "general"').replace(
    'id = "layered"\nplugin = "layered"', 'id = "general"\nplugin = "general"'
)


def test_a_strategy_without_a_policy_and_no_source_limits_is_a_one_line_error(
    tmp_path: Path,
) -> None:
    without_spaces = GENERAL.replace(
        '[[entries]]\nid = "spaces"\nplugin = "spaces"\n[[entries.config.spaces]]\n'
        'name = "personal"\nwritable = true\n',
        "",
    )
    (tmp_path / "mnemon.toml").write_text(without_spaces, encoding="utf-8")
    done = mnemon(tmp_path, "maintain", "--user", "ada", "--dry-run")
    assert done.returncode == 1
    assert "has no maintenance policy" in done.stderr
    assert "no Source offers maintenance of its own" in done.stderr


LIMITED = PROFILE.replace(
    'name = "personal"\nwritable = true\n',
    'name = "personal"\nwritable = true\n'
    'limits = { max_memories = 2, then = "archive", archive_to = "cold" }\n\n'
    '[[entries.config.spaces]]\nname = "cold"\n',
)


def test_a_spaces_limit_is_shown_and_applied_under_any_strategy(tmp_path: Path) -> None:
    profile = LIMITED.replace('use = "layered"', 'use = "general"').replace(
        'id = "layered"\nplugin = "layered"', 'id = "general"\nplugin = "general"'
    )
    (tmp_path / "mnemon.toml").write_text(profile, encoding="utf-8")
    for number in range(4):
        done = mnemon(
            tmp_path, "remember", f"memory {number}", "--user", "ada", "--space", "personal",
            "--yes",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    shown = mnemon(tmp_path, "maintain", "--user", "ada", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "source:spaces personal" in shown.stdout
    assert "4 records (keeps 2, then archive into cold)" in shown.stdout
    assert shown.stdout.count(": would archive into cold") == 2
    applied = mnemon(tmp_path, "maintain", "--user", "ada", "--yes", "--json")
    assert applied.returncode == 0, applied.stderr
    body = json.loads(applied.stdout)
    assert body["plan"] is None  # general has no maintenance policy: only the Source's limits
    (done,) = body["done_sources"]
    assert [r["outcome"] for r in done["results"]] == ["archived", "archived"]
    listed = mnemon(tmp_path, "list", "--user", "ada", "--space", "cold")
    assert "memory 0" in listed.stdout
    assert "memory 1" in listed.stdout
