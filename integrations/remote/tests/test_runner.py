"""The contract runner certifies the reference plugins and fails each broken one on one check."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mnemon_remote import CHECKS, certify
from mnemon_remote._report import report_validator

PLUGINS = Path(__file__).parent / "plugins"
BROKEN = PLUGINS / "broken" / "serve_broken.py"


def _plugin(tmp_path: Path, mode: str, **changes: Any) -> Path:
    """A copy of the notes plugin whose run.command serves the broken `mode`."""
    folder = tmp_path / mode
    shutil.copytree(PLUGINS / "notes", folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = yaml.safe_load((folder / "mnemon-source.yaml").read_text(encoding="utf-8"))
    manifest["run"]["command"] = [sys.executable, str(BROKEN), mode]
    manifest.update(changes)
    (folder / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return folder


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {check["id"]: check["status"] for check in report["checks"]}


def _codes(report: dict[str, Any], check_id: str) -> set[str]:
    check = next(c for c in report["checks"] if c["id"] == check_id)
    return {issue["code"] for issue in check["issues"]}


async def test_the_python_notes_plugin_is_certified() -> None:
    output = io.BytesIO()
    report = await certify(PLUGINS / "notes", plugin_output=output)
    assert report["certified"] is True, report
    assert set(_statuses(report).values()) == {"pass"}
    invalid = next(c for c in report["checks"] if c["id"] == "invalid_request")
    for probe in ("no_caller_secret", "foreign_host", "text_plain_body", "invalid_input_mutate"):
        assert probe in invalid["note"]
    assert [c["id"] for c in report["checks"]] == list(CHECKS)
    report_validator().validate(report)
    assert report["target"]["mode"] == "launch"
    assert report["plugin"]["manifest_digest"].startswith("sha256:")


@pytest.mark.parametrize(
    ("mode", "changes", "code"),
    [
        ("manifest", {"id": "Not_A_Valid_Id"}, "schema_violation"),
        (
            "compatibility",
            {"compatibility": {"mnemon": ">=0.1.0", "plugin_api": ">=9.0.0"}},
            "incompatible_plugin_api",
        ),
        ("health", {}, "unhealthy"),
        ("discovery", {}, "discovery_mismatch"),
        ("invoke", {}, "invalid_output"),
        ("replay", {}, "nondeterministic_output"),
        ("invalid_request", {}, "wrong_error_class"),
        ("credentials", {}, "credential_leak"),
        ("isolation", {}, "scope_leak"),
    ],
)
async def test_a_broken_plugin_fails_exactly_its_check(
    tmp_path: Path, mode: str, changes: dict[str, Any], code: str
) -> None:
    report = await certify(_plugin(tmp_path, mode, **changes), plugin_output=io.BytesIO())
    statuses = _statuses(report)
    assert report["certified"] is False
    assert [c for c, s in statuses.items() if s == "fail"] == [mode], statuses
    assert code in _codes(report, mode)
    report_validator().validate(report)


async def test_an_invalid_fixture_fails_the_fixtures_check(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    shutil.copytree(PLUGINS / "notes", folder, ignore=shutil.ignore_patterns("__pycache__"))
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "name": "bad",
                "scope": {"user_id": "ada"},
                "reads": [{"route": "nowhere", "input": {}}],
            }
        )
    )
    report = await certify(folder, fixtures=[bad], plugin_output=io.BytesIO())
    statuses = _statuses(report)
    assert [c for c, s in statuses.items() if s == "fail"] == ["fixtures"], statuses
    assert _codes(report, "fixtures") == {"invalid_fixture"}


async def test_a_plugin_that_lets_strangers_in_is_not_certified(tmp_path: Path) -> None:
    """Another local process or a web page must not reach the Source: the runner tries."""
    report = await certify(_plugin(tmp_path, "unprotected"), plugin_output=io.BytesIO())
    assert report["certified"] is False
    check = next(c for c in report["checks"] if c["id"] == "invalid_request")
    refused = {issue["path"].split("#")[1] for issue in check["issues"]}
    assert refused == {
        "no_caller_secret",
        "wrong_caller_secret",
        "foreign_host",
        "text_plain_body",
    }, check["issues"]


@pytest.mark.parametrize(
    ("mode", "code"), [("slow", "deadline_exceeded"), ("wrong_shape", "invalid_output")]
)
async def test_a_slow_or_malformed_write_fails_its_checks_and_the_report_is_written(
    tmp_path: Path, mode: str, code: str
) -> None:
    """With an isolation probe in the fixture, a defect is a failed check, never a crash."""
    folder = _plugin(tmp_path, mode, timeout_ms=500)  # the slow write takes 2 s
    assert "isolation" in json.loads((folder / "fixtures" / "notes.json").read_text())
    report = await certify(folder, plugin_output=io.BytesIO())
    report_validator().validate(report)
    assert report["certified"] is False
    assert code in _codes(report, "invoke")
    assert _statuses(report)["isolation"] == "fail"


async def test_each_configuration_gets_its_own_plugin_process(tmp_path: Path) -> None:
    """A plugin takes its configuration at start: fixtures that differ in it get their own."""
    folder = tmp_path / "notes"
    shutil.copytree(PLUGINS / "notes", folder, ignore=shutil.ignore_patterns("__pycache__"))
    files = [tmp_path / "first.md", tmp_path / "second.md"]
    for index, notes_file in enumerate(files):
        fixture = {
            "name": f"fixture-{index}",
            "scope": {"user_id": "ada"},
            "configuration": {"path": str(notes_file)},
            "writes": [{"action": "add", "input": {"text": f"written by fixture {index}"}}],
            "reads": [
                {"route": "read", "input": {}, "expect_contains": [f"written by fixture {index}"]}
            ],
        }
        (folder / "fixtures" / f"f{index}.json").write_text(json.dumps(fixture))
    report = await certify(folder, plugin_output=io.BytesIO())
    assert report["certified"] is True, report
    assert files[0].read_text(encoding="utf-8") == "- written by fixture 0\n"
    assert files[1].read_text(encoding="utf-8") == "- written by fixture 1\n"


async def test_an_answer_past_max_response_bytes_is_read_no_further(tmp_path: Path) -> None:
    report = await certify(_plugin(tmp_path, "flood"), plugin_output=io.BytesIO())
    assert report["certified"] is False
    assert _codes(report, "discovery") == {"response_too_large"}


async def test_a_discovery_answer_breaking_its_schema_names_the_place_and_the_key(
    tmp_path: Path,
) -> None:
    report = await certify(_plugin(tmp_path, "discovery_shape"), plugin_output=io.BytesIO())
    check = next(c for c in report["checks"] if c["id"] == "discovery")
    assert check["status"] == "fail"
    (issue,) = check["issues"]
    assert issue["code"] == "schema_violation"
    assert issue["message"] == "the answer at /plugin: unexpected property 'leak'"
    assert "SECRET" not in json.dumps(report)
