"""Benchmark the refusal of an oversized route input, and what it costs the event loop.

Run from the repository root::

    .venv/bin/python benchmarks/inputs.py            # full run, a few seconds
    .venv/bin/python benchmarks/inputs.py --check    # exit 1 when a target fails

A route is executed with an input of about 4 MB of JSON (`{"query": [1000, ..., 559999]}`)
while a heartbeat task ticks every millisecond on the same event loop. Printed, as medians of
several runs: how long the refusal took, the heartbeat's worst delay during it, and the same
two figures for the baseline, which is the work the core did before inputs were bounded (a
frozen private copy of the input, then JSON Schema validation of the whole of it), timed on
the same input in the same loop. Targets: refused in under 100 ms with a heartbeat delay
under 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

import mnemon.sdk
from mnemon._json import freeze_json
from mnemon._schema import input_problems

RUNS = 5
TICK = 0.001
MAX_REFUSAL_MS = 100.0
MAX_STALL_MS = 50.0
SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "maxLength": 200}},
    "additionalProperties": False,
}
HUGE = {"query": list(range(1_000, 560_000))}  # about 4 MB of JSON


class Source:
    """A routed Source whose `query()` must never run in this benchmark."""

    def __init__(self, init: mnemon.sdk.SourceInit) -> None:
        self.key = init.instance_key

    async def facts(self, request: mnemon.sdk.FactsRequest) -> mnemon.sdk.SourceFacts:
        """Ready, with one route."""
        return mnemon.sdk.SourceFacts(
            instance_key=self.key,
            type_id="bench",
            role="notes",
            availability="ready",
            revision="1",
            capabilities=("search",),
            route_ids=("lookup",),
        )

    async def project(self, request: mnemon.sdk.ProjectionRequest) -> mnemon.sdk.ViewContribution:
        """Only the grant the route needs."""
        return mnemon.sdk.ViewContribution(grant=mnemon.ReadGrant(source_key=self.key, value={}))

    async def query(self, request: mnemon.sdk.QueryRequest) -> mnemon.Evidence:
        """Never reached."""
        raise AssertionError("an oversized input must never reach the Source")


SOURCE = mnemon.sdk.define_memory_source(
    {
        "type_id": "bench",
        "package_name": "mnemon-bench",
        "role": "notes",
        "capabilities": ["search"],
        "consistency": "exact-snapshot",
        "routes": [
            {
                "id": "lookup",
                "description": "Look something up.",
                "capability": "search",
                "input_schema": SCHEMA,
                "max_calls": 100,
            }
        ],
    },
    Source,
)


def compose(request: Any, sources: Any, contributions: Any) -> mnemon.sdk.ViewSpec:
    return mnemon.sdk.ViewSpec(
        strategy_type_id="all",
        explanation="the one Source, routed",
        sources=tuple(
            mnemon.sdk.SourceSelection(source_key=s.key, route_ids=tuple(r.id for r in s.routes))
            for s in sources
        ),
    )


STRATEGY = mnemon.sdk.define_memory_strategy(
    {
        "type_id": "all",
        "package_name": "mnemon-bench",
        "supported_source_roles": ["*"],
        "max_sources": 1,
        "max_routes": 1,
        "max_actions": 1,
    },
    compose,
)


class Plugin:
    """Installs the given contributions."""

    def __init__(self, **contributions: Any) -> None:
        self.contributions = contributions

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        """Install them."""
        mnemon.sdk.install_memory(ctx, **self.contributions)


async def timed(work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Milliseconds `work` took and the heartbeat's worst delay meanwhile."""
    worst = 0.0
    running = True

    async def heartbeat() -> None:
        nonlocal worst
        last = time.perf_counter()
        while running:
            await anyio.sleep(TICK)
            now = time.perf_counter()
            worst = max(worst, now - last - TICK)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        await anyio.sleep(0.01)
        started = time.perf_counter()
        await work()
        elapsed = time.perf_counter() - started
        await anyio.sleep(0.01)
        running = False
    return elapsed * 1000, worst * 1000


async def main(check: bool) -> int:
    async with mnemon.MemoryHost() as host:
        await host.mount(Plugin(sources=[SOURCE]), instance_id="s")
        await host.mount(Plugin(strategies=[STRATEGY]), instance_id="strategy")
        turn = await host.begin_turn()

        async def refused() -> None:
            try:
                await turn.execute_route("source:s/lookup", HUGE)
            except mnemon.RouteError as exc:
                if exc.code != "input-too-large":
                    raise
            else:
                raise AssertionError("the oversized input was accepted")

        async def baseline() -> None:
            input_problems(SCHEMA, freeze_json(HUGE))

        mnemon_runs = [await timed(refused) for _ in range(RUNS)]
        baseline_runs = [await timed(baseline) for _ in range(RUNS)]
        await turn.release()

    refusal = statistics.median(run[0] for run in mnemon_runs)
    stall = statistics.median(run[1] for run in mnemon_runs)
    base_refusal = statistics.median(run[0] for run in baseline_runs)
    base_stall = statistics.median(run[1] for run in baseline_runs)
    ok_time = refusal < MAX_REFUSAL_MS
    ok_stall = stall < MAX_STALL_MS
    size = len(orjson.dumps(HUGE)) / 1e6
    print(f"{size:.1f} MB route input, median of {RUNS} runs (baseline: copy + validate it all)")
    print(f"{'':24}{'mnemon':>12}{'baseline':>12}{'ratio':>10}   target")
    print(
        f"{'refused after (ms)':24}{refusal:12.2f}{base_refusal:12.2f}"
        f"{refusal / base_refusal:10.4f}   < {MAX_REFUSAL_MS:g} ms {'PASS' if ok_time else 'FAIL'}"
    )
    print(
        f"{'heartbeat delay (ms)':24}{stall:12.2f}{base_stall:12.2f}"
        f"{stall / max(base_stall, 1e-9):10.4f}   < {MAX_STALL_MS:g} ms "
        f"{'PASS' if ok_stall else 'FAIL'}"
    )
    return 1 if check and not (ok_time and ok_stall) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target fails")
    sys.exit(anyio.run(main, parser.parse_args().check))
