"""`mnemon new remote-source NAME`: a plugin `mnemon plugin test` certifies as generated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mnemon_remote import certify, remote_source_scaffold

from mnemon._cli._commands import cli

RUFF = Path(sys.executable).parent / "ruff"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plugins")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(cli, ["new", "remote-source", "todo-items"])
    finally:
        os.chdir(previous)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "created remote-source plugin todo-items in todo-items/ (4 files)"
    )
    return folder / "todo-items"


async def test_the_generated_plugin_is_certified(generated: Path) -> None:
    report = await certify(generated, startup_timeout=10.0)
    failed = {c["id"]: c["issues"] for c in report["checks"] if c["status"] != "pass"}
    assert report["certified"] is True, failed
    assert report["summary"] == {"passed": 10, "failed": 0, "skipped": 0}
    assert report["plugin"]["id"] == "todo-items"
    [invoke] = [c for c in report["checks"] if c["id"] == "invoke"]
    assert invoke["fixture"] == "items.json"


def test_the_generated_files_carry_the_name_and_no_placeholder(generated: Path) -> None:
    files = sorted(p.relative_to(generated).as_posix() for p in generated.rglob("*") if p.is_file())
    assert files == ["README.md", "fixtures/items.json", "mnemon-source.yaml", "server.py"]
    manifest = json.loads((generated / "mnemon-source.yaml").read_text(encoding="utf-8"))
    assert (manifest["id"], manifest["source"]["type_id"]) == ("todo-items", "todo-items")
    assert manifest["compatibility"]["mnemon"].startswith(">=")
    assert manifest["run"]["command"] == ["python3", "server.py"]
    for path in generated.rglob("*"):
        if path.is_file():
            assert "__" + "NAME__" not in path.read_text(encoding="utf-8"), path
    # what the command writes is what the scaffold renders, nothing else
    assert sorted(remote_source_scaffold.render("todo-items")) == files


def test_the_generated_server_is_lint_clean(generated: Path) -> None:
    # with the repository's ruff settings: the generated folder has none of its own
    result = subprocess.run(
        [str(RUFF), "check", "--no-cache", str(generated / "server.py")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[3],
    )
    assert result.returncode == 0, result.stdout + result.stderr
