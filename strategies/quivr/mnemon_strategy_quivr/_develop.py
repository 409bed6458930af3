"""`mnemon plugin dev` on a Quivr plugin: Quivr's local-development convention, mnemon's checks.

The session inspects the manifest, launches `run.command` by Quivr's run convention on the
kit's launcher (`QUIVR_PLUGIN_HOST=127.0.0.1`, `QUIVR_PLUGIN_PORT`, `QUIVR_PLUGIN_MANIFEST`,
and mnemon's per-launch signing key `QUIVR_PLUGIN_TOKEN`; its own process group), waits for
`GET /v0/health` and checks `GET /v0/discovery` against the manifest (digest, id, version,
Plugin API, Contributions): the certification's own checks. A fixture is replayed through the
checks `mnemon plugin test` runs on it: a retrieval fixture's search under each of its
profiles, an ingestion fixture's `segment_and_embed` and `embed_query`; every request to a
Contribution is signed with the launched plugin's key, as the host signs it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx
from mnemon_remote import DevelopmentStep, LaunchedPlugin, PluginUnavailable

from ._contract import (
    RETRIEVAL,
    ContractRun,
    check_discovery,
    check_fixtures,
    check_health,
    check_manifest,
    check_search,
    manifest_path,
    now,
    read_manifest,
)
from ._contract_ingestion import INGESTION, IngestionFixture, develop_ingestion
from ._manifest import ManifestReport
from ._plugin import HEALTH, QuivrPlugin, launch_plugin
from ._signing import EngineRequestAuth

__all__ = ["QuivrDevelopment", "open_development"]


class QuivrDevelopment:
    """A Quivr plugin under development (see `mnemon_remote.DevelopmentSession`)."""

    def __init__(self, path: Path, *, startup_timeout: float, port: int | None) -> None:
        self._path = manifest_path(path)
        self._startup_timeout = startup_timeout
        self._port = port
        self._run: ContractRun | None = None
        self._launched: LaunchedPlugin | None = None
        self._client: httpx.AsyncClient | None = None
        self._plugin: QuivrPlugin | None = None

    async def start(self) -> DevelopmentStep:
        """Inspect the manifest, launch the plugin, wait for its health, check discovery."""
        report = read_manifest(
            self._path
        )  # read again at every start: the manifest may have changed
        run = self._run = ContractRun(
            self._path,
            report or ManifestReport(None, "", (), None),
            "launch",
            self._startup_timeout,
        )
        if report is None:
            run.add("manifest").issue("unreadable", "", "cannot read the manifest")
            return DevelopmentStep(run.checks)
        if not check_manifest(run):
            return DevelopmentStep(run.checks)
        command = (run.manifest.get("run") or {}).get("command")
        if not command:
            run.add("health").issue(
                "no_run_command", "/run/command", "the manifest declares no run.command"
            )
            return DevelopmentStep(run.checks)
        # as the host gives them: each declared secret from the variable of its name, when set
        secrets = {
            name: os.environ[name]
            for name in (str(s.get("name")) for s in run.manifest.get("secrets") or [])
            if os.environ.get(name)
        }
        try:
            self._launched = await launch_plugin(
                self._path,
                run.report,
                startup_timeout=self._startup_timeout,
                secrets=secrets,
                output=2,  # the plugin's stdout and stderr go to the developer's stderr
                port=self._port,
            )
        except PluginUnavailable as unavailable:
            check = run.add("health")
            check.note = "launched " + " ".join(str(part) for part in command)
            # the launcher's reason: run.command could not start, or no 200 from its health
            check.issue(
                "unhealthy",
                HEALTH,
                f"{unavailable} (GET /v0/health must answer 200 within "
                f"{self._startup_timeout:g} s)",
            )
            return DevelopmentStep(run.checks)
        run.base_url = self._launched.endpoint
        token = self._launched.token
        run.key = None if token is None else token.encode("ascii")
        plugin_id = str(run.manifest["id"])
        auth = (
            None if run.key is None else EngineRequestAuth(run.key, plugin_id=plugin_id, clock=now)
        )
        self._client = httpx.AsyncClient(base_url=run.base_url, timeout=None, auth=auth)
        self._plugin = QuivrPlugin(run.base_url, run.report, auth=auth)
        if await check_health(run, self._client, launched=True):
            await check_discovery(run, self._client)
        return DevelopmentStep(run.checks)

    async def replay(self, fixture: Path) -> DevelopmentStep:
        """Drive one retrieval or ingestion fixture through the running plugin."""
        run, client, plugin = self._run, self._client, self._plugin
        assert run is not None, "replay() follows a start()"
        assert client is not None, "replay() follows a start() that launched the plugin"
        assert plugin is not None, "replay() follows a start() that launched the plugin"
        first = len(run.checks)
        label = fixture.name
        try:
            raw = await anyio.Path(fixture).read_bytes()
            value = json.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            run.add("fixtures").issue("invalid_fixture", "", f"{label}: not a readable JSON file")
            return DevelopmentStep(run.checks[first:])
        hosted = run.plan.hosted
        kind = next((c for c in hosted if isinstance(value, dict) and c in value), None)
        answer: Any = None
        if kind == RETRIEVAL:
            searches = check_fixtures(run, [(label, value)], [], normative=False)
            answer = []
            for search in searches:
                outcomes = await check_search(run, plugin, search)
                answer.extend(
                    {"profile": o.profile, "rounds": o.rounds, "ranking": {"hits": o.hits}}
                    for o in outcomes
                )
        elif kind == INGESTION:
            answer = await develop_ingestion(
                run.report, client, plugin, run.checks, IngestionFixture(label, raw, value)
            )
        else:
            run.add("fixtures", contribution=hosted[0] if hosted else RETRIEVAL).issue(
                "invalid_fixture",
                "",
                f"{label}: not a fixture of a Contribution mnemon hosts in this plugin "
                f"({', '.join(hosted) or 'none'}): its top-level key names the Contribution",
            )
        return DevelopmentStep(run.checks[first:], answer)

    def exit_status(self) -> int | None:
        """The launched process's exit status, or None while it runs."""
        return None if self._launched is None else self._launched.process.poll()

    async def stop(self) -> None:
        """Stop the plugin's process group (SIGTERM, SIGKILL after 5 s) and close the clients."""
        launched, self._launched = self._launched, None
        client, self._client = self._client, None
        plugin, self._plugin = self._plugin, None
        if plugin is not None:
            await plugin.aclose()
        if client is not None:
            await client.aclose()
        if launched is not None:
            await launched.stop()


def open_development(
    path: Path,
    *,
    fixture: Path | None = None,
    startup_timeout: float = 10.0,
    port: int | None = None,
) -> QuivrDevelopment:
    """The `mnemon plugin dev` session of the Quivr plugin at `path` (its folder or manifest).

    `fixture` is unused at launch: a Quivr plugin takes its configuration in each request.
    """
    del fixture
    return QuivrDevelopment(path, startup_timeout=startup_timeout, port=port)
