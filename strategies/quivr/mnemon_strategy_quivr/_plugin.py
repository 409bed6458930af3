"""A Quivr retrieval plugin reached over HTTP: launched from `run.command` or at an endpoint.

Failures are classified the way the protocol says: a valid error envelope is the plugin's
decision (`retryable` is authoritative); a connection failure, a timeout, or a non-2xx answer
without a valid envelope is unavailability, never a decision.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import anyio
import httpx

from mnemon import MnemonError

from ._manifest import ManifestReport
from ._schemas import error_validator

__all__ = ["PluginRefused", "PluginUnavailable", "QuivrPlugin", "launch_plugin"]

SEARCH = "/v0/contributions/retrieval/search"
_log = logging.getLogger("mnemon.quivr")


class PluginUnavailable(MnemonError):
    """The plugin could not be reached, or answered without a valid envelope."""


class PluginRefused(MnemonError):
    """The plugin answered with a valid error envelope; `retryable` says whether to retry."""

    def __init__(self, code: str, retryable: bool) -> None:
        super().__init__(f"the retrieval plugin refused the search ({code})")
        self.code = code
        self.retryable = retryable


class ResponseTooLarge(MnemonError):
    """The answer exceeded `max_response_bytes` while it was read."""


def _envelope(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(value, dict) or not error_validator().is_valid(value):
        return None
    return value


class QuivrPlugin:
    """One retrieval plugin's HTTP endpoint, with pooled connections.

    Args:
        endpoint: the base URL, e.g. `http://127.0.0.1:8080`.
        report: the inspected manifest (valid, declaring `retrieval`).
        auth: an httpx authentication (signed engine requests), or None.
        transport: an httpx transport for tests (an ASGI app), or None for the network.
    """

    def __init__(
        self,
        endpoint: str,
        report: ManifestReport,
        *,
        auth: httpx.Auth | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.report = report
        self.endpoint = endpoint
        manifest = report.manifest or {}
        self.plugin_id = str(manifest.get("id", ""))
        self._client = httpx.AsyncClient(
            base_url=endpoint, auth=auth, transport=transport, follow_redirects=False
        )

    async def search(self, body: dict[str, Any], *, max_response_bytes: int) -> bytes:
        """POST one round and return the answer's exact bytes (2xx only).

        Raises:
            PluginRefused: on a valid error envelope.
            PluginUnavailable: on a connection failure or a non-2xx without an envelope.
            ResponseTooLarge: when the answer exceeds `max_response_bytes` (read no further).
        """
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        try:
            async with self._client.stream("POST", SEARCH, content=content, headers=headers) as r:
                raw = bytearray()
                async for chunk in r.aiter_bytes():
                    raw += chunk
                    if len(raw) > max_response_bytes:
                        raise ResponseTooLarge("the answer exceeds max_response_bytes")
                status = r.status_code
        except httpx.HTTPError:
            # the exception text can carry the URL; it is logged only at DEBUG
            _log.debug("retrieval plugin %s unreachable", self.plugin_id, exc_info=True)
            raise PluginUnavailable("the retrieval plugin is unavailable") from None
        if 200 <= status < 300:
            return bytes(raw)
        envelope = _envelope(bytes(raw))
        if envelope is None:
            raise PluginUnavailable("the retrieval plugin answered without a valid envelope")
        raise PluginRefused(str(envelope["code"]), bool(envelope["retryable"]))

    async def health(self) -> bool:
        """Whether `GET /v0/health` answers 200."""
        try:
            response = await self._client.get("/v0/health")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LaunchedPlugin:
    """A plugin process started from `run.command`, in its own process group."""

    def __init__(self, process: subprocess.Popen[bytes], endpoint: str) -> None:
        self.process = process
        self.endpoint = endpoint

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL after `grace_seconds`."""
        if self.process.poll() is not None:
            return
        group = self.process.pid  # start_new_session: the group id is the leader's pid
        with anyio.CancelScope(shield=True):
            os.killpg(group, signal.SIGTERM)
            try:
                await anyio.to_thread.run_sync(self.process.wait, grace_seconds)
            except subprocess.TimeoutExpired:
                os.killpg(group, signal.SIGKILL)
                await anyio.to_thread.run_sync(self.process.wait)


async def launch_plugin(
    manifest_path: Path,
    report: ManifestReport,
    *,
    startup_timeout: float = 10.0,
    secrets: Mapping[str, str] | None = None,
    output: IO[bytes] | None = None,
) -> LaunchedPlugin:
    """Start the plugin's `run.command` on a free loopback port and wait for its health.

    The process gets `QUIVR_PLUGIN_HOST=127.0.0.1`, `QUIVR_PLUGIN_PORT` and
    `QUIVR_PLUGIN_MANIFEST`, runs in the manifest's folder and its own process group.

    Args:
        manifest_path: the plugin's `quivr-plugin.yaml`.
        report: the inspected manifest (with `run.command`).
        startup_timeout: seconds the plugin has to answer `GET /v0/health` with 200.
        secrets: values by their declared names, set in the plugin's environment.
        output: where the plugin's stdout and stderr go (a file); None inherits them.

    Raises:
        PluginUnavailable: when the manifest has no `run.command`, or the plugin is not healthy
            within `startup_timeout` seconds.
    """
    command = ((report.manifest or {}).get("run") or {}).get("command")
    if not command:
        raise PluginUnavailable("the manifest declares no run.command to launch")
    port = _free_port()
    # the plugin runs in the manifest's folder: a relative path would name the wrong file
    absolute = await anyio.Path(manifest_path).absolute()
    environment = {
        **os.environ,
        "QUIVR_PLUGIN_HOST": "127.0.0.1",
        "QUIVR_PLUGIN_PORT": str(port),
        "QUIVR_PLUGIN_MANIFEST": str(absolute),
        **(secrets or {}),
    }
    # Popen only forks and returns; the wait for health below is asynchronous
    process = subprocess.Popen(  # noqa: ASYNC220
        [str(part) for part in command],
        cwd=manifest_path.parent,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
        start_new_session=True,
    )
    launched = LaunchedPlugin(process, f"http://127.0.0.1:{port}")
    probe = QuivrPlugin(launched.endpoint, report)
    try:
        with anyio.move_on_after(startup_timeout):
            while process.poll() is None:
                if await probe.health():
                    return launched
                await anyio.sleep(0.05)
    finally:
        await probe.aclose()
    await launched.stop()
    raise PluginUnavailable("the retrieval plugin did not become healthy")
