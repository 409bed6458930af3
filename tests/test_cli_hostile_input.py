"""The `mnemon` command under hostile input, interruptions and secrets in paths."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_cli import MNEMON, environment, mnemon
from tests.test_cli import start as start_mnemon

PLUGINS = '''\
"""Plugins for the mnemon command's tests: hostile text, accepted writes, a blocked write."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from mnemon import Evidence, MutationReceipt, ReadGrant, SourceError
from mnemon.sdk import (
    FactsRequest,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    define_memory_source,
    install_memory,
)
from mnemon_testing import SelectAll, StubSource

HOSTILE = "tea\\x1b]52;c;ZXZpbA==\\x07 \\x1b]0;owned\\x07\\x1b[2J\\x1b[8mhidden\\rfake\\u202eevil\\x9b"

select_all = SelectAll()
hostile = StubSource(text=HOSTILE, routes=["recall"], actions=["remember"],
                     items=[("m-1", HOSTILE)])
accepting = StubSource(routes=["recall"], actions=["remember"])
MANIFEST = StubSource(type_id="blocking", actions=["remember"]).manifest


class _Writer:
    """Writes never finish (block), or are refused as a reused idempotency key (conflict)."""

    def __init__(self, key, behaviour):
        self.key = key
        self.behaviour = behaviour

    async def facts(self, request):
        return SourceFacts.model_validate({
            "instance_key": self.key, "type_id": "blocking", "role": "notes",
            "availability": "ready", "revision": "1",
            "capabilities": MANIFEST["capabilities"], "route_ids": [],
            "action_ids": ["remember"],
        })

    async def project(self, request):
        return ViewContribution(grant=ReadGrant(source_key=self.key, value="1"))

    async def query(self, request):
        raise AssertionError("no routes")

    async def mutate(self, request):
        if self.behaviour == "conflict":
            raise SourceError("idempotency-conflict", "key used for another memory",
                              nothing_written=True)
        Path(os.environ["MNEMON_TEST_WRITING"]).touch()  # the write has started
        await anyio.sleep_forever()


class _Plugin:
    def __init__(self, behaviour):
        self.definition = define_memory_source(
            MANIFEST, lambda init: _Writer(init.instance_key, behaviour)
        )

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


blocking = _Plugin("block")
conflicting = _Plugin("conflict")
'''


def plugin_profile(folder: Path, source: str, *, source_timeout: float = 30) -> Path:
    """A profile in `folder` mounting one test Source (`cli_test_plugins:<source>`)."""
    (folder / "cli_test_plugins.py").write_text(PLUGINS, encoding="utf-8")
    (folder / "mnemon.toml").write_text(
        f'source_timeout = {source_timeout}\n[strategy]\nuse = "select-all"\n'
        f'[[entries]]\nid = "{source}"\nuse = "cli_test_plugins:{source}"\n'
        '[[entries]]\nid = "select"\nuse = "cli_test_plugins:select_all"\n',
        encoding="utf-8",
    )
    return folder


def with_plugins(
    folder: Path, *arguments: str | bytes, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return mnemon(folder, *arguments, stdin=stdin, PYTHONPATH=str(folder))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hardening")
    assert mnemon(folder, "init", "--embedder", "none").returncode == 0
    return folder


# ------------------------------------------------------------------ honest remember output


@pytest.mark.parametrize(
    "arguments",
    [("list",), ("init",), ("inspect",), ("plugins",), ("demo",), ("new", "source", "x")],
)
def test_a_deleted_current_folder_is_named_not_a_traceback(
    tmp_path: Path, arguments: tuple[str, ...]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    # the shell stays in a folder someone deleted: the command starts there
    script = f"cd {str(gone)!r} && rmdir {str(gone)!r} && exec {MNEMON!r} " + " ".join(arguments)
    result = subprocess.run(
        ["/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        env=environment(tmp_path),
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "the current folder no longer exists" in result.stderr


def test_remember_says_stored_with_the_memory_and_its_space(project: Path) -> None:
    written = mnemon(project, "remember", "Eve bakes bread.", "--user", "eve", "--yes")
    assert written.returncode == 0, written.stderr
    assert "stored: memory " in written.stdout
    assert "in space personal" in written.stdout


def test_a_replayed_write_is_not_called_stored(project: Path) -> None:
    arguments = ("remember", "Eve likes rye.", "--user", "eve", "--key", "eve-rye", "--yes")
    assert "stored: memory " in mnemon(project, *arguments).stdout
    again = mnemon(project, *arguments)
    assert again.returncode == 0, again.stderr
    assert "replayed: nothing new was written; this is memory " in again.stdout
    assert "stored" not in again.stdout


def test_a_refused_write_says_nothing_was_stored(project: Path) -> None:
    refused = mnemon(project, "remember", "bad\x1b[2Jtext", "--user", "eve", "--yes")
    assert refused.returncode == 1
    assert "refused: nothing was stored" in refused.stdout
    assert "stored:" not in refused.stdout
    assert "invalid_payload" in refused.stderr or "invalid-input" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_refusal_shows_its_code_and_failed_receipt(tmp_path: Path) -> None:
    folder = plugin_profile(tmp_path, "conflicting")
    result = with_plugins(folder, "remember", "x", "--key", "k-1", "--yes")
    assert result.returncode == 1
    assert "refused: nothing was stored" in result.stdout
    assert "failed / failed" in result.stdout
    assert result.stderr.startswith("Error: idempotency-conflict: ")
    assert "key used for another memory" not in result.stderr  # the Source's own text


def test_an_accepted_write_is_not_called_durable(tmp_path: Path) -> None:
    result = with_plugins(plugin_profile(tmp_path, "accepting"), "remember", "x", "--yes")
    assert result.returncode == 0, result.stderr
    assert "accepted, not yet confirmed durable" in result.stdout
    assert "stored" not in result.stdout


def test_a_write_that_timed_out_is_unknown(tmp_path: Path) -> None:
    folder = plugin_profile(tmp_path, "blocking", source_timeout=0.05)
    result = mnemon(
        folder, "remember", "x", "--yes",
        PYTHONPATH=str(folder), MNEMON_TEST_WRITING=str(folder / "writing"),
    )  # fmt: skip
    assert result.returncode == 1
    assert "unknown: the write may or may not have been stored; check with recall" in result.stdout
    assert "timeout" in result.stderr


# ------------------------------------------------------------------ Ctrl-C


def start(folder: Path, *arguments: str) -> subprocess.Popen[str]:
    writing = str(folder / "writing")
    return start_mnemon(folder, *arguments, PYTHONPATH=str(folder), MNEMON_TEST_WRITING=writing)


def wait_for(ready: object, process: subprocess.Popen[str]) -> None:
    # polls for a state, not for time: the per-test timeout ends a hang
    while not (ready() if callable(ready) else False):
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)


def test_ctrl_c_during_a_write_says_it_may_or_may_not_be_stored(tmp_path: Path) -> None:
    folder = plugin_profile(tmp_path, "blocking")
    process = start(folder, "remember", "Eve keeps bees.", "--yes")
    wait_for((folder / "writing").exists, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err == "interrupted: the write may or may not have been stored; check with recall\n"
    assert "stored" not in out


def test_ctrl_c_at_the_prompt_says_nothing_was_stored(tmp_path: Path) -> None:
    folder = plugin_profile(tmp_path, "blocking")
    process = start(folder, "remember", "Eve keeps bees.")
    assert process.stdout is not None
    prompt = ""
    while not prompt.endswith("[y/N]: "):
        character = process.stdout.read(1)
        assert character, process.communicate()
        prompt += character
    assert "Write this memory through source:blocking/remember?" in prompt
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err.strip() == "interrupted: nothing was stored"
    assert not (folder / "writing").exists()


# ------------------------------------------------------------------ terminal-safe output


def raw(folder: Path, *arguments: str) -> bytes:
    result = subprocess.run(
        [MNEMON, "--no-color", *arguments],
        cwd=folder,
        capture_output=True,
        timeout=120,
        check=False,
        env=environment(folder, PYTHONPATH=str(folder)),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [text for item in value for text in strings(item)] if isinstance(value, list) else []


@pytest.mark.parametrize(
    "arguments",
    [("recall", "tea"), ("recall", "tea", "--json"), ("view",), ("view", "--json"),
     ("view", "tea")],
    ids=["recall", "recall-json", "view", "view-json", "view-query"],
)  # fmt: skip
def test_memory_text_reaches_the_terminal_escaped(tmp_path: Path, arguments: tuple[str]) -> None:
    out = raw(plugin_profile(tmp_path, "hostile"), *arguments)
    for byte in (b"\x1b", b"\x07", b"\r", "\u202e".encode(), "\x9b".encode()):
        assert byte not in out
    if "--json" in arguments:
        # the same value, escaped: a JSON reader still gets the text exactly
        assert any("\x1b]52;c;ZXZpbA==\x07" in text for text in strings(json.loads(out)))
    else:
        assert b"tea\\x1b]52;c;ZXZpbA==\\x07" in out  # shown, visibly
        assert b"\\u202eevil" in out


# ------------------------------------------------------------------ identity flags


BAD_VALUES = [
    ("--user", "a\tb", "control characters"),
    ("--user", "a\x7fb", "control characters"),
    ("--user", "x" * 301, "at most 300 characters"),
    ("--user", b"\xff", "valid UTF-8"),
    ("--user", "", "must not be empty"),
    ("--agent", "a\tb", "control characters"),
    ("--session", "a\x7fb", "control characters"),
    ("--workspace", "x" * 301, "at most 300 characters"),
    ("--tenant", b"\xff", "valid UTF-8"),
]


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    BAD_VALUES,
    ids=["user-tab", "user-del", "user-too-long", "user-not-utf-8", "user-empty", "agent-tab",
         "session-del", "workspace-too-long", "tenant-not-utf-8"],
)  # fmt: skip
def test_a_bad_identity_flag_is_a_one_line_usage_error(
    project: Path, flag: str, value: str | bytes, rule: str
) -> None:
    result = mnemon(project, "recall", "tea", flag.encode(), value)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"{flag}: must" in result.stderr
    assert rule in result.stderr


# ------------------------------------------------------------------ the demo's folder


def test_the_demo_refuses_its_default_folder_holding_a_profile_of_yours(tmp_path: Path) -> None:
    folder = tmp_path / ".mnemon-demo"
    assert mnemon(tmp_path, "--profile", str(folder / "mnemon.toml"), "init").returncode == 0
    (folder / "data").mkdir()
    refused = mnemon(tmp_path, "demo")
    assert refused.returncode == 1
    assert "./.mnemon-demo is not empty and was not created by `mnemon demo`" in refused.stderr
    assert 'data_dir = ".mnemon"' in (folder / "mnemon.toml").read_text(encoding="utf-8")


def test_the_demo_refuses_a_folder_it_did_not_create(tmp_path: Path) -> None:
    folder = tmp_path / "tok_SECRET123" / "work"
    folder.mkdir(parents=True)
    (folder / "mnemon.toml").write_text("# mine\n", encoding="utf-8")
    (folder / "data").mkdir()
    (folder / "data" / "keep.txt").write_text("keep", encoding="utf-8")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    refused = mnemon(cwd, "demo", "--directory", str(folder))
    assert refused.returncode == 1
    assert "was not created by `mnemon demo`" in refused.stderr
    assert "--force" in refused.stderr
    assert "tok_SECRET123" not in refused.stderr
    assert (folder / "mnemon.toml").read_text(encoding="utf-8") == "# mine\n"
    assert (folder / "data" / "keep.txt").exists()
    forced = mnemon(cwd, "demo", "--directory", str(folder), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "the new memory is recalled" in forced.stdout
    assert "tok_SECRET123" not in forced.stdout + forced.stderr
    assert not (folder / "data" / "keep.txt").exists()


# ------------------------------------------------------------------ paths that carry secrets


def test_inspect_never_shows_a_data_dir_outside_the_profile_folder(tmp_path: Path) -> None:
    secret = tmp_path / "srv" / "tok_SECRET123" / "data"
    project = tmp_path / "project"
    project.mkdir()
    assert mnemon(project, "init", "--embedder", "none").returncode == 0
    profile = project / "mnemon.toml"
    text = profile.read_text(encoding="utf-8")
    profile.write_text(text.replace('data_dir = ".mnemon"', f'data_dir = "{secret}"'), "utf-8")
    for arguments in (("inspect",), ("inspect", "--json")):
        shown = mnemon(project, *arguments)
        assert shown.returncode == 0, shown.stderr
        assert "tok_SECRET123" not in shown.stdout + shown.stderr
    report = json.loads(mnemon(project, "inspect", "--json").stdout)
    assert report["data_dir"] == "<outside the profile folder, not shown>"
    home = mnemon(project, "inspect", "--json", MNEMON_HOME=str(secret.parent))
    assert json.loads(home.stdout)["data_dir"] == "$MNEMON_HOME/data"


def test_profile_errors_and_init_never_show_the_folder(tmp_path: Path) -> None:
    secret = tmp_path / "tok_SECRET123"
    secret.mkdir()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    wrote = mnemon(cwd, "--profile", str(secret / "mnemon.toml"), "init")
    assert wrote.returncode == 0, wrote.stderr
    assert "wrote …/mnemon.toml" in wrote.stdout
    again = mnemon(cwd, "--profile", str(secret / "mnemon.toml"), "init")
    assert "…/mnemon.toml exists" in again.stderr
    (secret / "mnemon.toml").write_text('data_dir = "~no_such_user_x/d"\n', encoding="utf-8")
    bad = mnemon(cwd, "--profile", str(secret / "mnemon.toml"), "inspect")
    assert bad.returncode == 1
    assert "mnemon.toml: data_dir: cannot expand '~'" in bad.stderr
    for shown in (wrote.stdout, again.stderr, bad.stderr):
        assert "tok_SECRET123" not in shown
        assert "no_such_user_x" not in shown
