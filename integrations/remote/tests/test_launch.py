"""The out-of-process kit's launcher: a minimal environment, a caller secret, no orphans."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_remote import MNEMON_RUN, PluginUnavailable, RunConvention, launch_plugin
from mnemon_remote import _launch as launch_module

# a plugin that writes what it sees to argv[1], starts a child that would outlive it (its pid
# in argv[2]), then answers every HTTP request until it is stopped
PLUGIN = """
import http.server, json, os, subprocess, sys
with open(sys.argv[1], "w") as seen:
    json.dump(dict(os.environ), seen)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[2], "w") as pid:
    pid.write(str(child.pid))
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *args):
        pass
class Server(http.server.HTTPServer):
    def handle_error(self, request, client_address):
        pass  # a prober that hangs up after the status line is no error
address = (os.environ["{prefix}_HOST"], int(os.environ["{prefix}_PORT"]))
Server(address, Answer).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is gone as far as work goes
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


async def _launch(
    tmp_path: Path, convention: RunConvention, **options: Any
) -> tuple[dict[str, str], int, Any]:
    manifest = tmp_path / "plugin.yaml"
    manifest.write_text("{}", encoding="utf-8")
    seen, child = tmp_path / "seen.json", tmp_path / "child.pid"
    script = PLUGIN.replace("{prefix}", convention.prefix)
    launched = await launch_plugin(
        manifest,
        [sys.executable, "-c", script, str(seen), str(child)],
        convention=convention,
        **options,
    )
    for _ in range(1000):  # the plugin answered HTTP: its child's pid follows at once
        if child.exists() and child.read_text():
            break
        await anyio.sleep(0.01)
    return json.loads(seen.read_text()), int(child.read_text()), launched


async def test_a_launched_plugin_sees_only_what_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_TEST_HOST_ONLY_SECRET", "the-hosts-own-api-key")
    secrets = {"PLUGIN_TOKEN": "declared-value-1234", "MNEMON_PLUGIN_PORT": "1"}
    environment, _, launched = await _launch(
        tmp_path, MNEMON_RUN, secrets=secrets, variables={"MNEMON_PLUGIN_CONFIGURATION": "{}"}
    )
    try:
        assert "MNEMON_TEST_HOST_ONLY_SECRET" not in environment
        assert "the-hosts-own-api-key" not in json.dumps(environment)
        assert environment["PLUGIN_TOKEN"] == "declared-value-1234"
        # the run convention's variables win over a secret named like one of them
        assert environment["MNEMON_PLUGIN_PORT"] == launched.endpoint.rsplit(":", 1)[1]
        assert environment["MNEMON_PLUGIN_MANIFEST"] == str((tmp_path / "plugin.yaml").resolve())
        assert environment["MNEMON_PLUGIN_CONFIGURATION"] == "{}"
        assert environment["PATH"] == os.environ["PATH"]
        # a fresh caller secret per launch, which every request of the host carries
        assert launched.token is not None
        assert len(launched.token) >= 32
        assert environment["MNEMON_PLUGIN_TOKEN"] == launched.token
        assert launched.headers == {"Authorization": f"Bearer {launched.token}"}
        extra = set(environment) - {
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "LC_CTYPE",
            "LOGNAME",
            "SHELL",
            "TERM",
            "TMPDIR",
            "TZ",
            "USER",
            "PLUGIN_TOKEN",
            "MNEMON_PLUGIN_HOST",
            "MNEMON_PLUGIN_PORT",
            "MNEMON_PLUGIN_MANIFEST",
            "MNEMON_PLUGIN_TOKEN",
            "MNEMON_PLUGIN_CONFIGURATION",
        }
        # what a launched interpreter sets itself (e.g. LC_CTYPE coercion) is all that is left
        assert extra <= {"LC_CTYPE"}, extra
    finally:
        await launched.stop()


async def test_two_launches_get_different_caller_secrets(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = await _launch(tmp_path / "a", MNEMON_RUN)
    second = await _launch(tmp_path / "b", MNEMON_RUN)
    try:
        assert first[2].token != second[2].token
    finally:
        await first[2].stop()
        await second[2].stop()


async def test_a_protocol_without_caller_secrets_gets_none(tmp_path: Path) -> None:
    environment, _, launched = await _launch(tmp_path, RunConvention("QUIVR_PLUGIN", token=False))
    try:
        assert launched.token is None
        assert launched.headers == {}
        assert not [name for name in environment if name.endswith("_TOKEN")]
        assert environment["QUIVR_PLUGIN_HOST"] == "127.0.0.1"
    finally:
        await launched.stop()


async def test_a_protocol_that_signs_gets_a_key_that_no_request_carries(tmp_path: Path) -> None:
    convention = RunConvention("QUIVR_PLUGIN", bearer=False)
    environment, _, launched = await _launch(tmp_path, convention)
    try:
        assert launched.token is not None
        assert environment["QUIVR_PLUGIN_TOKEN"] == launched.token
        # the caller signs each request with it instead: the key itself never travels
        assert launched.headers == {}
    finally:
        await launched.stop()


async def test_stopping_a_plugin_stops_its_children(tmp_path: Path) -> None:
    _, child, launched = await _launch(tmp_path, MNEMON_RUN)
    assert _alive(child)
    await launched.stop(grace_seconds=2)
    assert not launched.running
    for _ in range(200):  # SIGKILL is delivered at once; the child's parent reaps it
        if not _alive(child):
            break
        await anyio.sleep(0.01)
    assert not _alive(child)


async def test_a_launch_the_caller_gives_up_on_leaves_no_process(tmp_path: Path) -> None:
    manifest = tmp_path / "plugin.yaml"
    manifest.write_text("{}", encoding="utf-8")
    seen, child = tmp_path / "seen.json", tmp_path / "child.pid"
    script = PLUGIN.replace("{prefix}", "QUIVR_PLUGIN")

    async def never_ready(client: Any) -> bool:
        return False

    async with anyio.create_task_group() as group:

        async def launch() -> None:
            await launch_plugin(
                manifest,
                [sys.executable, "-c", script, str(seen), str(child)],
                convention=RunConvention("QUIVR_PLUGIN", token=False),
                ready=never_ready,
                startup_timeout=60,
            )

        group.start_soon(launch)
        for _ in range(1000):  # the plugin runs and has started its child
            if child.exists() and child.read_text():
                break
            await anyio.sleep(0.01)
        # the caller's own deadline, a cancelled turn: it stops waiting for the plugin
        group.cancel_scope.cancel()
    pid = int(child.read_text())
    for _ in range(200):
        if not _alive(pid):
            break
        await anyio.sleep(0.01)
    assert not _alive(pid), "a plugin whose launch was given up on kept running"


def _plugin(tmp_path: Path, script: str) -> tuple[Path, list[str]]:
    manifest = tmp_path / "plugin.yaml"
    manifest.write_text("{}", encoding="utf-8")
    return manifest, [sys.executable, "-c", script]


async def test_a_plugin_that_exits_before_it_is_ready_is_named_by_its_exit_status(
    tmp_path: Path,
) -> None:
    manifest, command = _plugin(tmp_path, "import sys; sys.exit(3)")
    with pytest.raises(PluginUnavailable, match=r"exited with code 3 before it was ready"):
        await launch_plugin(manifest, command)
    manifest, command = _plugin(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(PluginUnavailable, match=r"was ended by signal 9 before it was ready"):
        await launch_plugin(manifest, command)


async def test_a_plugin_that_never_listens_is_given_up_on_after_the_startup_timeout(
    tmp_path: Path,
) -> None:
    manifest, command = _plugin(tmp_path, "import time; time.sleep(60)")
    with pytest.raises(PluginUnavailable, match=r"was not ready within 0.3 s"):
        await launch_plugin(manifest, command, startup_timeout=0.3)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another process's server holds (a listening socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


async def test_a_port_taken_before_the_plugin_listens_is_replaced_by_another(
    tmp_path: Path, held_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the race made certain: the free port chosen is bound by another process at once
    chosen = iter([held_port])
    free_port = launch_module._free_port
    monkeypatch.setattr(launch_module, "_free_port", lambda: next(chosen, None) or free_port())
    started = tmp_path / "starts"
    script = PLUGIN.replace("{prefix}", "MNEMON_PLUGIN")
    script = f"open({str(started)!r}, 'a').write('start\\n')\n{script}"
    manifest, command = _plugin(tmp_path, script)
    launched = await launch_plugin(
        manifest, [*command, str(tmp_path / "seen"), str(tmp_path / "c")]
    )
    try:
        assert launched.running
        assert not launched.endpoint.endswith(f":{held_port}")
        # the first process exited on the taken port; the second serves
        assert started.read_text().split() == ["start", "start"]
    finally:
        await launched.stop()


async def test_a_port_the_caller_gave_is_tried_once(tmp_path: Path, held_port: int) -> None:
    script = PLUGIN.replace("{prefix}", "MNEMON_PLUGIN")
    manifest, command = _plugin(tmp_path, script)
    command += [str(tmp_path / "seen"), str(tmp_path / "c")]
    with pytest.raises(PluginUnavailable, match=r"exited with code 1 before it was ready"):
        await launch_plugin(manifest, command, port=held_port)
