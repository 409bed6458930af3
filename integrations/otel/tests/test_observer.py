"""OpenTelemetryObserver on a real host, read back through the SDK's in-memory exporter and reader."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mnemon_otel import INSTRUMENTATION_NAME, OpenTelemetryObserver
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, MetricsData
from opentelemetry.sdk.metrics.export import NumberDataPoint as NumberPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mnemon import ActionError, RouteError, SourceError
from mnemon.sdk import (
    FactsRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    define_memory_source,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner, SelectAll, StubSource

SECRET = "tok-SECRET-7f3a"
MEMORY = "memory-MARKER-91c2"
SCOPE = {"user_id": "ada-7", "tenant_id": "acme-9", "session_id": "sess-5d"}
# what must never reach telemetry: a secret, memory text, the scope's ids, View ids and grants
FORBIDDEN = (SECRET, MEMORY, "ada-7", "acme-9", "sess-5d", "view:", "grant-value-3e")

SOURCE_KEYS = {"mnemon.phase", "mnemon.source.type", "mnemon.outcome"}
ROUTE_KEYS = {"mnemon.source.type", "mnemon.route.id", "mnemon.outcome", "mnemon.route.truncated"}
ACTION_KEYS = {"mnemon.source.type", "mnemon.action.id", "mnemon.outcome"}
TURN_KEYS = {"mnemon.outcome", "mnemon.source.count", "mnemon.diagnostic.codes"}


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def observer(self) -> OpenTelemetryObserver:
        return OpenTelemetryObserver(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        spans = self.spans.get_finished_spans()
        return [span for span in spans if name is None or span.name == name]

    def read_metrics(self) -> MetricsData:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return data

    def points(self, data: MetricsData, name: str) -> list[Any]:
        found = [
            metric
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            if scope.scope.name == INSTRUMENTATION_NAME
            for metric in scope.metrics
            if metric.name == name
        ]
        assert len(found) == 1, f"metric {name} was not recorded exactly once: {found}"
        return list(found[0].data.data_points)


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(spans, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def _items(request: QueryRequest) -> list[tuple[str, str]]:
    if request.input.get("query") == "fail":
        raise SourceError("rate_limited", f"slow down, token {SECRET}")
    return [("m1", f"{MEMORY} one"), ("m2", f"{MEMORY} two")]


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def _one_turn_of_everything(runner: MemoryCompositionRunner) -> None:
    source = StubSource(
        "notes", type_id="stub", text=f"{MEMORY} projected", routes=["recall"], actions=["write"]
    )
    source.items = _items
    await runner.mount(source, instance_id="notes")
    await runner.mount(SelectAll(), instance_id="strategy")
    async with await runner.begin_turn({"scope": SCOPE}) as turn:
        assert MEMORY in turn.view.fragments[0].text
        evidence = await turn.execute_route("source:notes/recall", {"query": MEMORY})
        assert len(evidence.items) == 2
        with pytest.raises(RouteError) as failed:
            await turn.execute_route("source:notes/recall", {"query": "fail"})
        assert failed.value.code == "rate_limited"
        receipt = await turn.execute_action(
            "source:notes/write", {"text": f"{MEMORY} {SECRET}"}, lambda offer: True
        )
        assert receipt.completion == "accepted"
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:notes/write", {"text": MEMORY}, lambda offer: False)
        assert refused.value.code == "not-authorized"


async def test_one_span_per_call_with_exactly_the_allowed_attributes(
    telemetry: Telemetry,
) -> None:
    async with MemoryCompositionRunner(observers=[telemetry.observer()]) as runner:
        await _one_turn_of_everything(runner)

    by_name: dict[str, list[ReadableSpan]] = {}
    for span in telemetry.finished():
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == INSTRUMENTATION_NAME
        by_name.setdefault(span.name, []).append(span)
    # one Source (without dispose()): one span per phase, one per route read and write, one per turn
    assert sorted((name, len(spans)) for name, spans in by_name.items()) == [
        ("mnemon.action", 2),
        ("mnemon.route", 2),
        ("mnemon.source.facts", 1),
        ("mnemon.source.mutate", 1),
        ("mnemon.source.project", 1),
        ("mnemon.source.query", 2),
        ("mnemon.turn.compose", 1),
    ]

    for phase in ("facts", "project", "mutate"):
        [span] = by_name[f"mnemon.source.{phase}"]
        assert _attributes(span) == {
            "mnemon.phase": phase,
            "mnemon.source.type": "stub",
            "mnemon.outcome": "ok",
        }
        assert span.status.status_code is StatusCode.UNSET
    ok_query, failed_query = sorted(
        by_name["mnemon.source.query"], key=lambda s: "mnemon.error.code" in _attributes(s)
    )
    assert set(_attributes(ok_query)) == SOURCE_KEYS
    assert _attributes(failed_query) == {
        "mnemon.phase": "query",
        "mnemon.source.type": "stub",
        "mnemon.outcome": "failed",
        "mnemon.error.code": "rate_limited",
    }
    assert failed_query.status.status_code is StatusCode.ERROR
    assert failed_query.status.description is None

    read, refused_read = by_name["mnemon.route"]
    assert _attributes(read) == {
        "mnemon.source.type": "stub",
        "mnemon.route.id": "recall",
        "mnemon.outcome": "ok",
        "mnemon.route.truncated": False,
    }
    assert _attributes(refused_read) == {
        "mnemon.source.type": "stub",
        "mnemon.route.id": "recall",
        "mnemon.outcome": "failed",
        "mnemon.error.code": "rate_limited",
        "mnemon.route.truncated": False,
    }
    assert set(_attributes(refused_read)) == ROUTE_KEYS | {"mnemon.error.code"}

    write, refused_write = by_name["mnemon.action"]
    assert _attributes(write) == {
        "mnemon.source.type": "stub",
        "mnemon.action.id": "write",
        "mnemon.outcome": "ok",
        "mnemon.action.completion": "accepted",
    }
    assert _attributes(refused_write) == {
        "mnemon.source.type": "stub",
        "mnemon.action.id": "write",
        "mnemon.outcome": "failed",
        "mnemon.error.code": "not-authorized",
    }
    assert set(_attributes(refused_write)) == ACTION_KEYS | {"mnemon.error.code"}
    assert refused_write.status.status_code is StatusCode.ERROR

    [compose] = by_name["mnemon.turn.compose"]
    assert _attributes(compose) == {
        "mnemon.outcome": "composed",
        "mnemon.source.count": 1,
        "mnemon.diagnostic.codes": (),
    }
    assert set(_attributes(compose)) == TURN_KEYS


async def test_metrics_count_calls_durations_items_and_receipts(telemetry: Telemetry) -> None:
    async with MemoryCompositionRunner(observers=[telemetry.observer()]) as runner:
        await _one_turn_of_everything(runner)
    data = telemetry.read_metrics()

    calls = {
        (p.attributes["mnemon.phase"], p.attributes["mnemon.outcome"]): p.value
        for p in telemetry.points(data, "mnemon.source.calls")
        if isinstance(p, NumberPoint)
    }
    assert calls == {
        ("facts", "ok"): 1,
        ("project", "ok"): 1,
        ("query", "ok"): 1,
        ("query", "failed"): 1,
        ("mutate", "ok"): 1,
    }
    durations = telemetry.points(data, "mnemon.source.duration")
    assert sum(p.count for p in durations) == 5
    assert all(isinstance(p, HistogramDataPoint) and p.min >= 0 for p in durations)
    for point in [*telemetry.points(data, "mnemon.source.calls"), *durations]:
        keys = set(point.attributes)
        assert keys in (SOURCE_KEYS, SOURCE_KEYS | {"mnemon.error.code"})

    [turn] = telemetry.points(data, "mnemon.turn.duration")
    assert dict(turn.attributes) == {"mnemon.outcome": "composed"}
    assert turn.count == 1

    items = {
        p.attributes["mnemon.outcome"]: (p.count, p.sum)
        for p in telemetry.points(data, "mnemon.route.items")
    }
    assert items == {"ok": (1, 2), "failed": (1, 0)}

    [receipts] = telemetry.points(data, "mnemon.action.receipts")
    assert dict(receipts.attributes) == {
        "mnemon.source.type": "stub",
        "mnemon.action.id": "write",
        "mnemon.action.completion": "accepted",
    }
    assert receipts.value == 1  # the refused write made no receipt


async def test_a_secret_memory_text_and_scope_ids_never_reach_telemetry(
    telemetry: Telemetry,
) -> None:
    async with MemoryCompositionRunner(observers=[telemetry.observer()]) as runner:
        await _one_turn_of_everything(runner)
    exported = [span.to_json() for span in telemetry.finished()]
    exported.append(telemetry.read_metrics().to_json())
    everything = "\n".join(exported)
    assert "mnemon.route" in everything
    assert "mnemon.action.receipts" in everything
    for forbidden in FORBIDDEN:
        assert forbidden not in everything


class _Hanging:
    """A Source whose facts() never answers."""

    def __init__(self) -> None:
        self.definition = define_memory_source(
            {
                "type_id": "hanging",
                "package_name": "mnemon-otel-tests",
                "role": "notes",
                "capabilities": ["project"],
                "consistency": "exact-snapshot",
            },
            self._create,
        )

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, sources=[self.definition])

    def _create(self, init: SourceInit) -> _Hanging:
        return self

    async def facts(self, request: FactsRequest) -> SourceFacts:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        raise AssertionError("never selected: its facts never came")

    async def dispose(self) -> None:
        self.disposed = True


async def test_a_timed_out_source_is_an_error_span_and_a_coded_turn(
    telemetry: Telemetry,
) -> None:
    async with MemoryCompositionRunner(
        source_timeout=0.05, observers=[telemetry.observer()]
    ) as runner:
        await runner.mount(_Hanging(), instance_id="slow")
        await runner.mount(StubSource("notes", text=MEMORY), instance_id="notes")
        await runner.mount(SelectAll(), instance_id="strategy")
        async with await runner.begin_turn({"scope": SCOPE}) as turn:
            codes = sorted({d.code for d in turn.view.diagnostics})
    assert "source-facts-timeout" in codes
    facts = {
        _attributes(s)["mnemon.source.type"]: s for s in telemetry.finished("mnemon.source.facts")
    }
    assert _attributes(facts["hanging"])["mnemon.outcome"] == "timeout"
    assert facts["hanging"].status.status_code is StatusCode.ERROR
    assert _attributes(facts["stub"])["mnemon.outcome"] == "ok"
    [compose] = telemetry.finished("mnemon.turn.compose")
    assert _attributes(compose)["mnemon.diagnostic.codes"] == tuple(codes)
    assert compose.status.status_code is StatusCode.UNSET  # degraded, still composed
    [dispose] = telemetry.finished("mnemon.source.dispose")  # only this Source has dispose()
    assert _attributes(dispose) == {
        "mnemon.phase": "dispose",
        "mnemon.source.type": "hanging",
        "mnemon.outcome": "ok",
    }


async def test_spans_cover_the_reported_duration_inside_the_call(telemetry: Telemetry) -> None:
    before = time.time_ns()
    async with MemoryCompositionRunner(observers=[telemetry.observer()]) as runner:
        await runner.mount(StubSource("notes", text=MEMORY), instance_id="notes")
        await runner.mount(SelectAll(), instance_id="strategy")
        async with await runner.begin_turn({"scope": SCOPE}):
            pass
    after = time.time_ns()
    [compose] = telemetry.finished("mnemon.turn.compose")
    assert compose.start_time is not None
    assert compose.end_time is not None
    assert before <= compose.start_time < compose.end_time <= after
    # the span is placed from the duration mnemon measured, not from when it was reported
    [turn] = telemetry.points(telemetry.read_metrics(), "mnemon.turn.duration")
    assert abs((compose.end_time - compose.start_time) / 1e9 - turn.sum) < 1e-6


async def test_spans_are_children_of_the_applications_current_span(
    telemetry: Telemetry,
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("agent")
    async with MemoryCompositionRunner(observers=[telemetry.observer()]) as runner:
        await runner.mount(StubSource("notes", text=MEMORY), instance_id="notes")
        await runner.mount(SelectAll(), instance_id="strategy")
        with tracer.start_as_current_span("agent.turn") as parent:
            async with await runner.begin_turn({"scope": SCOPE}):
                pass
    context = parent.get_span_context()
    spans = [
        *telemetry.finished("mnemon.turn.compose"),
        *telemetry.finished("mnemon.source.facts"),
        *telemetry.finished("mnemon.source.project"),
    ]
    assert len(spans) == 3
    for span in spans:
        assert span.parent is not None
        assert (span.parent.trace_id, span.parent.span_id) == (context.trace_id, context.span_id)


async def test_without_an_sdk_the_observer_is_a_quiet_no_op() -> None:
    # the global providers are the API's no-op ones unless the application installs the SDK
    async with MemoryCompositionRunner(observers=[OpenTelemetryObserver()]) as runner:
        await runner.mount(StubSource("notes", text=MEMORY), instance_id="notes")
        await runner.mount(SelectAll(), instance_id="strategy")
        async with await runner.begin_turn({"scope": SCOPE}) as turn:
            assert MEMORY in turn.view.fragments[0].text


GLOBAL_PROVIDERS = """
import json

import anyio
from mnemon_otel import OpenTelemetryObserver
from mnemon_testing import MemoryCompositionRunner, SelectAll, StubSource
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

observer = OpenTelemetryObserver()  # made before the application installs the SDK
spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tracer_provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))


async def main():
    async with MemoryCompositionRunner(observers=[observer]) as runner:
        await runner.mount(StubSource("notes"), instance_id="notes")
        await runner.mount(SelectAll(), instance_id="strategy")
        async with await runner.begin_turn():
            pass


anyio.run(main)
names = {span.name for span in spans.get_finished_spans()}
data = reader.get_metrics_data()
names |= {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
print(json.dumps(sorted(names)))
"""


def test_the_global_providers_are_used_even_when_installed_after_the_observer(
    tmp_path: Path,
) -> None:
    # the global providers can be set once per process: this runs in a process of its own
    script = tmp_path / "app.py"
    script.write_text(GLOBAL_PROVIDERS, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        "mnemon.source.calls",
        "mnemon.source.duration",
        "mnemon.source.facts",
        "mnemon.source.project",
        "mnemon.turn.compose",
        "mnemon.turn.duration",
    ]


def test_a_sources_own_calls_become_spans_and_metrics_under_its_name(
    telemetry: Telemetry,
) -> None:
    from mnemon._observe import Observers
    from mnemon.sdk import SourceTelemetry

    reporting = SourceTelemetry(Observers([telemetry.observer()]), "nexent-provider")
    name = "nexent.memory.external_provider"
    labels = {"provider": "mem0"}
    reporting.record(name, operation="search", outcome="ok", duration=0.01,
                     counts={"results": 3}, attributes=labels)  # fmt: skip
    reporting.record(name, operation="ingest", outcome="failed", duration=0.02,
                     error_code="rate_limited", counts={"units_accepted": 0}, attributes=labels)  # fmt: skip
    spans = telemetry.finished(name)
    assert [_attributes(s)["operation"] for s in spans] == ["search", "ingest"]
    assert _attributes(spans[1]) == {
        "provider": "mem0",
        "operation": "ingest",
        "outcome": "failed",
        "error_code": "rate_limited",
        "mnemon.source.type": "nexent-provider",
    }
    assert spans[1].status.status_code == StatusCode.ERROR
    data = telemetry.read_metrics()
    assert sum(p.value for p in telemetry.points(data, f"{name}.requests")) == 2
    assert [p.value for p in telemetry.points(data, f"{name}.results")] == [3]
    assert len(telemetry.points(data, f"{name}.duration")) == 2
