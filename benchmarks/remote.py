"""Benchmark one turn with a remote Source against the same Source in-process.

Run from the repository root (needs mnemon-remote and the notes example installed)::

    .venv/bin/python benchmarks/remote.py            # full run, about 20 s
    .venv/bin/python benchmarks/remote.py --quick    # a short smoke run
    .venv/bin/python benchmarks/remote.py --check    # exit 1 when the target fails

What is measured, on the asyncio backend: the notes example Source (`mnemon-example-notes`,
one notes file) mounted beside the focus Strategy, once in-process and once through the
`remote` client Source talking to the same Source served by `mnemon_remote.serve` in a
separate process over a real loopback socket (launched from its manifest, as a host would),
and a third time over `httpx.ASGITransport` in the same process (the protocol's encoding and
validation without a socket or a second process).
A turn is `runner.begin_turn()` then `release()`: the remote Source's `facts()` and
`project()` each make one HTTP call. Printed: the median turn time of both and the time the
protocol adds per turn, beside the target (under 2 ms at the median).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mnemon_example_focus as focus
import mnemon_example_notes as notes
import mnemon_remote

import mnemon
from mnemon_testing import MemoryCompositionRunner

PLUGIN = Path(__file__).parents[1] / "integrations" / "remote" / "tests" / "plugins" / "notes"
TARGET_ADDED_MS = 2.0
FOCUS = {"source_keys": ["source:notes"]}
REQUEST = {"scope": {"user_id": "ada"}}


async def _median_turn_ms(plugin: Any, config: dict[str, Any], turns: int) -> float:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(plugin, instance_id="notes", config=config)
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        for _ in range(max(5, turns // 10)):  # warm up: connections, caches, first launch
            turn = await runner.begin_turn(REQUEST)
            await turn.release()
        samples = []
        for _ in range(turns):
            started = time.perf_counter()
            turn = await runner.begin_turn(REQUEST)
            await turn.release()
            samples.append((time.perf_counter() - started) * 1000)
        assert turn.view.fragments, "the benchmark composes a View with the notes in it"
    return statistics.median(samples)


class _InProcessApp:
    """The remote Source over `httpx.ASGITransport`: the protocol's own cost, no socket."""

    def __init__(self) -> None:
        app = mnemon_remote.create_app(notes.NOTES_SOURCE, PLUGIN / "mnemon-source.yaml")
        self.transport = httpx.ASGITransport(app=app)

    def apply(self, ctx: mnemon.PluginContext) -> None:
        settings = mnemon_remote.RemoteSettings(ctx.configuration)
        source = mnemon_remote.define_remote_source(settings, self.transport)
        mnemon.install_memory(ctx, sources=[source])


async def main(turns: int, check: bool) -> int:
    # the launched plugin runs `python serve_notes.py`: this interpreter, with its packages
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "notes.md"
        path.write_text("The user is Ada.\n- Ada prefers tea.\n", encoding="utf-8")
        local = await _median_turn_ms(notes, {"path": str(path)}, turns)
        remote_config = {
            "manifest": str(PLUGIN / "mnemon-source.yaml"),
            "launch": True,
            "configuration": {"path": str(path)},
        }
        asgi_config = {**remote_config, "launch": False, "endpoint": "http://plugin"}
        wire = await _median_turn_ms(_InProcessApp(), asgi_config, turns)
        remote = await _median_turn_ms(mnemon_remote, remote_config, turns)
    added = remote - local
    verdict = "PASS" if added < TARGET_ADDED_MS else "FAIL"
    load = os.getloadavg()[0]
    print(
        f"python {platform.python_version()} on {platform.machine()}, {turns} turns each, "
        f"load average {load:.1f} on {os.cpu_count()} cores (a loaded machine delays the plugin)"
    )
    print(f"in-process turn (median)   {local:8.3f} ms")
    print(f"remote, no socket (median) {wire:8.3f} ms   (ASGITransport: encoding, validation)")
    print(f"remote turn (median)       {remote:8.3f} ms   (loopback HTTP: facts + project)")
    print(f"added per turn (median)    {added:8.3f} ms   target < {TARGET_ADDED_MS} ms  {verdict}")
    return 1 if check and verdict == "FAIL" else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target fails")
    arguments = parser.parse_args()
    sys.exit(anyio.run(main, 100 if arguments.quick else 1000, arguments.check))
