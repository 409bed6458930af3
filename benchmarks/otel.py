"""Benchmark what `mnemon-otel` adds to a turn, against the same turn without an observer.

Run from the repository root::

    .venv/bin/python benchmarks/otel.py            # full run, about 10 s
    .venv/bin/python benchmarks/otel.py --quick    # a short smoke run
    .venv/bin/python benchmarks/otel.py --check    # exit 1 when the target fails

It reuses the setup of `compose.py` (in-memory Sources that cost next to nothing, one
Strategy selecting them all), so the turn is as cheap as mnemon can make it and any cost of
the observer shows in full. One host per configuration, each with 4 Sources; every turn
reports 9 spans (facts and project of each Source, the turn itself) and 17 measurements:

- **baseline**: the host without observers;
- **silent observer**: an observer whose hooks do nothing: what the core's own hook dispatch
  costs once anyone listens, whatever the observer;
- **API only**: `OpenTelemetryObserver()` with no SDK installed (the API's no-op providers);
- **SDK, 10% sampled**: the SDK with a parent-based 10% trace-id ratio sampler, a batch span
  processor and a metric reader; the unsampled spans are not recorded, metrics are;
- **SDK, all spans**: the same with every span sampled and exported.

The exporter drops what it is given after the batch processor's worker thread hands it over;
the metric reader is never collected. This measures what the host process pays per turn, not
what a real exporter's network costs on its own thread. Configurations are measured in
alternating rounds so that drift and noise hit them alike.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from compose import (
    BACKEND,
    FULL,
    QUICK,
    SCOPE,
    Plan,
    SourcePlugin,
    Timing,
    Turn,
    mount_checked,
    sample,
)
from mnemon_otel import OpenTelemetryObserver
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from targets import verdict

import mnemon

SOURCES = 4
MAX_OVERHEAD = 0.10  # what mnemon-otel itself may add to a turn, before an SDK records anything


class SilentObserver:
    """An observer that does nothing: what the core's hook dispatch alone costs."""

    @mnemon.hookimpl
    def mnemon_observe_source_call(self, phase: str, duration: float) -> None:
        """Ignore a Source call."""

    @mnemon.hookimpl
    def mnemon_observe_turn(self, duration: float) -> None:
        """Ignore a turn."""


class DiscardingExporter(SpanExporter):
    """Accept every batch and keep nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Drop `spans`."""
        return SpanExportResult.SUCCESS


@dataclass
class Configuration:
    """One host to time, and what to shut down afterwards."""

    name: str
    host: mnemon.MemoryHost
    turn: Turn
    providers: tuple[TracerProvider, MeterProvider] | None = None

    async def close(self) -> None:
        """Dispose the host, then flush and stop its providers."""
        await self.host.dispose()
        if self.providers is not None:
            for provider in self.providers:
                provider.shutdown()


def _sdk(sampler: Sampler) -> tuple[TracerProvider, MeterProvider]:
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


async def open_configuration(
    name: str, observers: list[object], providers: tuple[TracerProvider, MeterProvider] | None
) -> Configuration:
    """Mount the compose benchmark's Sources on a host with `observers`.

    Raises:
        RuntimeError: the View is not what the compose benchmark expects.
    """
    host = mnemon.MemoryHost(observers=observers)
    try:
        await mount_checked(host, SourcePlugin(0.0), SOURCES)
    except BaseException:
        await host.dispose()
        raise

    async def turn() -> None:
        async with host.turn(scope=SCOPE) as pinned:
            pinned.view.id  # noqa: B018 - reading the id is what a host does with a turn

    return Configuration(name, host, turn, providers)


async def open_all() -> list[Configuration]:
    """Open the five configurations, baseline first."""
    sampled = _sdk(ParentBased(TraceIdRatioBased(0.1)))
    recorded = _sdk(ALWAYS_ON)
    return [
        await open_configuration("baseline (no observer)", [], None),
        await open_configuration("silent observer (hooks only)", [SilentObserver()], None),
        await open_configuration("API only (no SDK)", [OpenTelemetryObserver()], None),
        await open_configuration(
            "SDK, 10% of spans sampled",
            [OpenTelemetryObserver(tracer_provider=sampled[0], meter_provider=sampled[1])],
            sampled,
        ),
        await open_configuration(
            "SDK, every span recorded",
            [OpenTelemetryObserver(tracer_provider=recorded[0], meter_provider=recorded[1])],
            recorded,
        ),
    ]


async def measure(configurations: list[Configuration], plan: Plan) -> list[Timing]:
    """Time every configuration in alternating rounds, after a warm-up of each."""
    for configuration in configurations:
        for _ in range(plan.warmup):
            await configuration.turn()
    samples: list[list[float]] = [[] for _ in configurations]
    per_round = plan.seconds / plan.rounds
    minimum = -(-plan.minimum // plan.rounds)
    for _ in range(plan.rounds):
        for configuration, into in zip(configurations, samples, strict=True):
            await sample(configuration.turn, per_round, minimum, into)
    return [Timing(tuple(found)) for found in samples]


async def run(plan: Plan) -> bool:
    """Measure, print the report, and return whether the target passed."""
    print(
        f"mnemon-otel overhead: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}), {SOURCES} in-memory Sources, "
        f"{plan.seconds:g} s per configuration in {plan.rounds} alternating rounds"
    )
    print()
    configurations = await open_all()
    try:
        timings = await measure(configurations, plan)
    finally:
        for configuration in configurations:
            await configuration.close()
    baseline = timings[0].median_ms
    width = max(len(c.name) for c in configurations)
    print(
        f"  {'configuration':<{width}}  {'median turn':>11}  {'turns/s':>8}  "
        f"{'added per turn':>14}  {'added':>7}"
    )
    for configuration, timing in zip(configurations, timings, strict=True):
        added = timing.median_ms - baseline
        print(
            f"  {configuration.name:<{width}}  {timing.median_ms:8.3f} ms  "
            f"{timing.turns_per_second:8,.0f}  {added:11.3f} ms  {added / baseline:+7.1%}"
        )
    turns = ", ".join(str(len(timing.samples)) for timing in timings)
    print(f"(turns measured per configuration: {turns})")
    overhead = timings[2].median_ms / baseline - 1
    passed = overhead < MAX_OVERHEAD
    print()
    print("Target (the SDK rows have none: they show what the SDK itself costs per turn)")
    print(
        f"  mnemon-otel without an SDK, added at {SOURCES} Sources < {MAX_OVERHEAD:.0%}  "
        f"{overhead:+.1%}  {verdict(passed)}"
    )
    return passed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run, for smoke tests")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target fails")
    options = parser.parse_args(argv)
    plan = QUICK if options.quick else FULL
    passed = anyio.run(run, plan, backend=BACKEND)
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
