"""`mnemon new quivr-ranker NAME`: a Quivr ranker `mnemon plugin test` certifies as generated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mnemon_strategy_quivr import (
    EngineRequestAuth,
    certify_plugin,
    inspect_manifest,
    launch_plugin,
    quivr_ranker_scaffold,
)
from quivr_fixtures import load

click_testing = pytest.importorskip("click.testing")
from mnemon._cli._commands import cli  # noqa: E402 (the command needs the cli extra)

RUFF = Path(sys.executable).parent / "ruff"
SEARCH = "/v0/contributions/retrieval/search"


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # run.command is `python3 ranker.py`: the interpreter of the tests
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plugins")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        result = click_testing.CliRunner().invoke(cli, ["new", "quivr-ranker", "tea-ranker"])
    finally:
        os.chdir(previous)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "created quivr-ranker plugin tea-ranker in tea-ranker/ (4 files)",
        "next:",
        "  cd tea-ranker",
        "  mnemon plugin dev --fixture fixtures/tea.json .",
        "  mnemon plugin test .",
    ]
    return folder / "tea-ranker"


async def test_the_generated_ranker_is_certified(generated: Path) -> None:
    report = await certify_plugin(generated, startup_timeout=10.0)
    failed = {c["id"]: c["issues"] for c in report["checks"] if c["status"] == "fail"}
    assert report["certified"] is True, failed
    # every check but credentials, skipped: the manifest declares no secret
    assert report["summary"] == {"passed": 14, "failed": 0, "skipped": 1}
    [skipped] = [c for c in report["checks"] if c["status"] == "skip"]
    assert skipped["id"] == "credentials"
    # Quivr's normative newsroom.json and the plugin's own fixture, with what it expects on top
    invoked = {c["fixture"] for c in report["checks"] if c["id"] == "invoke"}
    assert invoked == {"contracts:retrieval/newsroom.json", "fixtures/tea.json"}


async def test_the_generated_ranker_refuses_an_unsigned_search(generated: Path) -> None:
    path = generated / "quivr-plugin.yaml"
    report = inspect_manifest(path)
    request = load("requests/retrieval/search-round-1.json")
    request["profile"] = "default"
    launched = await launch_plugin(path, report, startup_timeout=10.0)
    try:
        assert launched.token is not None
        key = launched.token.encode("ascii")
        signed = EngineRequestAuth(key, plugin_id="tea-ranker", clock=time.time)
        async with httpx.AsyncClient(base_url=launched.endpoint) as client:
            unsigned = await client.post(SEARCH, json=request)
            forged = await client.post(
                SEARCH,
                json=request,
                auth=EngineRequestAuth(b"not-the-key", plugin_id="tea-ranker", clock=time.time),
            )
            accepted = await client.post(SEARCH, json=request, auth=signed)
    finally:
        await launched.stop()
    for refused in (unsigned, forged):
        assert refused.status_code == 401
        assert refused.json() == {
            "code": "invalid_engine_token",
            "message": "engine request authentication failed",
            "retryable": False,
        }
    assert accepted.status_code == 200
    assert accepted.json()["requests"][0]["primitive"] == "bm25"


def test_the_generated_files_carry_the_name_and_no_placeholder(generated: Path) -> None:
    files = sorted(p.relative_to(generated).as_posix() for p in generated.rglob("*") if p.is_file())
    assert files == ["README.md", "fixtures/tea.json", "quivr-plugin.yaml", "ranker.py"]
    assert sorted(quivr_ranker_scaffold.render("tea-ranker")) == files
    assert json.loads((generated / "quivr-plugin.yaml").read_text(encoding="utf-8"))["id"] == (
        "tea-ranker"
    )
    for path in generated.rglob("*"):
        if path.is_file():
            assert "__" + "NAME__" not in path.read_text(encoding="utf-8"), path


def test_the_generated_ranker_is_lint_clean(generated: Path) -> None:
    # with the repository's ruff settings: the generated folder has none of its own
    result = subprocess.run(
        [str(RUFF), "check", "--no-cache", str(generated / "ranker.py")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parents[3],
    )
    assert result.returncode == 0, result.stdout + result.stderr
