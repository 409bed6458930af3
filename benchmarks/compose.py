"""Benchmark one mnemon turn against the bare Source reads it wraps.

Run from the repository root (or with `make bench`)::

    .venv/bin/python benchmarks/compose.py            # full run, well under a minute
    .venv/bin/python benchmarks/compose.py --quick    # a short smoke run
    .venv/bin/python benchmarks/compose.py --check    # exit 1 when a target fails
    .venv/bin/python benchmarks/compose.py --runs 3   # judged by the medians of 3 runs

What is measured, on the asyncio backend:

- Per-turn cost with 1, 4, 16 and 64 in-memory Sources, each mounted as its own entry
  beside one Strategy that selects them all eagerly with their route and action. A mnemon
  turn is `async with host.turn(scope=...) as turn` reading `turn.view.id`. The baseline
  runs the very same runtimes' `facts()` coroutines in one bare anyio task group, then
  their `project()` coroutines in another, with requests built once. Printed: median
  per-turn time of both, their ratio, turns per second, and the time mnemon adds per turn.
- Latency with 16 Sources whose `project()` sleeps 20 ms (their `facts()` does not sleep):
  the median turn time divided by 20 ms, the least any turn could take.

Targets are printed beside the figures and marked PASS or FAIL; with `--runs N`, by the
median of N full runs (see `targets.py`). The exit status is 0 unless `--check` is given,
in which case a failed target exits 1.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from targets import Check, add_options, repeat, report

import mnemon.sdk

BACKEND = "asyncio"
SOURCE_COUNTS = (1, 4, 16, 64)
OVERHEAD_SOURCES = 4
LATENCY_SOURCES = 16
LATENCY_DELAY = 0.020
MAX_ADDED_MS = 0.5
MAX_LATENCY_RATIO = 1.5
MIN_COMPOSES_PER_SECOND = 5_000  # at OVERHEAD_SOURCES, from the median turn
MAX_BASELINE_RATIO = 2.0  # mnemon median / bare task group median, at OVERHEAD_SOURCES
MAX_MARGINAL_US = 30.0  # what mnemon adds per extra Source, between 1 and 16 Sources
SCOPE = {"user_id": "u"}
SCENARIO = "agent.turn"
REVISION = "bench:1"
BUDGET = mnemon.ViewBudget()

SOURCE_DESCRIPTOR = mnemon.sdk.define_memory_plugin(
    "mnemon-bench-memory",
    label="Benchmark memory",
    description="An in-memory Source whose reads cost next to nothing.",
    roles=["source"],
    provides=["bench.memory"],
)
STRATEGY_DESCRIPTOR = mnemon.sdk.define_memory_plugin(
    "mnemon-bench-strategy",
    label="Benchmark Strategy",
    description="Selects every available Source eagerly and splits the budget evenly.",
    roles=["strategy"],
    provides=["strategy.bench"],
    requires=["source"],
)

SOURCE_MANIFEST = {
    "type_id": "bench-memory",
    "package_name": "mnemon-bench-memory",
    "role": "bench",
    "capabilities": ["project", "read", "write"],
    "consistency": "exact-snapshot",
    "routes": [
        {
            "id": "read",
            "description": "Read the remembered line as it was when this turn began.",
            "capability": "read",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "max_calls": 2,
            "max_results": 1,
        }
    ],
    "actions": [
        {
            "id": "remember",
            "description": "Replace the remembered line.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 200}},
                "required": ["text"],
                "additionalProperties": False,
            },
        }
    ],
}

STRATEGY_MANIFEST = {
    "type_id": "bench-all",
    "package_name": "mnemon-bench-strategy",
    "supported_source_roles": ["*"],
    "max_sources": max(SOURCE_COUNTS),
    "max_routes": max(SOURCE_COUNTS),
    "max_actions": max(SOURCE_COUNTS),
}


# ------------------------------------------------------------------------- plugins


class BenchSource:
    """An in-memory Source: prebuilt facts and one cached contribution per request shape."""

    def __init__(self, key: str, delay: float) -> None:
        self.key = key
        self.delay = delay
        self.reads = 0
        self._text = f"Remembered by {key}: the user prefers short, direct answers."
        self._facts = mnemon.sdk.SourceFacts(
            instance_key=key,
            type_id="bench-memory",
            role="bench",
            availability="ready",
            revision=REVISION,
            capabilities=("project", "read", "write"),
            route_ids=("read",),
            action_ids=("remember",),
        )
        self._grant = mnemon.ReadGrant(source_key=key, value={"revision": REVISION})
        self._contributions: dict[tuple[str, int], mnemon.sdk.ViewContribution] = {}

    async def facts(self, request: mnemon.sdk.FactsRequest) -> mnemon.sdk.SourceFacts:
        """Return the prebuilt facts."""
        self.reads += 1
        return self._facts

    async def project(self, request: mnemon.sdk.ProjectionRequest) -> mnemon.sdk.ViewContribution:
        """Return one fragment and a grant, after `delay` seconds when there is one."""
        if self.delay:
            await anyio.sleep(self.delay)
        shape = (request.mode, request.max_characters)
        contribution = self._contributions.get(shape)
        if contribution is None:
            text = mnemon.sdk.truncate_text(self._text, request.max_characters)
            fragments: tuple[mnemon.Fragment, ...] = ()
            if text:
                fragments = (mnemon.Fragment(source_key=self.key, mode=request.mode, text=text),)
            contribution = mnemon.sdk.ViewContribution(
                fragments=fragments, grant=self._grant, revision=REVISION
            )
            self._contributions[shape] = contribution
        return contribution

    async def query(self, request: mnemon.sdk.QueryRequest) -> mnemon.Evidence:
        """Return the remembered line (never called by this benchmark)."""
        item = mnemon.EvidenceItem(id="line", text=self._text, provenance={"revision": REVISION})
        return mnemon.Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self.key,
            items=(item,),
        )

    async def mutate(self, request: mnemon.sdk.MutationRequest) -> mnemon.MutationReceipt:
        """Accept a write without storing it (never called by this benchmark)."""
        return mnemon.sdk.create_mutation_receipt(
            request, completion="committed", revision=REVISION
        )


class SourcePlugin:
    """A plugin whose every entry installs one BenchSource; it keeps the latest runtimes."""

    memory_plugin = SOURCE_DESCRIPTOR

    def __init__(self, delay: float) -> None:
        self.delay = delay
        # the last runtime made for a key belongs to the serving generation
        self.runtimes: dict[str, BenchSource] = {}
        self.definition = mnemon.sdk.define_memory_source(SOURCE_MANIFEST, self._create)

    def _create(self, init: mnemon.sdk.SourceInit) -> BenchSource:
        runtime = BenchSource(init.instance_key, self.delay)
        self.runtimes[init.instance_key] = runtime
        return runtime

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        """Install one BenchSource for this entry."""
        mnemon.sdk.install_memory(ctx, sources=[self.definition])


def compose_all(
    request: mnemon.sdk.ComposeRequest,
    sources: tuple[mnemon.sdk.SourceCandidate, ...],
    contributions: tuple[mnemon.sdk.ExtensionContribution, ...],
) -> dict[str, Any]:
    """Select every available Source eagerly with its routes and actions; split the budget."""
    chosen = [source for source in sources if source.facts.availability != "unavailable"]
    share, remainder = divmod(request.budget.max_projection_characters, max(len(chosen), 1))
    selections = [
        {
            "source_key": source.key,
            "required": False,
            "projection": {"mode": "eager", "max_characters": share + (index < remainder)},
            "route_ids": [route.id for route in source.routes],
            "action_ids": [action.id for action in source.actions],
        }
        for index, source in enumerate(chosen)
    ]
    return {
        "strategy_type_id": "bench-all",
        "sources": selections,
        "explanation": f"bench: all {len(chosen)} available Source(s), eager",
    }


class StrategyPlugin:
    """A plugin installing the select-everything Strategy."""

    memory_plugin = STRATEGY_DESCRIPTOR
    definition = mnemon.sdk.define_memory_strategy(STRATEGY_MANIFEST, compose_all)

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        """Install the Strategy for this entry."""
        mnemon.sdk.install_memory(ctx, strategies=[self.definition])


# ------------------------------------------------------------------------- the two turns

Turn = Callable[[], Awaitable[None]]


@dataclass
class Setup:
    """A mounted host, its Source runtimes, and the two kinds of turn to time."""

    host: mnemon.MemoryHost
    runtimes: list[BenchSource]
    mnemon_turn: Turn
    baseline_turn: Turn


async def mount_checked(
    host: mnemon.MemoryHost, plugin: SourcePlugin, count: int
) -> list[BenchSource]:
    """Mount `count` Sources (entries s0..) and the Strategy; check one turn's View.

    Returns:
        The runtimes the host reads, in instance-key order.

    Raises:
        RuntimeError: the View or the runtimes are not what the benchmark expects.
    """
    for index in range(count):
        await host.mount(plugin, instance_id=f"s{index}")
    await host.mount(StrategyPlugin(), instance_id="strategy")
    async with host.turn(scope=SCOPE) as turn:
        view = turn.view
    expected = (count,) * 4 + (0,)
    found = tuple(
        len(part)
        for part in (view.fragments, view.routes, view.offers, view.grants, view.diagnostics)
    )
    if found != expected:
        raise RuntimeError(f"{count} Sources: fragments/routes/offers/grants/diagnostics {found}")
    runtimes = [plugin.runtimes[key] for key in sorted(plugin.runtimes)]
    if len(runtimes) != count or not all(runtime.reads for runtime in runtimes):
        raise RuntimeError(f"{count} Sources: the kept runtimes are not the serving ones")
    return runtimes


async def open_setup(count: int, delay: float) -> Setup:
    """Build a host with `count` Sources and the two kinds of turn to time on it.

    Raises:
        RuntimeError: the View or the runtimes are not what the benchmark expects.
    """
    host = mnemon.MemoryHost()
    try:
        runtimes = await mount_checked(host, SourcePlugin(delay), count)
    except BaseException:
        await host.dispose()
        raise

    async def mnemon_turn() -> None:
        async with host.turn(scope=SCOPE) as turn:
            turn.view.id  # noqa: B018 - reading the id is what a host does with a turn

    scope = mnemon.Scope(**SCOPE)
    # the same even split compose_all makes, so both sides project the same shapes
    share, remainder = divmod(BUDGET.max_projection_characters, count)
    facts_requests = [
        mnemon.sdk.FactsRequest(instance_key=runtime.key, scope=scope, scenario=SCENARIO)
        for runtime in runtimes
    ]
    projection_requests = [
        mnemon.sdk.ProjectionRequest(
            instance_key=runtime.key,
            scope=scope,
            scenario=SCENARIO,
            expected_revision=REVISION,
            mode="eager",
            max_characters=share + (index < remainder),
        )
        for index, runtime in enumerate(runtimes)
    ]
    facts_calls = [
        (runtime.facts, request) for runtime, request in zip(runtimes, facts_requests, strict=True)
    ]
    project_calls = [
        (runtime.project, request)
        for runtime, request in zip(runtimes, projection_requests, strict=True)
    ]

    async def baseline_turn() -> None:
        async with anyio.create_task_group() as group:
            for call, request in facts_calls:
                group.start_soon(call, request)
        async with anyio.create_task_group() as group:
            for project, projection in project_calls:
                group.start_soon(project, projection)

    return Setup(host, runtimes, mnemon_turn, baseline_turn)


# ------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Timing:
    """Per-turn samples (seconds) of one kind of turn."""

    samples: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        """The median turn time in milliseconds."""
        return statistics.median(self.samples) * 1_000

    @property
    def turns_per_second(self) -> float:
        """Turns completed per second of measured time, turns run one after another."""
        return len(self.samples) / sum(self.samples)


@dataclass(frozen=True)
class Plan:
    """How long to measure: seconds per configuration, minimum turns, rounds, warm-up."""

    seconds: float
    minimum: int
    rounds: int
    warmup: int


FULL = Plan(seconds=1.0, minimum=50, rounds=5, warmup=50)
QUICK = Plan(seconds=0.1, minimum=10, rounds=2, warmup=5)


async def sample(turn: Turn, seconds: float, minimum: int, into: list[float]) -> None:
    """Run `turn` for at least `seconds` and `minimum` times, appending each duration."""
    clock = time.perf_counter
    gc.collect()
    taken = 0
    deadline = clock() + seconds
    while taken < minimum or clock() < deadline:
        start = clock()
        await turn()
        into.append(clock() - start)
        taken += 1


async def compare(setup: Setup, plan: Plan) -> tuple[Timing, Timing]:
    """Time mnemon and baseline turns in alternating rounds, so drift hits both alike."""
    for _ in range(plan.warmup):
        await setup.mnemon_turn()
        await setup.baseline_turn()
    ours: list[float] = []
    theirs: list[float] = []
    per_round = plan.seconds / plan.rounds
    minimum = -(-plan.minimum // plan.rounds)
    for _ in range(plan.rounds):
        await sample(setup.mnemon_turn, per_round, minimum, ours)
        await sample(setup.baseline_turn, per_round, minimum, theirs)
    return Timing(tuple(ours)), Timing(tuple(theirs))


# ------------------------------------------------------------------------- reporting


@dataclass(frozen=True)
class Row:
    """One source count: mnemon and baseline timings."""

    count: int
    ours: Timing
    theirs: Timing

    @property
    def added_ms(self) -> float:
        """Median mnemon turn time minus median baseline turn time, in milliseconds."""
        return self.ours.median_ms - self.theirs.median_ms


_MS = "{:.3f} ms"


def _ms(value: float) -> str:
    return _MS.format(value)


def print_table(rows: Sequence[Row]) -> None:
    headers = (
        "sources",
        "mnemon median",
        "baseline median",
        "ratio",
        "mnemon turns/s",
        "baseline turns/s",
        "added per turn",
    )
    lines = [
        (
            str(row.count),
            _ms(row.ours.median_ms),
            _ms(row.theirs.median_ms),
            f"{row.ours.median_ms / row.theirs.median_ms:.1f}x",
            f"{row.ours.turns_per_second:,.0f}",
            f"{row.theirs.turns_per_second:,.0f}",
            _ms(row.added_ms),
        )
        for row in rows
    ]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *lines, strict=True)]
    for line in (headers, *lines):
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)))


async def run(plan: Plan) -> list[Check]:
    """Run every measurement, print its figures, and return the targets' checks."""
    print(
        f"mnemon compose benchmark: {BACKEND} on "
        f"Python {platform.python_version()} ({platform.machine()}), "
        f"{plan.seconds:g} s per configuration in {plan.rounds} alternating rounds"
    )
    print()
    print("Per-turn cost with in-memory Sources (median per turn; ratio = mnemon / baseline)")
    rows = []
    for count in SOURCE_COUNTS:
        setup = await open_setup(count, 0.0)
        try:
            ours, theirs = await compare(setup, plan)
        finally:
            await setup.host.dispose()
        rows.append(Row(count, ours, theirs))
    print_table(rows)
    samples = ", ".join(f"{row.count}: {len(row.ours.samples)}" for row in rows)
    print(f"(mnemon turns measured per source count: {samples})")

    print()
    delay_ms = LATENCY_DELAY * 1_000
    print(
        f"Latency with {LATENCY_SOURCES} Sources whose project() sleeps {delay_ms:g} ms "
        "(facts() does not sleep)"
    )
    latency_plan = Plan(plan.seconds, plan.minimum, plan.rounds, min(plan.warmup, 5))
    setup = await open_setup(LATENCY_SOURCES, LATENCY_DELAY)
    try:
        ours, theirs = await compare(setup, latency_plan)
    finally:
        await setup.host.dispose()
    latency_ratio = ours.median_ms / delay_ms
    for name, timing in (("mnemon", ours), ("baseline", theirs)):
        print(
            f"  {name:<8}  median turn {timing.median_ms:7.2f} ms  "
            f"= {timing.median_ms / delay_ms:.3f} x {delay_ms:g} ms  "
            f"({len(timing.samples)} turns)"
        )

    overhead = next(row for row in rows if row.count == OVERHEAD_SOURCES)
    one = next(row for row in rows if row.count == 1)
    sixteen = next(row for row in rows if row.count == 16)
    marginal_us = (sixteen.added_ms - one.added_ms) / 15 * 1_000
    composes = 1_000 / overhead.ours.median_ms
    baseline_ratio = overhead.ours.median_ms / overhead.theirs.median_ms
    return [
        Check(
            f"latency: mnemon median turn / {delay_ms:g} ms <= {MAX_LATENCY_RATIO:g}",
            latency_ratio,
            MAX_LATENCY_RATIO,
            shown="{:.3f}",
        ),
        Check(
            f"overhead: added per turn at {OVERHEAD_SOURCES} Sources < {MAX_ADDED_MS:g} ms",
            overhead.added_ms,
            MAX_ADDED_MS,
            strict=True,
            shown=_MS,
        ),
        Check(
            f"throughput: composes/s at {OVERHEAD_SOURCES} Sources (1 / median) "
            f">= {MIN_COMPOSES_PER_SECOND:,}",
            composes,
            MIN_COMPOSES_PER_SECOND,
            at_least=True,
            shown="{:,.0f}",
        ),
        Check(
            f"ratio: mnemon / bare task group at {OVERHEAD_SOURCES} Sources "
            f"<= {MAX_BASELINE_RATIO:g}",
            baseline_ratio,
            MAX_BASELINE_RATIO,
        ),
        Check(
            f"marginal: added per extra Source (1 to 16) < {MAX_MARGINAL_US:g} us",
            marginal_us,
            MAX_MARGINAL_US,
            strict=True,
            shown="{:.1f} us",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    options = parser.parse_args(argv)
    plan = QUICK if options.quick else FULL
    passed = report(repeat(options.runs, lambda: anyio.run(run, plan, backend=BACKEND)))
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
