"""Observer hooks: what a host can watch without patching, through pluggy.

The hook specifications below (project name `mnemon`) are the whole observation surface. An
observer is any object with one or more `mnemon_observe_*` methods (marked with
`mnemon.hookimpl` or named exactly like the spec); pluggy checks each one against its spec
when it is registered. Arguments are coarse and low-cardinality by design: phases, type ids,
roles, outcomes, codes, counts and durations. Never query text, memory text, scope ids,
grants or secrets. An observer that raises is logged and skipped; it never breaks a turn.
"""

from __future__ import annotations

import inspect
import logging
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import pluggy

__all__ = ["PROJECT", "Observers", "SourceTelemetry", "hookimpl", "hookspec"]

PROJECT = "mnemon"
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks an observer's method as a mnemon hook implementation.
hookimpl = pluggy.HookimplMarker(PROJECT)
_log = logging.getLogger("mnemon.observe")

Phase = Literal["facts", "project", "query", "mutate", "manage", "dispose"]


class ObserverSpec:
    """The hooks an observer may implement; every argument is passed by keyword."""

    @hookspec
    def mnemon_observe_generation(
        self, state: str, generation_id: str | None, source_count: int, reason: str | None
    ) -> None:
        """The host's serving state changed (serving, incomplete, rejected, retired, disposed).

        `reason` is a coded cause when nothing serves (`missing-source`, ...), else None.
        """

    @hookspec
    def mnemon_observe_turn(
        self, duration: float, outcome: str, source_count: int, diagnostic_codes: tuple[str, ...]
    ) -> None:
        """A turn ended its composition: `composed`, `rejected`, `unavailable` or `cancelled`.

        `duration` is in seconds; the diagnostic codes are sorted and unique.
        """

    @hookspec
    def mnemon_observe_source_call(
        self,
        phase: Phase,
        type_id: str,
        role: str,
        outcome: str,
        error_code: str | None,
        duration: float,
        origin_code: str | None,
        retry_after: float | None,
    ) -> None:
        """One call into a Source: `outcome` is `ok`, `failed` or `timeout`.

        `error_code` is the Source's own `SourceError` code when it gave one; `origin_code`
        (the foreign system's code behind it) and `retry_after` (seconds) are the error's
        too. All three are codes or numbers, never message text.
        """

    @hookspec
    def mnemon_observe_route(
        self,
        type_id: str,
        route_id: str,
        outcome: str,
        error_code: str | None,
        items: int,
        truncated: bool,
        duration: float,
        origin_code: str | None,
        retry_after: float | None,
    ) -> None:
        """A route read ended: `outcome` `ok` or `failed` (`error_code` says why).

        `origin_code` and `retry_after` are the Source's `SourceError`'s, when it raised one.
        """

    @hookspec
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
        """A Source's own call to the system behind it, as the Source reports it.

        `name` is the Source's name for such calls (a span name, like
        `acme.memory.provider`), `operation` what was done (`search`), `outcome`
        `ok` or `failed`, `counts` what it moved (`results`, `units_accepted`, ...) and
        `attributes` the Source's own low-cardinality labels (a provider's name). Every value is
        a short code or a number: `SourceTelemetry.record` refuses anything else.
        """

    @hookspec
    def mnemon_observe_action(
        self,
        type_id: str,
        action_id: str,
        completion: str | None,
        error_code: str | None,
        duration: float,
        origin_code: str | None,
        retry_after: float | None,
    ) -> None:
        """A write ended; `completion` is the receipt's (None when nothing was attempted).

        `origin_code` and `retry_after` are the Source's `SourceError`'s, when it raised one.
        """

    @hookspec
    def mnemon_observe_maintenance(self, step: str, outcome: str) -> None:
        """One step of a maintenance run ended, in the order it ran.

        `step` is `plan`, `archive-copy` (the copy into the receiving Source),
        `archive-remove` (the original's removal) or `task`; `outcome` is the step's
        coded result (`planned`, `refused`, `committed`, `accepted`, `replayed`, `removed`,
        `gone`, `kept`, `unknown`, ...).
        """


class _Manager(pluggy.PluginManager):
    # like pytest's `pytest_` functions: a method named `mnemon_*` is a hook implementation
    # even unmarked, so a misspelt one is reported instead of silently never called
    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        options = super().parse_hookimpl_opts(plugin, name)  # type: ignore[arg-type,unused-ignore]
        unmarked = options is None and name.startswith("mnemon_")
        if unmarked and inspect.isroutine(getattr(plugin, name, None)):
            return {}
        return options


class Observers:
    """The host's registered observers; calling a hook with none registered costs nothing."""

    def __init__(self, observers: Iterable[object] = ()) -> None:
        self._manager = _Manager(PROJECT)
        self._manager.add_hookspecs(ObserverSpec)
        # per hook, (function, its arguments' picker, observer name): built once, reused
        self._calls: dict[str, tuple[tuple[Any, Any, str], ...]] = {}
        self.active = False
        for observer in observers:
            self.register(observer)

    def register(self, observer: object) -> None:
        """Register one observer; pluggy checks its hooks against the specifications.

        Raises:
            pluggy.PluginValidationError: pluggy's own error for a misspelt hook or an
                argument the specification does not have; the observer is not registered.
        """
        self._manager.register(observer)
        try:
            self._manager.check_pending()
        except pluggy.PluginValidationError:
            self._manager.unregister(observer)
            raise
        self._calls.clear()
        self.active = True

    def _implementations(self, hook: str) -> tuple[tuple[Any, Any, str], ...]:
        calls = self._calls.get(hook)
        if calls is None:
            implementations = getattr(self._manager.hook, hook).get_hookimpls()
            # like pluggy, call each implementation with its own arguments, by position
            calls = tuple(
                (i.function, _positional(tuple(i.argnames)), i.plugin_name) for i in implementations
            )
            self._calls[hook] = calls
        return calls

    def emit(self, hook: str, **arguments: Any) -> None:
        """Call `hook` on every observer; an observer's failure is logged, never raised."""
        if not self.active:
            return
        for function, pick, observer in self._implementations(hook):
            try:
                function(*pick(arguments))
            except Exception:
                _log.warning("observer %s failed in %s", observer, hook)
                _log.debug("observer failure", exc_info=True)


def _positional(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A function picking `names` from a hook's arguments, in order, as a tuple."""
    if len(names) == 1:
        (name,) = names
        return lambda arguments: (arguments[name],)
    if names:
        pick: Callable[[dict[str, Any]], tuple[Any, ...]] = operator.itemgetter(*names)
        return pick
    return lambda arguments: ()


_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+){0,7}$")
_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_MOST_LABELS = 8


class SourceTelemetry:
    """A Source's handle for reporting its own calls (`SourceInit.telemetry`) to observers.

    Recording costs nothing when no observer is registered.
    """

    def __init__(self, observers: Observers | None, type_id: str) -> None:
        self._observers = observers
        self._type_id = type_id

    def record(
        self,
        name: str,
        *,
        operation: str,
        outcome: str,
        duration: float,
        error_code: str | None = None,
        counts: Mapping[str, int] | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        """Report one call: `name` a dotted lowercase name, every other value a short code.

        Raises:
            ValueError: a value that is not a code, a count that is not a non-negative
                integer, or more than 8 counts or attributes (the message names which).
        """
        if not _NAME.fullmatch(name) or len(name) > 64:
            raise ValueError("telemetry name: dotted lowercase words, at most 64 characters")
        for label, value in (("operation", operation), ("outcome", outcome)):
            if not _CODE.fullmatch(value):
                raise ValueError(f"telemetry {label}: a code of at most 64 characters")
        if error_code is not None and not _CODE.fullmatch(error_code):
            raise ValueError("telemetry error_code: a code of at most 64 characters")
        counted = dict(counts or {})
        labels = dict(attributes or {})
        if len(counted) > _MOST_LABELS or len(labels) > _MOST_LABELS:
            raise ValueError(f"telemetry: at most {_MOST_LABELS} counts and attributes")
        for key, count in counted.items():
            usable = isinstance(count, int) and not isinstance(count, bool) and count >= 0
            if not _NAME.fullmatch(key) or not usable:
                raise ValueError(f"telemetry count {key!r}: a name and a non-negative integer")
        for key, value in labels.items():
            if not _NAME.fullmatch(key) or not isinstance(value, str) or not _CODE.fullmatch(value):
                raise ValueError(f"telemetry attribute {key!r}: a name and a code")
        if self._observers is None or not self._observers.active:
            return
        self._observers.emit(
            "mnemon_observe_source_operation",
            type_id=self._type_id,
            name=name,
            operation=operation,
            outcome=outcome,
            error_code=error_code,
            duration=max(0.0, float(duration)),
            counts=counted,
            attributes=labels,
        )
