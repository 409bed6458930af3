"""The run convention: start a plugin's `run.command` on a loopback port, stop it cleanly.

One launcher for every out-of-process plugin mnemon hosts (remote Sources, Quivr plugins):

- the process runs in the manifest's folder (its path resolved once), in its own process group;
- its environment is minimal: a few harmless variables of the host's (`PATH`, `HOME`, the
  locale, ...), the secrets the host was given for it by their declared names, then the
  protocol's own variables, which no secret can override;
- it gets a fresh caller secret (the per-launch token) when its protocol authenticates callers,
  and every request the host sends carries it, or a signature made with it;
- stopping it sends SIGTERM to the whole group, SIGKILL after 5 seconds, and SIGKILL to what is
  left of the group in any case: a plugin's own children never outlive it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets as _secrets
import signal
import socket
import subprocess
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import anyio
import httpx

from mnemon.sdk import MnemonError, visible_text

_log = logging.getLogger("mnemon.remote")

__all__ = [
    "CONFIGURATION_VARIABLE",
    "INHERITED_VARIABLES",
    "MNEMON_RUN",
    "LaunchedPlugin",
    "PluginUnavailable",
    "RunConvention",
    "launch_plugin",
    "plugin_environment",
]

STOP_GRACE_SECONDS = 5.0
#: how many free ports a launch tries when another process takes the one chosen
PORT_ATTEMPTS = 3
#: what a launched plugin inherits from the host's environment; nothing else of it (the MCP
#: SDK's stdio client keeps the same few): a host's API keys and tokens stay the host's
INHERITED_VARIABLES = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
)


class PluginUnavailable(MnemonError):
    """The plugin could not be started or reached, or answered without a valid envelope."""


@dataclass(frozen=True)
class RunConvention:
    """How one protocol launches its plugins: its variables, and its caller secret.

    Args:
        prefix: the variables are `<prefix>_HOST`, `<prefix>_PORT` and `<prefix>_MANIFEST`.
        token: whether the plugin gets a per-launch caller secret in `<prefix>_TOKEN`.
        health: the path probed while the plugin starts.
        bearer: whether every request carries the caller secret itself, as `Authorization:
            Bearer <token>`; false when the protocol proves each request another way with it
            (Quivr's signed engine requests: a key that never travels is never overheard).
    """

    prefix: str
    token: bool = True
    health: str = "/v0/health"
    bearer: bool = True

    @property
    def token_variable(self) -> str:
        """The variable holding the caller secret."""
        return f"{self.prefix}_TOKEN"


#: mnemon's remote plugin protocol: `MNEMON_PLUGIN_*`, with a caller secret
MNEMON_RUN = RunConvention("MNEMON_PLUGIN")
#: where mnemon's protocol hands a launched plugin its configuration (JSON): the only place
CONFIGURATION_VARIABLE = "MNEMON_PLUGIN_CONFIGURATION"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def plugin_environment(
    protocol: Mapping[str, str], secrets: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The whole environment of a launched plugin.

    The inherited variables first, then the secrets by their declared names, then the
    protocol's variables: a secret named like a protocol variable never replaces it.
    """
    environment = {name: os.environ[name] for name in INHERITED_VARIABLES if name in os.environ}
    environment.update(secrets or {})
    environment.update(protocol)
    return environment


class LaunchedPlugin:
    """A plugin process started from `run.command`, in its own process group.

    Attributes:
        endpoint: the base URL it serves on (`http://127.0.0.1:<port>`).
        token: the caller secret it was given, or None when its protocol has none.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        endpoint: str,
        token: str | None = None,
        *,
        bearer: bool = True,
    ) -> None:
        self.process = process
        self.endpoint = endpoint
        self.token = token
        self._bearer = bearer

    @property
    def headers(self) -> dict[str, str]:
        """The headers that authenticate a request to this plugin.

        None without a token, and none when the protocol proves requests with it otherwise
        (`RunConvention.bearer`): the caller then signs each request with `token`.
        """
        if self.token is None or not self._bearer:
            return {}
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.process.poll() is None

    async def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM the process group, SIGKILL after `grace_seconds`; then kill what is left."""
        group = self.process.pid  # start_new_session: the group id is the leader's pid
        with anyio.CancelScope(shield=True):
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGTERM)
                try:
                    await anyio.to_thread.run_sync(self.process.wait, grace_seconds)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(group, signal.SIGKILL)
                    await anyio.to_thread.run_sync(self.process.wait)
            # the process's own children may outlive it: the group goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


#: the longest line of a plugin's output logged as it is; the rest is cut
MAX_LOGGED_LINE = 2_000
_LOGGER_PART = re.compile(r"[^A-Za-z0-9_-]+")


def _log_output(process: subprocess.Popen[bytes], folder: str) -> None:
    """Log what the plugin prints, line by line at DEBUG, until its output closes.

    A thread of its own reads the pipe, so a plugin that prints a lot never blocks on a full
    pipe and the event loop never waits on it. DEBUG only: a plugin's output is untrusted and
    may quote memory or secrets, which INFO and above never carry.
    """
    logger = logging.getLogger(f"mnemon.plugins.{_LOGGER_PART.sub('_', folder) or 'plugin'}")
    pipe = process.stdout
    assert pipe is not None  # a PIPE was asked for

    def read() -> None:
        with pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if len(line) > MAX_LOGGED_LINE:
                    line = line[:MAX_LOGGED_LINE] + " [cut]"
                logger.debug("%s", visible_text(line, keep_newlines=False))

    threading.Thread(target=read, name=f"{logger.name} output", daemon=True).start()


async def answers_http(client: httpx.AsyncClient, path: str) -> bool:
    """Whether anything answers HTTP at `path` (any status): the server listens.

    Only the status line and headers are read: a body, however long, is not waited for.
    """
    try:
        async with client.stream("GET", path):
            return True
    except httpx.HTTPError:
        return False


async def launch_plugin(
    manifest_path: Path,
    command: Sequence[str],
    *,
    convention: RunConvention = MNEMON_RUN,
    secrets: Mapping[str, str] | None = None,
    variables: Mapping[str, str] | None = None,
    startup_timeout: float = 10.0,
    port: int | None = None,
    ready: Callable[[httpx.AsyncClient], Awaitable[bool]] | None = None,
    stdout: IO[bytes] | int | None = None,
    stderr: IO[bytes] | int | None = None,
) -> LaunchedPlugin:
    """Start `command` on a free loopback port and wait until the plugin is ready.

    Args:
        manifest_path: the plugin's manifest; the process runs in its folder.
        command: `run.command`, run without a shell.
        convention: the protocol's variables (and whether it gets a caller secret).
        secrets: values by their declared names, set in the plugin's environment.
        variables: more protocol variables (they win over secrets too), for example the
            plugin's configuration.
        startup_timeout: seconds the plugin has to be ready.
        port: the loopback port it is told to serve on; by default a free one (another free
            one when a process takes it before the plugin listens).
        ready: judges readiness with a client bound to the plugin (its caller secret set);
            by default, any HTTP answer at the convention's health path.
        stdout: where the plugin's standard output goes. By default both its outputs are
            read line by line and logged at DEBUG on `mnemon.plugins.<folder>` (the manifest's
            folder name), so they never mix into the host's own output; `mnemon --debug`
            shows them, prefixed with that logger's name.
        stderr: where its standard error goes (with its output, by default).

    Raises:
        PluginUnavailable: the process cannot start, exits (its exit status named), or is not
            ready in time.
    """
    if not command:
        raise PluginUnavailable("the manifest declares no run.command to launch")
    manifest = manifest_path.resolve()  # noqa: ASYNC240 (no I/O to wait for); once: the folder it runs in and the path it is told
    deadline = anyio.current_time() + startup_timeout
    attempts = 1 if port else PORT_ATTEMPTS
    while True:
        chosen = port or _free_port()
        launched = _start(manifest, command, convention, chosen, secrets, variables, stdout, stderr)
        if await _wait_ready(launched, convention, deadline - anyio.current_time(), ready):
            return launched
        code = launched.process.poll()
        await launched.stop()
        if code is None:
            raise PluginUnavailable(f"the plugin was not ready within {startup_timeout:g} s")
        attempts -= 1
        # a free port is free only when it is chosen: another process may bind it before the
        # plugin does, which then exits at once; the launch then tries another
        if not attempts or not _taken(chosen):
            ended = f"was ended by signal {-code}" if code < 0 else f"exited with code {code}"
            raise PluginUnavailable(f"the plugin {ended} before it was ready")
        _log.debug("port %d was taken before the plugin listened on it; trying another", chosen)


def _start(
    manifest: Path,
    command: Sequence[str],
    convention: RunConvention,
    port: int,
    secrets: Mapping[str, str] | None,
    variables: Mapping[str, str] | None,
    stdout: IO[bytes] | int | None,
    stderr: IO[bytes] | int | None,
) -> LaunchedPlugin:
    """The plugin's process, started on `port` with a fresh caller secret (or none)."""
    token = _secrets.token_urlsafe(32) if convention.token else None
    protocol = {
        **(variables or {}),
        f"{convention.prefix}_HOST": "127.0.0.1",
        f"{convention.prefix}_PORT": str(port),
        f"{convention.prefix}_MANIFEST": str(manifest),
    }
    if token is not None:
        protocol[convention.token_variable] = token
    captured = stdout is None and stderr is None
    try:
        # Popen only forks and returns; the wait for readiness is asynchronous
        process = subprocess.Popen(
            [str(part) for part in command],
            cwd=manifest.parent,
            env=plugin_environment(protocol, secrets),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if captured else stdout,
            stderr=subprocess.STDOUT if captured else stderr,
            start_new_session=True,
        )
    except OSError:
        raise PluginUnavailable("the plugin's run.command cannot be started") from None
    if captured:
        _log_output(process, manifest.parent.name)
    return LaunchedPlugin(process, f"http://127.0.0.1:{port}", token, bearer=convention.bearer)


async def _wait_ready(
    launched: LaunchedPlugin,
    convention: RunConvention,
    seconds: float,
    ready: Callable[[httpx.AsyncClient], Awaitable[bool]] | None,
) -> bool:
    """Whether the plugin is ready within `seconds`; False once it exits or time is up."""
    process = launched.process
    try:
        async with httpx.AsyncClient(
            base_url=launched.endpoint, headers=launched.headers, timeout=1.0
        ) as probe:
            with anyio.move_on_after(seconds):
                while process.poll() is None:
                    if await (ready(probe) if ready else answers_http(probe, convention.health)):
                        return True
                    await anyio.sleep(0.02)
    except BaseException:
        # the caller gave up while the plugin started (its own deadline, a cancelled turn): a
        # process nobody holds any more must not keep running
        await launched.stop()
        raise
    return False


def _taken(port: int) -> bool:
    """Whether another process holds loopback `port` (as a plugin's server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
