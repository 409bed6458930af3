"""Interleaving: the conformance suite sets the order of a Source's `facts` and `project`.

The host calls `facts` then `project` for each turn, and turns whose calls never suspend run
one after the other, so a Source keeping one shared "last snapshot" looks correct. The probe
wraps the plugin under test: it records what `facts` and `project` returned for each scope and
can hold a scope's `project` until the suite lets it go, so `facts(A), facts(B), project(A)`
happens every time, not by luck.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from mnemon import Scope
from mnemon.sdk import (
    FactsRequest,
    MemoryContributions,
    PluginContext,
    ProjectionRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
)

__all__ = ["Hold", "InterleavingProbe", "Seen"]


def scope_key(scope: Scope | Mapping[str, Any]) -> str:
    """One scope's identity as the probe files it (the scope model's JSON)."""
    model = scope if isinstance(scope, Scope) else Scope.model_validate(dict(scope))
    return model.model_dump_json()


@dataclass
class Seen:
    """What one Source's last `facts` and `project` returned in one scope."""

    facts: SourceFacts | None = None
    projection: ViewContribution | None = None


@dataclass
class Hold:
    """A held `project` call: `reached` is set when it arrives, `release()` lets it run."""

    reached: anyio.Event = field(default_factory=anyio.Event)
    released: anyio.Event = field(default_factory=anyio.Event)

    def release(self) -> None:
        """Let the held call (and any later one in its scope) run."""
        self.released.set()


class InterleavingProbe:
    """Wraps a plugin's Sources to record and order their `facts` and `project` calls."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Seen] = {}
        self._holds: dict[tuple[str, str], Hold] = {}

    def plugin(self, plugin: Any) -> Any:
        """`plugin` with every Source it installs wrapped by this probe."""
        return _ProbedPlugin(plugin, self)

    def seen(self, source_key: str, scope: Mapping[str, Any]) -> Seen:
        """What the Source `source_key` last returned in `scope` (empty if it was not called)."""
        return self._seen.get((source_key, scope_key(scope)), Seen())

    def hold(self, source_key: str, scope: Mapping[str, Any]) -> Hold:
        """Hold the next `project` of `source_key` in `scope` until the hold is released."""
        hold = self._holds[source_key, scope_key(scope)] = Hold()
        return hold

    def release_all(self) -> None:
        """Release every hold; later `project` calls run at once."""
        for hold in self._holds.values():
            hold.release()
        self._holds.clear()

    def reset(self) -> None:
        """Release every hold and forget what was seen."""
        self.release_all()
        self._seen.clear()

    def _entry(self, source_key: str, scope: Scope) -> Seen:
        return self._seen.setdefault((source_key, scope_key(scope)), Seen())

    async def facts(self, runtime: Any, request: FactsRequest) -> Any:
        value = await runtime.facts(request)
        self._entry(request.instance_key, request.scope).facts = _as(SourceFacts, value)
        return value

    async def project(self, runtime: Any, request: ProjectionRequest) -> Any:
        hold = self._holds.get((request.instance_key, scope_key(request.scope)))
        if hold is not None:
            hold.reached.set()
            await hold.released.wait()
        value = await runtime.project(request)
        self._entry(request.instance_key, request.scope).projection = _as(ViewContribution, value)
        return value


def _as(model: Any, value: Any) -> Any:
    """`value` as `model`, or None when it is not one (the host reports that itself)."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValueError:  # pydantic's ValidationError is one
        return None


class _ProbedSource:
    """A Source runtime whose `facts` and `project` go through the probe; the rest is its own."""

    def __init__(self, runtime: Any, probe: InterleavingProbe) -> None:
        self._runtime = runtime
        self._probe = probe

    def __getattr__(self, name: str) -> Any:
        # query, mutate, manage and dispose exactly as the Source has them (or has not)
        return getattr(self._runtime, name)

    async def facts(self, request: FactsRequest) -> Any:
        return await self._probe.facts(self._runtime, request)

    async def project(self, request: ProjectionRequest) -> Any:
        return await self._probe.project(self._runtime, request)


def _probed_factory(
    create: Callable[[SourceInit], Any], probe: InterleavingProbe
) -> Callable[[SourceInit], Awaitable[_ProbedSource]]:
    async def probed(init: SourceInit) -> _ProbedSource:
        runtime = create(init)
        if inspect.isawaitable(runtime):
            runtime = await runtime
        return _ProbedSource(runtime, probe)

    return probed


class _ProbedService:
    """The entry's memory service, installing each Source definition with a probed factory."""

    def __init__(self, service: Any, probe: InterleavingProbe) -> None:
        self._service = service
        self._probe = probe

    def install_contributions(self, contributions: MemoryContributions) -> Callable[[], None]:
        sources = tuple(
            dataclasses.replace(source, create=_probed_factory(source.create, self._probe))
            for source in contributions.sources
        )
        installed: Callable[[], None] = self._service.install_contributions(
            dataclasses.replace(contributions, sources=sources)
        )
        return installed


class _ProbedContext(PluginContext):
    """The entry's own context but for its memory service; disposal goes to the host's."""

    __slots__ = ("_outer",)

    def __init__(self, outer: PluginContext, probe: InterleavingProbe) -> None:
        memory = _ProbedService(outer.memory, probe)
        super().__init__(outer.entry_id, outer.configuration, memory, config_dir=outer.config_dir)
        self._outer = outer

    def on_dispose(self, callback: Any) -> None:
        """Run `callback` when the entry is unmounted (the host's context keeps it)."""
        self._outer.on_dispose(callback)


class _ProbedPlugin:
    """`plugin`, applied with a context that installs its Sources probed."""

    def __init__(self, plugin: Any, probe: InterleavingProbe) -> None:
        self._plugin = plugin
        self._probe = probe
        descriptor = getattr(plugin, "memory_plugin", None)
        if descriptor is not None:
            self.memory_plugin = descriptor

    def apply(self, ctx: PluginContext) -> Any:
        return self._plugin.apply(_ProbedContext(ctx, self._probe))
