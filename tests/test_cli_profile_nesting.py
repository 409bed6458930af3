"""The `mnemon` command given a profile nested too deeply: one error line, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import mnemon

DEEP = "surprise = " + "[" * 3_000 + "]" * 3_000 + "\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deep")
    (folder / "mnemon.toml").write_text(DEEP, encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "arguments",
    [("inspect",), ("view",), ("list",), ("recall", "tea"), ("remember", "tea")],
    ids=["inspect", "view", "list", "recall", "remember"],
)
def test_a_deeply_nested_profile_is_one_error_line(folder: Path, arguments: tuple[str]) -> None:
    result = mnemon(folder, *arguments, "--user", "ada")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "RecursionError" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: mnemon.toml: ")
    assert "at most 48 levels" in lines[0]
    assert "[[" not in lines[0]


def test_a_deeply_nested_profile_is_one_json_error(folder: Path) -> None:
    result = mnemon(folder, "inspect", "--json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["message"].startswith("mnemon.toml: ")
    assert "at most 48 levels" in error["message"]


@pytest.mark.parametrize("body", [DEEP, "[strategy\n"], ids=["too-deep", "not-toml"])
def test_mnemon_plugins_with_a_broken_profile_is_one_error_line(tmp_path: Path, body: str) -> None:
    (tmp_path / "mnemon.toml").write_text(body, encoding="utf-8")
    result = mnemon(tmp_path, "plugins")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: mnemon.toml")
