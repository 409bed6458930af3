"""`mnemon plugin dev` on Quivr plugins: Quivr's local-development convention, from the outside.

The reference ranker and ingestion plugin (stdlib servers written from the protocol text) are
launched by the run convention on loopback. A fixture run exits 0 or 1 with the checks `mnemon
plugin test` uses; without one, the plugin keeps running and restarts when its folder changes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import mnemon_strategy_quivr
import pytest
from launched import edit_manifest, embedder_folder, ended_within, kill, ranker_folder, recorded
from mnemon_strategy_quivr import open_development

click_testing = pytest.importorskip("click.testing")
mnemon_remote = pytest.importorskip("mnemon_remote")
from mnemon._cli._commands import cli  # noqa: E402 (the command needs the cli extra)

# the normative fixture the installed package ships (a wheel's copy, not the source tree's)
NEWSROOM = Path(mnemon_strategy_quivr.__file__).parent / "contracts" / "retrieval" / "newsroom.json"
MORNINGS = Path(__file__).parent / "embedders" / "fixtures" / "mornings.json"


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # run.command is `python3 ...`: the interpreter of the tests
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


def dev(*arguments: str) -> tuple[int, str]:
    result = click_testing.CliRunner().invoke(cli, ["plugin", "dev", *arguments])
    return result.exit_code, result.output


def test_a_ranker_replays_a_fixture_and_prints_its_ranking(tmp_path: Path) -> None:
    manifest = ranker_folder(tmp_path / "ranker")
    # the manifest named by its file, under another name: dev judges it by its content
    renamed = manifest.with_name("ranker.yaml")
    manifest.rename(renamed)
    status, output = dev("--fixture", str(NEWSROOM), str(renamed))
    assert status == 0, output
    lines = output.splitlines()
    for check in ("manifest", "compatibility", "health", "discovery", "fixtures", "replay"):
        assert any(line.startswith(f"  ok   {check}:") for line in lines), output
    assert sum(line.startswith("  ok   invoke: profile") for line in lines) == 2
    assert lines[-1] == "every check passed"
    answer = json.loads(output[output.index("[\n") : output.rindex("]") + 1])
    assert [entry["profile"] for entry in answer] == ["default", "hasty"]
    assert [hit["segment_id"] for hit in answer[0]["ranking"]["hits"]] == [
        "seg_harbour",
        "seg_ferry",
        "seg_rail",
    ]


def test_an_ingestion_plugin_replays_its_fixture_signed(tmp_path: Path) -> None:
    # the embedder verifies every request's signature with its per-launch key
    folder = embedder_folder(tmp_path / "embedder").parent
    status, output = dev("--fixture", str(MORNINGS), str(folder))
    assert status == 0, output
    assert "  ok   invoke: segment_and_embed answers within" in output
    assert "  ok   embed_query:" in output
    answer = json.loads(output[output.index("{\n") : output.rindex("}") + 1])
    assert [s["part_key"] for s in answer["segments"]] == ["title", "body", "body"]


@pytest.mark.parametrize(
    ("mode", "failed", "code"),
    [
        ("duplicate_hit", "invoke", "duplicate_hit"),
        ("wrong_digest", "discovery", "discovery_mismatch at /manifest_digest"),
        ("unhealthy", "health", "unhealthy at /v0/health"),
    ],
)
def test_a_broken_ranker_exits_1_with_the_reason(
    tmp_path: Path, mode: str, failed: str, code: str
) -> None:
    folder = ranker_folder(tmp_path / "ranker", "--mode", mode).parent
    status, output = dev("--startup-timeout", "1", "--fixture", str(NEWSROOM), str(folder))
    assert status == 1
    assert f"  FAIL {failed}:" in output
    assert code in output
    assert output.splitlines()[-1] == "a check failed"


def test_an_invalid_manifest_is_never_launched(tmp_path: Path) -> None:
    folder = ranker_folder(tmp_path / "ranker").parent
    edit_manifest(folder, lambda manifest: manifest.update(unexpected_key=True))
    status, output = dev("--fixture", str(NEWSROOM), str(folder))
    assert status == 1
    assert "  FAIL manifest:" in output
    assert "schema_violation at /" in output
    assert "health" not in output


def test_a_fixture_of_no_hosted_contribution_is_refused(tmp_path: Path) -> None:
    folder = ranker_folder(tmp_path / "ranker").parent
    status, output = dev("--fixture", str(MORNINGS), str(folder))
    assert status == 1
    assert "not a fixture of a Contribution mnemon hosts in this plugin (retrieval)" in output


class Report:
    """The lines `develop` echoes, and a way to wait for one of them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._added = anyio.Event()

    def echo(self, line: str) -> None:
        self.lines.append(line)
        self._added.set()

    async def until(self, start: str, count: int = 1) -> None:
        while sum(line.startswith(start) for line in self.lines) < count:
            self._added = anyio.Event()
            await self._added.wait()


async def test_a_change_in_the_folder_restarts_the_plugin(tmp_path: Path) -> None:
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--record", str(started), "--with-child")
    folder = manifest.parent
    report = Report()
    session = open_development(folder, startup_timeout=5.0)
    first = second = None
    try:
        with anyio.fail_after(30):  # a bound on a hung test, not a timing assertion
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: mnemon_remote.develop(
                        session, folder, poll_interval=0.05, echo=report.echo
                    )
                )
                await report.until("watching")
                first = recorded(started)
                (folder / "notes.txt").write_text("changed", encoding="utf-8")
                await report.until("watching", count=2)
                second = recorded(started)
                group.cancel_scope.cancel()
    finally:
        kill(None if first is None else first["child"])
        kill(None if second is None else second["child"])
    assert "changed: notes.txt; restarting the plugin" in report.lines
    assert sum(line.startswith("  ok   discovery:") for line in report.lines) == 2
    # a fresh launch: a new signing key, and the first launch's whole group is gone
    assert first is not None
    assert second is not None
    assert first["environment"]["QUIVR_PLUGIN_TOKEN"] != second["environment"]["QUIVR_PLUGIN_TOKEN"]
    assert first["environment"]["QUIVR_PLUGIN_HOST"] == "127.0.0.1"
    assert first["environment"]["QUIVR_PLUGIN_MANIFEST"] == str(manifest.resolve())
    assert ended_within(first["child"], 5.0)
    # cancelling the session stopped the running plugin the same way
    assert ended_within(second["child"], 5.0)


def test_a_run_command_that_cannot_start_is_named(tmp_path: Path) -> None:
    folder = ranker_folder(tmp_path / "ranker").parent
    edit_manifest(folder, lambda manifest: manifest["run"].update(command=["no-such-program-x"]))
    status, output = dev("--startup-timeout", "1", "--fixture", str(NEWSROOM), str(folder))
    assert status == 1
    assert "  FAIL health:" in output
    assert "the plugin's run.command cannot be started" in output
