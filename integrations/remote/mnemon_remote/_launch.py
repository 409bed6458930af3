"""The run convention: start a plugin's `run.command` on a loopback port, stop it cleanly.

The process runs in the manifest's folder and its own process group, with
`MNEMON_PLUGIN_HOST=127.0.0.1`, `MNEMON_PLUGIN_PORT` and `MNEMON_PLUGIN_MANIFEST`, plus the
secrets the host was given, by their declared names. It is stopped with SIGTERM to the group,
then SIGKILL after 5 seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import anyio
import httpx

from mnemon import MnemonError

from ._wire import HEALTH

__all__ = ["LaunchedPlugin", "PluginUnavailable", "launch_plugin"]

STOP_GRACE_SECONDS = 5.0


class PluginUnavailable(MnemonError):
    """The plugin could not be started or reached, or answered without a valid envelope."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LaunchedPlugin:
    """A plugin process started from `run.command`, in its own process group."""

    def __init__(self, process: subprocess.Popen[bytes], endpoint: str) -> None:
        self.process = process
        self.endpoint = endpoint

    @property
    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.process.poll() is None

    async def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM the process group, then SIGKILL after `grace_seconds`."""
        group = self.process.pid  # start_new_session: the group id is the leader's pid
        with anyio.CancelScope(shield=True):
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGTERM)
                try:
                    await anyio.to_thread.run_sync(self.process.wait, grace_seconds)
                except subprocess.TimeoutExpired:
                    os.killpg(group, signal.SIGKILL)
                    await anyio.to_thread.run_sync(self.process.wait)
            # the process's own children may outlive it: the group goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


def _absolute(path: Path) -> Path:
    # the plugin runs in the manifest's folder: a relative path would name the wrong file
    return path.resolve()


async def _answers(client: httpx.AsyncClient) -> bool:
    # any HTTP answer proves the server listens; judging health is the runner's job
    try:
        await client.get(HEALTH)
    except httpx.HTTPError:
        return False
    return True


async def launch_plugin(
    manifest_path: Path,
    command: list[str],
    *,
    secrets: Mapping[str, str] | None = None,
    startup_timeout: float = 10.0,
    stdout: IO[bytes] | int | None = None,
    stderr: IO[bytes] | int | None = None,
) -> LaunchedPlugin:
    """Start `command` on a free loopback port and wait until it answers HTTP.

    Raises:
        PluginUnavailable: the process exits, or does not answer within `startup_timeout`.
    """
    port = _free_port()
    manifest = _absolute(manifest_path)
    environment = {
        **os.environ,
        **(secrets or {}),
        "MNEMON_PLUGIN_HOST": "127.0.0.1",
        "MNEMON_PLUGIN_PORT": str(port),
        "MNEMON_PLUGIN_MANIFEST": str(manifest),
    }
    # Popen only forks and returns; the wait for an answer below is asynchronous
    process = subprocess.Popen(  # noqa: ASYNC220
        command,
        cwd=manifest.parent,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )
    launched = LaunchedPlugin(process, f"http://127.0.0.1:{port}")
    async with httpx.AsyncClient(base_url=launched.endpoint, timeout=1.0) as probe:
        with anyio.move_on_after(startup_timeout):
            while process.poll() is None:
                if await _answers(probe):
                    return launched
                await anyio.sleep(0.02)
    await launched.stop()
    raise PluginUnavailable("the plugin did not start answering HTTP")
