"""One Quivr plugin as a host reaches it: at an endpoint, or launched once and shared.

A manifest may declare several Contributions (`retrieval` and `ingestion`); the host runs the
plugin once for all of them. The first call of any Contribution launches it; every later call,
of any Contribution, reaches the same process through the same pooled client, and unmounting
the entry stops it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx

from ._manifest import ManifestReport
from ._plugin import LaunchedPlugin, PluginUnavailable, QuivrPlugin, launch_plugin
from ._signing import EngineRequestAuth

__all__ = ["PluginLink"]

_log = logging.getLogger("mnemon.quivr")


def _now() -> int:
    return int(time.time())


@dataclass
class PluginLink:
    """The plugin's client for every Contribution it serves; a launched plugin starts on first use.

    Args:
        report: the inspected manifest (valid).
        manifest_path: where the manifest is (the launched plugin runs in its folder).
        endpoint: the plugin's base URL, or None to launch `run.command`.
        signing_key: the HS256 key requests are signed with (the host's, from
            `signing_secret_env`), or None: a launched plugin's requests are then signed with
            its per-launch key, a running one's are not signed.
        transport: an httpx transport (for an in-process ASGI plugin), or None.
        startup_timeout: seconds a launched plugin has to become healthy.
        secrets: what the host gives the plugin by name (its declared secrets, the signing
            key): a launched plugin gets them in its environment, and their values are
            scrubbed from whatever of the plugin's text the host repeats.
    """

    report: ManifestReport
    manifest_path: Path
    endpoint: str | None = None
    signing_key: bytes | None = None
    transport: httpx.AsyncBaseTransport | None = None
    startup_timeout: float = 10.0
    secrets: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plugin_id = str((self.report.manifest or {}).get("id", ""))
        self._plugin: QuivrPlugin | None = None
        self._launched: LaunchedPlugin | None = None
        self._lock = anyio.Lock()
        self._closed = False

    async def plugin(self) -> QuivrPlugin:
        """The plugin's client; a launched plugin is started on first use.

        Raises:
            PluginUnavailable: the plugin cannot be launched, or the link was closed (a late
                call after the entry was unmounted never starts a process nobody would stop).
        """
        async with self._lock:
            if self._closed:
                raise PluginUnavailable("the plugin's entry was unmounted")
            if self._launched is not None and not self._launched.running:
                # it exited (crashed, killed): the next call launches it again, with a new key
                _log.info("quivr plugin %s exited; it is launched again", self.plugin_id)
                await self._release()
            if self._plugin is None:
                endpoint = self.endpoint
                key = self.signing_key
                secrets = list(self.secrets.values())
                if endpoint is None:
                    launched = await self._launch()
                    endpoint = launched.endpoint
                    if launched.token is not None:
                        key = key or launched.token.encode("ascii")
                        secrets.append(launched.token)
                auth = (
                    None
                    if key is None
                    else EngineRequestAuth(key, plugin_id=self.plugin_id, clock=_now)
                )
                self._plugin = QuivrPlugin(
                    endpoint, self.report, auth=auth, transport=self.transport, secrets=secrets
                )
            return self._plugin

    async def _launch(self) -> LaunchedPlugin:
        # a launch outlives the call that started it: the first call may wait past its
        # deadline (at most startup_timeout), and the plugin then serves the next call,
        # instead of every call that times out starting one anew
        with anyio.CancelScope(shield=True):
            try:
                launched = await launch_plugin(
                    self.manifest_path,
                    self.report,
                    startup_timeout=self.startup_timeout,
                    secrets=self.secrets,
                )
            except PluginUnavailable as failed:
                # the launcher's own words (an exit status, a time): never the plugin's output
                _log.warning("quivr plugin %s could not be launched: %s", self.plugin_id, failed)
                raise
        self._launched = launched
        return launched

    @property
    def serving_endpoint(self) -> str | None:
        """The base URL in use: the endpoint, or the launched plugin's; None before first use."""
        return None if self._plugin is None else str(self._plugin.endpoint)

    @property
    def launched(self) -> LaunchedPlugin | None:
        """The launched plugin's process, while it runs; None for an endpoint or before use."""
        return self._launched

    async def aclose(self) -> None:
        """Close connections and stop a launched plugin with every process it started."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                self._closed = True
                await self._release()

    async def _release(self) -> None:
        if self._plugin is not None:
            await self._plugin.aclose()
            self._plugin = None
        if self._launched is not None:
            await self._launched.stop()
            self._launched = None
