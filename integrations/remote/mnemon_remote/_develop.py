"""`mnemon plugin dev`: a plugin under development, launched, checked, restarted on change.

The loop is the same for every protocol: a `DevelopmentSession` launches the plugin by its run
convention (the kit's launcher: its own process group, a minimal environment, a per-launch
caller secret), checks its manifest, health and discovery, and replays one fixture through the
checks `mnemon plugin test` uses. With a fixture and no `--watch`, one pass decides the exit
status; otherwise the plugin keeps running, and any change to a file of its folder restarts it
(hidden folders, `__pycache__`, virtual environments and build outputs excepted). mnemon's
remote Sources bring their session here (`open_remote_development`); Quivr plugins bring theirs
through their contract runner.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx

from mnemon.sdk import MnemonError

from ._launch import LaunchedPlugin
from ._report import MNEMON_CHECKS, CheckResult, check_lines, timed
from ._runner import (
    check_compatibility,
    check_discovery,
    check_health,
    check_manifest,
    development_run,
    invoke_fixture,
    load_fixture,
)

__all__ = [
    "IGNORED_FOLDERS",
    "DevelopmentSession",
    "DevelopmentStep",
    "develop",
    "folder_state",
    "open_remote_development",
]

#: folders never watched: caches, dependencies, virtual environments and build outputs (and
#: every hidden folder, and any folder holding a `pyvenv.cfg`)
IGNORED_FOLDERS = frozenset(
    {
        "__pycache__",
        "build",
        "dist",
        "env",
        "htmlcov",
        "node_modules",
        "site-packages",
        "target",
        "venv",
    }
)
#: how often the folder is looked at, in seconds, unless `--poll-interval` says otherwise
POLL_SECONDS = 0.5


@dataclass
class DevelopmentStep:
    """What one step of a session found: its checks, and the plugin's answer to a fixture.

    Attributes:
        checks: the checks run, in order, as `mnemon plugin test` reports them.
        answer: what the plugin answered the fixture (shown as JSON), or None.
    """

    checks: list[CheckResult] = field(default_factory=list)
    answer: Any = None

    @property
    def passed(self) -> bool:
        """Whether no check failed."""
        return not any(check.status == "fail" for check in self.checks)


class DevelopmentSession(Protocol):
    """One plugin under development: what `mnemon plugin dev` asks of a protocol."""

    async def start(self) -> DevelopmentStep:
        """Inspect the manifest, launch the plugin, wait for its health, check discovery."""

    async def replay(self, fixture: Path) -> DevelopmentStep:
        """Drive one fixture through the running plugin with `mnemon plugin test`'s checks."""

    def exit_status(self) -> int | None:
        """The launched process's exit status, or None while it runs (or none was launched)."""

    async def stop(self) -> None:
        """Stop the plugin (SIGTERM to its group, SIGKILL after 5 s); nothing when none runs."""


def _ignored(folder: Path, name: str) -> bool:
    return (
        name.startswith(".")
        or name in IGNORED_FOLDERS
        or name.endswith(".egg-info")
        or (folder / name / "pyvenv.cfg").is_file()
    )


def folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """Each watched file's modification time (ns) and size, by its path in `folder`."""
    state: dict[str, tuple[int, int]] = {}
    for root, folders, files in os.walk(folder):
        here = Path(root)
        folders[:] = sorted(name for name in folders if not _ignored(here, name))
        for name in files:
            path = here / name
            try:
                stat = path.stat()
            except OSError:
                continue  # removed while we looked: the next look sees it gone
            state[path.relative_to(folder).as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return state


def _changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )


def _show(step: DevelopmentStep, echo: Callable[[str], None]) -> None:
    for check in step.checks:
        for line in check_lines(check.as_json()):
            echo(line)
    if step.answer is not None:
        echo(json.dumps(step.answer, indent=2, ensure_ascii=False))


async def _once(session: DevelopmentSession, fixture: Path, echo: Callable[[str], None]) -> bool:
    try:
        step = await session.start()
        _show(step, echo)
        if step.passed:
            step = await session.replay(fixture)
            _show(step, echo)
    finally:
        await session.stop()
    echo("every check passed" if step.passed else "a check failed")
    return step.passed


async def _next_change(
    session: DevelopmentSession,
    folder: Path,
    state: dict[str, tuple[int, int]],
    poll_interval: float,
    echo: Callable[[str], None],
) -> tuple[list[str], dict[str, tuple[int, int]]]:
    exited = False
    while True:
        # polling: the standard library has no portable way to be told of a change
        await anyio.sleep(poll_interval)
        status = session.exit_status()
        if status is not None and not exited:
            exited = True
            echo(f"the plugin exited with status {status}; a change to its folder restarts it")
        now = await anyio.to_thread.run_sync(folder_state, folder)
        changed = _changes(state, now)
        if changed:
            return changed, now


async def develop(
    session: DevelopmentSession,
    folder: Path,
    *,
    fixture: Path | None = None,
    watch: bool = False,
    poll_interval: float = POLL_SECONDS,
    echo: Callable[[str], None] = print,
) -> int:
    """Run a plugin for development; return the exit status.

    With `fixture` and without `watch`: start, replay the fixture, stop; 0 when every check
    passed, else 1. Otherwise the plugin runs until the caller cancels, restarted whenever a
    watched file of `folder` changes (and the fixture replayed after each start); a plugin
    that exits waits for the next change. The plugin is stopped however this ends.

    Args:
        session: the plugin's protocol.
        folder: the plugin's folder (watched).
        fixture: a fixture to replay after each start.
        watch: keep running even with a fixture.
        poll_interval: seconds between two looks at the folder.
        echo: where the human report goes, one line at a time.
    """
    if fixture is not None and not watch:
        return 0 if await _once(session, fixture, echo) else 1
    state = await anyio.to_thread.run_sync(folder_state, folder)
    try:
        while True:
            step = await session.start()
            _show(step, echo)
            if step.passed and fixture is not None:
                _show(await session.replay(fixture), echo)
            echo(f"watching {folder} for changes (Ctrl-C stops)")
            changed, state = await _next_change(session, folder, state, poll_interval, echo)
            shown = ", ".join(changed[:3]) + (
                f" and {len(changed) - 3} more" if changed[3:] else ""
            )
            echo(f"changed: {shown}; restarting the plugin")
            await session.stop()
    finally:
        await session.stop()


# ---------------------------------------------------------------- mnemon's remote Sources


class _RemoteDevelopment:
    """A remote Source under development, checked by `mnemon plugin test`'s own functions."""

    def __init__(self, path: Path, *, startup_timeout: float, port: int | None) -> None:
        self._path = path
        self._startup_timeout = startup_timeout
        self._port = port
        self._run: Any = None
        self._configuration: dict[str, Any] = {}

    def configure(self, fixture: Path | None) -> None:
        """Launch with the fixture's configuration: a plugin takes it only at start."""
        if fixture is None:
            return
        try:
            value = json.loads(fixture.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return  # the fixtures check says so when it is replayed
        if isinstance(value, dict) and isinstance(value.get("configuration"), dict):
            self._configuration = dict(value["configuration"])

    async def start(self) -> DevelopmentStep:
        self._run = run = development_run(
            self._path, startup_timeout=self._startup_timeout, port=self._port
        )
        step = DevelopmentStep()
        for check_id, judge in (
            ("manifest", check_manifest),
            ("compatibility", check_compatibility),
        ):
            check = run.check(check_id)
            step.checks.append(check)
            with timed(check):
                ready = judge(run)
            if not ready:
                return step
        if not (run.report.manifest or {}).get("run"):
            check = run.check("health")
            check.issue("no_run_command", "/run/command", "nothing to launch: add run.command")
            step.checks.append(check)
            return step
        target = await run.target(self._configuration)
        health = run.check("health")
        step.checks.append(health)
        if target is None:
            health.issue(
                "plugin_unavailable",
                "/v0/health",
                "the plugin's run.command did not start, or did not answer HTTP within "
                f"{self._startup_timeout:g} s",
            )
            return step
        async with httpx.AsyncClient(timeout=None) as client:
            await check_health(run, client, target)
            if health.status == "pass":
                await check_discovery(run, client, target)
                step.checks.append(run.check("discovery"))
        return step

    async def replay(self, fixture: Path) -> DevelopmentStep:
        run = self._run
        step = DevelopmentStep([run.check("fixtures")])
        loaded = load_fixture(run, fixture)
        if loaded is None:
            return step
        label, value = loaded
        invoke = MNEMON_CHECKS.result("invoke", fixture=label)
        step.checks.append(invoke)
        answers: list[dict[str, Any]] = []
        with timed(invoke):
            try:
                await invoke_fixture(run, invoke, label, value, answers)
            except MnemonError as error:
                # the core refused an answer while composing, or the plugin is gone
                invoke.issue("call_failed", label, str(error))
        step.answer = answers
        return step

    def exit_status(self) -> int | None:
        launched: Sequence[LaunchedPlugin] = [] if self._run is None else self._run.launched()
        for plugin in launched:
            status = plugin.process.poll()
            if status is not None:
                return status
        return None

    async def stop(self) -> None:
        if self._run is not None:
            run, self._run = self._run, None
            try:
                await run.stop()
            finally:
                await run.transport.aclose()  # the pooled connections the host's reads used


def open_remote_development(
    path: Path,
    *,
    fixture: Path | None = None,
    startup_timeout: float = 10.0,
    port: int | None = None,
) -> DevelopmentSession:
    """The development session of a remote Source (`mnemon-source.yaml`, or that file).

    The plugin is launched with the fixture's configuration, when a fixture is given.
    """
    session = _RemoteDevelopment(path, startup_timeout=startup_timeout, port=port)
    session.configure(fixture)
    return session
