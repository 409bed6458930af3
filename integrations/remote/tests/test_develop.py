"""`mnemon plugin dev` on remote Sources: launched, checked, replayed, restarted on change."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import yaml
from click.testing import CliRunner
from mnemon_remote import develop, folder_state, open_remote_development

from mnemon._cli._commands import cli

PLUGINS = Path(__file__).parent / "plugins"
NOTES = PLUGINS / "notes"


def dev(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["plugin", "dev", *arguments])
    return result.exit_code, result.output


def _copy(tmp_path: Path, *command: str) -> Path:
    folder = tmp_path / "notes"
    shutil.copytree(NOTES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    if command:
        manifest = yaml.safe_load((folder / "mnemon-source.yaml").read_text(encoding="utf-8"))
        manifest["run"]["command"] = list(command)
        (folder / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return folder


def test_a_fixture_is_replayed_and_its_answers_printed() -> None:
    status, output = dev("--fixture", str(NOTES / "fixtures" / "notes.json"), str(NOTES))
    assert status == 0, output
    for check in ("manifest", "compatibility", "health", "discovery", "fixtures", "invoke"):
        assert f"  ok   {check}:" in output
    answers = json.loads(output[output.index("[\n") : output.rindex("]") + 1])
    assert answers[0]["write"] == "add"
    assert answers[0]["receipt"]["completion"] == "committed"
    assert answers[1]["read"] == "read"
    assert answers[1]["evidence"]["items"][0]["text"] == "- Ada prefers tea.\n"
    assert output.splitlines()[-1] == "every check passed"


def test_a_plugin_whose_discovery_disagrees_exits_1(tmp_path: Path) -> None:
    broken = str(PLUGINS / "broken" / "serve_broken.py")
    folder = _copy(tmp_path, sys.executable, broken, "discovery")
    status, output = dev("--fixture", str(folder / "fixtures" / "notes.json"), str(folder))
    assert status == 1
    assert "  FAIL discovery:" in output
    assert "discovery_mismatch" in output
    assert output.splitlines()[-1] == "a check failed"


def test_a_fixture_the_manifest_refuses_is_named(tmp_path: Path) -> None:
    fixture = tmp_path / "bad.json"
    fixture.write_text(
        json.dumps(
            {"name": "bad", "scope": {"user_id": "ada"}, "reads": [{"route": "nope", "input": {}}]}
        ),
        encoding="utf-8",
    )
    status, output = dev("--fixture", str(fixture), str(NOTES))
    assert status == 1
    assert "  FAIL fixtures:" in output
    assert "invalid_fixture at bad.json: reads: 'nope' is not declared by the manifest" in output


class Report:
    """The lines `develop` echoes, and a way to wait for one of them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._added = anyio.Event()

    def echo(self, line: str) -> None:
        self.lines.append(line)
        self._added.set()

    async def until(self, start: str, count: int) -> None:
        while sum(line.startswith(start) for line in self.lines) < count:
            self._added = anyio.Event()
            await self._added.wait()


def _ended(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


async def test_a_change_restarts_the_source_and_stopping_ends_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    folder = _copy(tmp_path, sys.executable, "serve_notes.py", str(pid_file))
    report = Report()
    session = open_remote_development(folder, startup_timeout=10.0)
    with anyio.fail_after(30):  # a bound on a hung test, not a timing assertion
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: develop(session, folder, poll_interval=0.05, echo=report.echo))
            await report.until("watching", 1)
            first = int(pid_file.read_text(encoding="utf-8"))
            (folder / "fixtures" / "more.json").write_text("{}", encoding="utf-8")
            await report.until("watching", 2)
            second = int(pid_file.read_text(encoding="utf-8"))
            group.cancel_scope.cancel()
    assert "changed: fixtures/more.json; restarting the plugin" in report.lines
    assert first != second
    # the first by the restart, the second when the session was cancelled
    assert _ended(first)
    assert _ended(second)


def test_hidden_folders_caches_environments_and_build_outputs_are_not_watched(
    tmp_path: Path,
) -> None:
    watched = ["mnemon-source.yaml", "src/server.py", "fixtures/a.json"]
    ignored = [
        ".git/HEAD",
        "__pycache__/server.cpython-311.pyc",
        "src/__pycache__/x.pyc",
        "node_modules/pkg/index.js",
        "build/lib/server.py",
        "dist/server.whl",
        "target/debug/server",
        "server.egg-info/PKG-INFO",
        "env1/pyvenv.cfg",  # a virtual environment, whatever its name
        "env1/lib/site.py",
    ]
    for name in watched + ignored:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    assert sorted(folder_state(tmp_path)) == sorted(watched)
