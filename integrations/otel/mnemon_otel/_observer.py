"""The OpenTelemetry observer: mnemon's observer hooks turned into spans and metrics.

mnemon reports each turn, Source call, route read and write after it ended, with its duration,
so every span is created with explicit start and end times (it ends when it is reported).
Only coded, low-cardinality values become attributes: the hooks never carry query text,
memory text, scope ids, grants or secrets, and nothing here adds any.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from opentelemetry import metrics, trace
from opentelemetry.metrics import Counter, Histogram, MeterProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

import mnemon

__all__ = ["INSTRUMENTATION_NAME", "OpenTelemetryObserver"]

#: The instrumentation scope of every span and instrument this package creates.
INSTRUMENTATION_NAME = "mnemon_otel"

try:
    _VERSION = version("mnemon-otel")
except PackageNotFoundError:  # run from a source tree that is not installed
    _VERSION = ""

_PHASE = "mnemon.phase"
_SOURCE_TYPE = "mnemon.source.type"
_OUTCOME = "mnemon.outcome"
_ERROR_CODE = "mnemon.error.code"
_ROUTE_ID = "mnemon.route.id"
_ACTION_ID = "mnemon.action.id"
_COMPLETION = "mnemon.action.completion"
_TRUNCATED = "mnemon.route.truncated"
_SOURCE_COUNT = "mnemon.source.count"
_DIAGNOSTIC_CODES = "mnemon.diagnostic.codes"

# turns and Source calls take from tens of microseconds to the 300 s deadline ceiling; the
# SDK's default buckets (0 to 10,000) are meant for milliseconds and would put all of it in one
_SECONDS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip
_ITEMS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
_OUTCOMES_OK = frozenset({"ok", "composed", "cancelled"})  # the caller's cancel is no failure

Attributes = dict[str, AttributeValue]


def _status(outcome: str) -> Status | None:
    return None if outcome in _OUTCOMES_OK else Status(StatusCode.ERROR)


class _GlobalProvider:
    """Whether the application has installed a global provider (an SDK) yet, asked cheaply.

    Until it does, the API's global provider is a proxy whose instruments and spans do
    nothing, and asking the API for the global provider costs an `os.environ` miss (a caught
    `KeyError`, a few microseconds) each time: more than the rest of a hook. A global provider
    is set once per process and never replaced, so the answer is looked up in the module
    global the API keeps, and kept once it is yes. An API release without that global makes
    the observer record through the API on every call: correct, only slower.
    """

    def __init__(
        self, module: ModuleType | None, attribute: str, get: Callable[[], object]
    ) -> None:
        get()  # the API loads a provider named by its OTEL_PYTHON_*_PROVIDER variable here
        self._module = module
        self._attribute = attribute
        self._installed = module is None or not hasattr(module, attribute)

    def installed(self) -> bool:
        if not self._installed and getattr(self._module, self._attribute) is not None:
            self._installed = True
        return self._installed


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - an API release that moved its globals
        return None


class OpenTelemetryObserver:
    """Report a host's turns, Source calls, route reads and writes to OpenTelemetry.

    Register it with `MemoryHost(observers=[OpenTelemetryObserver()])`. It only uses the
    OpenTelemetry API: spans and measurements go to the providers given here, or to the global
    ones the application configures with the SDK (before or after this object is made). With
    no SDK configured every call is a no-op.

    Spans: `mnemon.turn.compose`, `mnemon.source.<phase>` (`facts`, `project`, `query`,
    `mutate`, `manage`, `dispose`), `mnemon.route`, `mnemon.action`; they are children of the
    span current where mnemon reports them (the host application's own span, if any).
    Metrics: `mnemon.source.calls`, `mnemon.source.duration` (s), `mnemon.turn.duration` (s),
    `mnemon.route.items` and `mnemon.action.receipts` (by completion).

    A Source's own calls to the system behind it (`SourceTelemetry.record`) become spans named
    as the Source names them, with the attributes `operation`, `outcome`, `error_code` (when it
    failed) and the Source's own labels, and the metrics `<name>.requests`,
    `<name>.duration` (s) and one counter `<name>.<count>` per count it reports.

    Args:
        tracer_provider: where spans go; the global tracer provider when None.
        meter_provider: where measurements go; the global meter provider when None.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, _VERSION, tracer_provider=tracer_provider
        )
        # with the global providers, nothing is recorded until the application installs an
        # SDK: the API's proxies would build a no-op span or measurement for every call
        self._tracing = (
            None
            if tracer_provider is not None
            else _GlobalProvider(
                _module("opentelemetry.trace"), "_TRACER_PROVIDER", trace.get_tracer_provider
            )
        )
        self._metering = (
            None
            if meter_provider is not None
            else _GlobalProvider(
                _module("opentelemetry.metrics._internal"),
                "_METER_PROVIDER",
                metrics.get_meter_provider,
            )
        )
        meter = metrics.get_meter(INSTRUMENTATION_NAME, _VERSION, meter_provider=meter_provider)
        self._source_calls = meter.create_counter(
            "mnemon.source.calls", unit="{call}", description="Calls into memory Sources."
        )
        self._source_duration = meter.create_histogram(
            "mnemon.source.duration",
            unit="s",
            description="Duration of one call into a memory Source.",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._turn_duration = meter.create_histogram(
            "mnemon.turn.duration",
            unit="s",
            description="Time to compose one turn's memory View.",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )
        self._route_items = meter.create_histogram(
            "mnemon.route.items",
            unit="{item}",
            description="Evidence items returned by one route read.",
            explicit_bucket_boundaries_advisory=_ITEMS,
        )
        self._action_receipts = meter.create_counter(
            "mnemon.action.receipts",
            unit="{receipt}",
            description="Write receipts, by how far the write got.",
        )
        self._meter = meter
        # a Source's own instruments, made the first time it reports them
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}

    def _recording(self) -> tuple[bool, bool]:
        """Whether measurements and spans go anywhere (an SDK, or a provider given here)."""
        return (
            self._metering is None or self._metering.installed(),
            self._tracing is None or self._tracing.installed(),
        )

    def _span(
        self, name: str, duration: float, attributes: Attributes, status: Status | None
    ) -> None:
        end = time.time_ns()
        span = self._tracer.start_span(
            name,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=end - max(round(duration * 1e9), 0),
        )
        if status is not None:
            span.set_status(status)
        span.end(end_time=end)

    @mnemon.hookimpl
    def mnemon_observe_turn(
        self, duration: float, outcome: str, source_count: int, diagnostic_codes: tuple[str, ...]
    ) -> None:
        """Record a turn's composition: a `mnemon.turn.compose` span and its duration."""
        measuring, tracing = self._recording()
        if measuring:
            self._turn_duration.record(duration, {_OUTCOME: outcome})
        if tracing:
            attributes: Attributes = {
                _OUTCOME: outcome,
                _SOURCE_COUNT: source_count,
                _DIAGNOSTIC_CODES: diagnostic_codes,
            }
            self._span("mnemon.turn.compose", duration, attributes, _status(outcome))

    @mnemon.hookimpl
    def mnemon_observe_source_call(
        self,
        phase: str,
        type_id: str,
        outcome: str,
        error_code: str | None,
        duration: float,
    ) -> None:
        """Record one Source call: a `mnemon.source.<phase>` span, a count and a duration."""
        measuring, tracing = self._recording()
        if not (measuring or tracing):
            return
        attributes: Attributes = {_PHASE: phase, _SOURCE_TYPE: type_id, _OUTCOME: outcome}
        if error_code is not None:
            attributes[_ERROR_CODE] = error_code
        if measuring:
            self._source_calls.add(1, attributes)
            self._source_duration.record(duration, attributes)
        if tracing:
            self._span(f"mnemon.source.{phase}", duration, attributes, _status(outcome))

    @mnemon.hookimpl
    def mnemon_observe_route(
        self,
        type_id: str,
        route_id: str,
        outcome: str,
        error_code: str | None,
        items: int,
        truncated: bool,
        duration: float,
    ) -> None:
        """Record one route read: a `mnemon.route` span and the number of items it returned."""
        measuring, tracing = self._recording()
        if not (measuring or tracing):
            return
        attributes: Attributes = {_SOURCE_TYPE: type_id, _ROUTE_ID: route_id, _OUTCOME: outcome}
        if error_code is not None:
            attributes[_ERROR_CODE] = error_code
        if measuring:
            self._route_items.record(items, attributes)
        if tracing:
            attributes[_TRUNCATED] = truncated
            self._span("mnemon.route", duration, attributes, _status(outcome))

    def _counter(self, name: str) -> Counter:
        counter = self._counters.get(name)
        if counter is None:
            counter = self._counters[name] = self._meter.create_counter(name)
        return counter

    @mnemon.hookimpl
    def mnemon_observe_source_operation(
        self,
        type_id: str,
        name: str,
        operation: str,
        outcome: str,
        error_code: str | None,
        duration: float,
        counts: Mapping[str, int],
        attributes: Mapping[str, str],
    ) -> None:
        """Record a Source's own call: a span called `name` and the `<name>.*` metrics."""
        measuring, tracing = self._recording()
        if not (measuring or tracing):
            return
        labels: Attributes = {**attributes, "operation": operation, "outcome": outcome}
        if error_code is not None:
            labels["error_code"] = error_code
        if measuring:
            self._counter(f"{name}.requests").add(1, labels)
            histogram = self._histograms.get(name)
            if histogram is None:
                histogram = self._histograms[name] = self._meter.create_histogram(
                    f"{name}.duration", unit="s", explicit_bucket_boundaries_advisory=_SECONDS
                )
            histogram.record(duration, labels)
            for key, count in counts.items():
                self._counter(f"{name}.{key}").add(count, labels)
        if tracing:
            self._span(name, duration, {**labels, _SOURCE_TYPE: type_id}, _status(outcome))

    @mnemon.hookimpl
    def mnemon_observe_action(
        self,
        type_id: str,
        action_id: str,
        completion: str | None,
        error_code: str | None,
        duration: float,
    ) -> None:
        """Record one write: a `mnemon.action` span and, when there is a receipt, its count."""
        measuring, tracing = self._recording()
        if measuring and completion is not None:  # refused before the Source ran: no receipt
            self._action_receipts.add(
                1, {_SOURCE_TYPE: type_id, _ACTION_ID: action_id, _COMPLETION: completion}
            )
        if tracing:
            outcome = "ok" if error_code is None else "failed"
            attributes: Attributes = {
                _SOURCE_TYPE: type_id,
                _ACTION_ID: action_id,
                _OUTCOME: outcome,
            }
            if error_code is not None:
                attributes[_ERROR_CODE] = error_code
            if completion is not None:
                attributes[_COMPLETION] = completion
            self._span("mnemon.action", duration, attributes, _status(outcome))
