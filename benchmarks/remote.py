"""Benchmark one turn with a remote Source against the same Source in-process.

Run from the repository root (needs mnemon-remote and the notes example installed)::

    .venv/bin/python benchmarks/remote.py            # full run, about a minute
    .venv/bin/python benchmarks/remote.py --quick    # a short smoke run
    .venv/bin/python benchmarks/remote.py --check    # exit 1 when the target fails

What is measured, on the asyncio backend: the notes example Source (`mnemon-example-notes`,
one notes file) mounted beside the focus Strategy,

- in-process;
- through the `remote` client Source over `httpx.ASGITransport` to the same Source served by
  `mnemon_remote.create_app` in this process (the protocol's encoding, routing and validation,
  without a socket or a second process);
- through the `remote` client Source to the same Source served by `mnemon_remote.serve` in its
  own process over a real loopback socket, launched from its manifest as a host would.

A turn is `runner.begin_turn()` then `release()`: the remote Source's `facts()` and `project()`
each make one HTTP call. Beside them, the floor any remote Source stands on: two bare HTTP
round trips per turn to a uvicorn app (same server settings as `serve`) that answers at once,
once with an httpx client set up like the remote Source's, once with a hand-written HTTP/1.1
exchange on a plain socket (what the network and the server cost without an HTTP client).

All set-ups stay open side by side and are timed in alternating rounds, so that the load of a
shared machine hits them alike; a run gives each set-up's median turn. The target is on the
median of 3 runs: the loopback turn adds under 2 ms to the in-process one. The served plugin
and the floor's server run on uvloop when `mnemon-remote[fast]` is installed, on asyncio
otherwise; the header line says which.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import mnemon_example_focus as focus
import mnemon_example_notes as notes
import mnemon_remote

import mnemon.sdk
from mnemon_testing import MemoryCompositionRunner

PLUGIN = Path(__file__).parents[1] / "integrations" / "remote" / "tests" / "plugins" / "notes"
TARGET_ADDED_MS = 2.0
RUNS = 3
ROUNDS = 5
FOCUS = {"source_keys": ["source:notes"]}
REQUEST = {"scope": {"user_id": "ada"}}
# about the size of the remote Source's facts request
BODY = b'{"invocation_id":"' + b"0" * 32 + b'","request":{"scope":{"user_id":"ada"}}}'

# a uvicorn app that answers every request at once, with the server settings `serve` uses
FLOOR_APP = """
import sys, uvicorn

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http="httptools", loop="auto",
            lifespan="off", proxy_headers=False, server_header=False, date_header=False,
            log_level="warning", access_log=False)
"""

Turn = Callable[[], Awaitable[None]]
_TOKEN = secrets.token_urlsafe(32)  # the in-process app's caller secret


class _InProcessApp:
    """The remote Source over `httpx.ASGITransport`: the protocol's own cost, no socket."""

    def __init__(self, configuration: dict[str, Any]) -> None:
        app = mnemon_remote.create_app(
            notes.NOTES_SOURCE,
            PLUGIN / "mnemon-source.yaml",
            token=_TOKEN,
            configuration=configuration,
        )
        self.transport = httpx.ASGITransport(app=app)

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        settings = mnemon_remote.RemoteSettings(ctx.configuration, token=_TOKEN)
        source = mnemon_remote.define_remote_source(settings, self.transport)
        mnemon.sdk.install_memory(ctx, sources=[source])


@contextlib.asynccontextmanager
async def _composing(plugin: Any, config: dict[str, Any]) -> AsyncIterator[Turn]:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(plugin, instance_id="notes", config=config)
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn(REQUEST)
        assert turn.view.fragments, "the benchmark composes a View with the notes in it"
        await turn.release()

        async def one() -> None:
            turn = await runner.begin_turn(REQUEST)
            await turn.release()

        yield one


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def _floor_server() -> AsyncIterator[int]:
    port = _free_port()
    # Popen only forks and returns; the wait for an answer below is asynchronous
    process = subprocess.Popen([sys.executable, "-c", FLOOR_APP, str(port)])  # noqa: ASYNC220
    try:
        async with httpx.AsyncClient() as probe:
            for _ in range(500):
                with contextlib.suppress(httpx.HTTPError):
                    await probe.get(f"http://127.0.0.1:{port}/")
                    break
                await anyio.sleep(0.02)
        yield port
    finally:
        process.terminate()
        process.wait()


@contextlib.asynccontextmanager
async def _httpx_floor(port: int) -> AsyncIterator[Turn]:
    # as the remote Source calls: a pooled keep-alive transport with TCP_NODELAY, driven directly
    transport = httpx.AsyncHTTPTransport(
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    )
    url = httpx.URL(f"http://127.0.0.1:{port}/call")
    headers = [("Content-Type", "application/json")]
    async with transport:

        async def one() -> None:
            for _ in range(2):
                request = httpx.Request("POST", url, headers=headers, content=BODY)
                response = await transport.handle_async_request(request)
                try:
                    async for _chunk in response.aiter_raw():
                        pass
                finally:
                    await response.aclose()

        yield one


@contextlib.asynccontextmanager
async def _socket_floor(port: int) -> AsyncIterator[Turn]:
    head = b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    request = head + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    streams = [await anyio.connect_tcp("127.0.0.1", port)]

    async def exchange() -> None:
        await streams[0].send(request)
        received = b""
        while len(received) < len(answer):
            received += await streams[0].receive()

    async def one() -> None:
        for _ in range(2):
            try:
                await exchange()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                # the server closes a connection idle for 5 s: open another, as httpx does
                await streams[0].aclose()
                streams[0] = await anyio.connect_tcp("127.0.0.1", port)
                await exchange()

    try:
        yield one
    finally:
        await streams[0].aclose()


async def _measure(setups: dict[str, Turn], turns: int) -> dict[str, float]:
    """Each set-up's median turn in ms, timed in alternating rounds."""
    samples: dict[str, list[float]] = {name: [] for name in setups}
    for one in setups.values():  # warm up: connections, caches, the worker threads
        for _ in range(max(5, turns // 20)):
            await one()
    for _ in range(ROUNDS):
        for name, one in setups.items():
            gc.collect()
            for _ in range(max(1, turns // ROUNDS)):
                started = time.perf_counter()
                await one()
                samples[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


async def main(turns: int, check: bool) -> int:
    # the launched plugin runs `python serve_notes.py`: this interpreter, with its packages
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    load_before = os.getloadavg()[0]
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "notes.md"
        path.write_text("The user is Ada.\n- Ada prefers tea.\n", encoding="utf-8")
        remote_config = {
            "manifest": str(PLUGIN / "mnemon-source.yaml"),
            "launch": True,
            "configuration": {"path": str(path)},
        }
        asgi_config = {"manifest": remote_config["manifest"], "endpoint": "http://127.0.0.1"}
        async with contextlib.AsyncExitStack() as stack:
            port = await stack.enter_async_context(_floor_server())
            setups = {
                "in-process": await stack.enter_async_context(
                    _composing(notes, {"path": str(path)})
                ),
                "asgi": await stack.enter_async_context(
                    _composing(_InProcessApp({"path": str(path)}), asgi_config)
                ),
                "loopback": await stack.enter_async_context(
                    _composing(mnemon_remote, remote_config)
                ),
                "floor-httpx": await stack.enter_async_context(_httpx_floor(port)),
                "floor-socket": await stack.enter_async_context(_socket_floor(port)),
            }
            for _ in range(RUNS):
                runs.append(await _measure(setups, turns))
    for figures in runs:
        figures["added"] = figures["loopback"] - figures["in-process"]
    load_after = os.getloadavg()[0]
    # the plugin runs this interpreter: uvicorn picks uvloop when mnemon-remote[fast] is here
    served = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    print(
        f"python {platform.python_version()} on {platform.machine()}, host on asyncio, plugin "
        f"on {served}; {RUNS} runs of {turns} turns per set-up in {ROUNDS} alternating rounds; "
        f"load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores"
    )
    rows = [
        ("in-process turn", "in-process", ""),
        ("remote, no socket", "asgi", "ASGITransport: encoding, routing, validation"),
        ("remote, loopback", "loopback", "a second process: facts + project over HTTP"),
        ("added per turn", "added", "loopback - in-process"),
        ("floor, httpx", "floor-httpx", "2 bare round trips, httpx transport -> uvicorn"),
        ("floor, socket", "floor-socket", "2 bare round trips, plain socket -> uvicorn"),
    ]
    header = "".join(f"{f'run {i + 1}':>9}" for i in range(RUNS))
    print(f"{'median turn, ms':<20}{header}{'median':>9}")
    medians = {}
    for label, key, note in rows:
        values = [figures[key] for figures in runs]
        medians[key] = statistics.median(values)
        cells = "".join(f"{value:9.3f}" for value in values)
        print(f"{label:<20}{cells}{medians[key]:9.3f}   {note}")
    verdict = "PASS" if medians["added"] < TARGET_ADDED_MS else "FAIL"
    print(
        f"added per turn, median of {RUNS} runs: {medians['added']:.3f} ms, "
        f"target < {TARGET_ADDED_MS} ms  {verdict}"
    )
    return 1 if check and verdict == "FAIL" else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target fails")
    arguments = parser.parse_args()
    sys.exit(anyio.run(main, 100 if arguments.quick else 1000, arguments.check))
