"""A Quivr plugin reached over HTTP: launched from `run.command` or at an endpoint.

Launching, reading answers and reading error envelopes are mnemon-remote's out-of-process kit;
what is Quivr's here is its run convention (`QUIVR_PLUGIN_*`), its readiness (`GET /v0/health`
answers 200) and its error schema. mnemon adds one variable to the convention,
`QUIVR_PLUGIN_TOKEN`: a fresh key per launch, with which the host signs every request to a
Contribution (Quivr's signed engine requests), so a plugin that verifies them serves the host
that launched it and no other local process. The key itself never travels.

Failures are classified the way the protocol says: a valid error envelope is the plugin's
decision (`retryable` is authoritative); a connection failure, a timeout, or a non-2xx answer
without a valid envelope is unavailability, never a decision.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
from mnemon_remote import (
    OFF_LOOP_BYTES,
    AnswerTooLarge,
    LaunchedPlugin,
    PluginUnavailable,
    Redactor,
    RunConvention,
    parse_envelope,
    read_bounded,
)
from mnemon_remote import launch_plugin as launch_process

from mnemon.sdk import MnemonError

from ._manifest import ManifestReport
from ._rules import RetrievalSession, judge_search_output
from ._schemas import error_validator

__all__ = [
    "HEALTH",
    "QUIVR_RUN",
    "SEARCH",
    "LaunchedPlugin",
    "PluginRefused",
    "PluginUnavailable",
    "QuivrPlugin",
    "judge_round",
    "launch_plugin",
]

SEARCH = "/v0/contributions/retrieval/search"
HEALTH = "/v0/health"
#: Quivr's run convention (`QUIVR_PLUGIN_HOST`, `_PORT` and `_MANIFEST`) and mnemon's signing
#: key, `QUIVR_PLUGIN_TOKEN`, which signs requests and is never sent
QUIVR_RUN = RunConvention("QUIVR_PLUGIN", health=HEALTH, bearer=False)
_log = logging.getLogger("mnemon.quivr")


class PluginRefused(MnemonError):
    """The plugin answered with a valid error envelope; `retryable` says whether to retry.

    `retry_after` is the wait the envelope asked for (`retry_after_seconds`), when it did.
    """

    def __init__(self, code: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(f"the plugin refused the call ({code})")
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


async def answers_healthy(client: httpx.AsyncClient) -> bool:
    """Whether `GET /v0/health` answers 200 (a launched plugin is ready then)."""
    try:
        response = await client.get(HEALTH)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


class QuivrPlugin:
    """One plugin's HTTP endpoint, with pooled connections, for every Contribution it serves.

    Args:
        endpoint: the base URL, e.g. `http://127.0.0.1:8080`.
        report: the inspected manifest (valid).
        auth: an httpx authentication (signed engine requests), or None.
        transport: an httpx transport for tests (an ASGI app), or None for the network.
        secrets: the values the host gave the plugin (its secrets, the signing key): scrubbed
            from its error envelopes, whose code the host repeats.
    """

    def __init__(
        self,
        endpoint: str,
        report: ManifestReport,
        *,
        auth: httpx.Auth | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.report = report
        self.endpoint = endpoint
        manifest = report.manifest or {}
        self.plugin_id = str(manifest.get("id", ""))
        self._redactor = Redactor(secrets)
        self._client = httpx.AsyncClient(
            base_url=endpoint,
            auth=auth,
            transport=transport,
            follow_redirects=False,
            # every deadline is the caller's (a search's latency, an embedder's timeout_ms):
            # httpx's own 5 s would cut a slower call the plugin's manifest allows
            timeout=None,
        )

    async def search(self, body: dict[str, Any], *, max_response_bytes: int) -> bytes:
        """POST one round and return the answer's exact bytes (2xx only); see `post`."""
        return await self.post(SEARCH, body, max_response_bytes=max_response_bytes)

    async def post(self, path: str, body: dict[str, Any], *, max_response_bytes: int) -> bytes:
        """POST one call to a Contribution's route and return the answer's exact bytes (2xx).

        Raises:
            PluginRefused: on a valid error envelope.
            PluginUnavailable: on a connection failure or a non-2xx without an envelope.
            AnswerTooLarge: when the answer exceeds `max_response_bytes` (read no further).
        """
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        # the limit counts bytes as they arrive: no compression, so no decompression bomb
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        try:
            async with self._client.stream("POST", path, content=content, headers=headers) as r:
                declared = r.headers.get("content-length", "")
                if declared.isdecimal() and int(declared) > max_response_bytes:
                    raise AnswerTooLarge(f"the answer exceeds {max_response_bytes} bytes")
                raw = await read_bounded(r.aiter_bytes(), max_response_bytes)
                status = r.status_code
        except httpx.HTTPError:
            # the exception text can carry the URL; it is logged only at DEBUG
            _log.debug("quivr plugin %s unreachable", self.plugin_id, exc_info=True)
            raise PluginUnavailable("the plugin is unavailable") from None
        if 200 <= status < 300:
            return raw
        # an envelope whose code had to be scrubbed of a secret is no envelope
        envelope = parse_envelope(raw, error_validator(), self._redactor)
        if envelope is None:
            raise PluginUnavailable("the plugin answered without a valid envelope")
        raise PluginRefused(envelope.code, envelope.retryable, envelope.retry_after_seconds)

    @property
    def redactor(self) -> Redactor:
        """What scrubs the values the host gave the plugin out of its answers."""
        return self._redactor

    async def health(self) -> bool:
        """Whether `GET /v0/health` answers 200 within 5 seconds."""
        with anyio.move_on_after(5.0):
            return await answers_healthy(self._client)
        return False

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()


async def judge_round(raw: bytes, session: RetrievalSession) -> tuple[frozenset[str], Any]:
    """The rule codes one round's answer breaks, and its value when it breaks none.

    A large answer is parsed and judged in a worker thread: every turn in flight shares the
    event loop, and a plugin may answer up to 16 MiB.
    """
    if len(raw) < OFF_LOOP_BYTES:
        codes, value = judge_search_output(raw, session)
    else:
        # abandoned on cancellation: the search's deadline holds while the thread still parses
        codes, value = await anyio.to_thread.run_sync(
            judge_search_output, raw, session, abandon_on_cancel=True
        )
    return codes, None if codes else value


async def launch_plugin(
    manifest_path: Path,
    report: ManifestReport,
    *,
    startup_timeout: float = 10.0,
    secrets: Mapping[str, str] | None = None,
    output: IO[bytes] | int | None = None,
    port: int | None = None,
) -> LaunchedPlugin:
    """Start the plugin's `run.command` by Quivr's run convention and wait for its health.

    The kit's launcher runs it in the manifest's folder and its own process group, with a
    minimal environment: a few harmless variables of the host's, `secrets` by their names,
    then `QUIVR_PLUGIN_HOST=127.0.0.1`, `QUIVR_PLUGIN_PORT`, `QUIVR_PLUGIN_MANIFEST` (the
    manifest's absolute path) and `QUIVR_PLUGIN_TOKEN` (a fresh signing key, the launched
    plugin's `token`), which no secret overrides. `stop()` ends the whole group.

    Args:
        manifest_path: the plugin's `quivr-plugin.yaml`.
        report: the inspected manifest (with `run.command`).
        startup_timeout: seconds the plugin has to answer `GET /v0/health` with 200.
        secrets: values by their names, set in the plugin's environment.
        output: where the plugin's stdout and stderr go (a file or a file descriptor); None
            inherits them.
        port: the loopback port it serves on; by default a free one.

    Raises:
        PluginUnavailable: when the manifest has no `run.command`, or the plugin is not healthy
            within `startup_timeout` seconds.
    """
    command = ((report.manifest or {}).get("run") or {}).get("command") or ()
    return await launch_process(
        manifest_path,
        [str(part) for part in command],
        convention=QUIVR_RUN,
        secrets=secrets,
        startup_timeout=startup_timeout,
        port=port,
        ready=answers_healthy,
        stdout=output,
        stderr=output,
    )
