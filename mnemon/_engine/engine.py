"""The engine: which generation serves, which drain, and every change that moves them."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.lowlevel

from .._errors import CompositionRejected, CompositionUnavailable, InstallError
from .._install import Disposer, MemoryContributions
from .._json import thaw_json
from .._models import CompositionRequest, Diagnostic, HostSettings
from .._observe import Observers
from .assembly import PinnedView
from .compose import compose_view
from .generation import (
    Generation,
    GenerationPlan,
    Incomplete,
    Lease,
    plan_generation,
    realize_generation,
    trial_sources,
)
from .installed import RegistryState
from .pacing import Pacer
from .registry import Registry

__all__ = ["Engine", "EngineState", "EntryMemoryService"]

_log = logging.getLogger("mnemon.engine")
EngineState = Literal["empty", "incomplete", "rejected", "serving", "disposed"]


class EntryMemoryService:
    """The narrow memory service bound to one entry: only `install_contributions`."""

    __slots__ = ("_install",)

    def __init__(self, install: Callable[[MemoryContributions], Disposer]) -> None:
        self._install = install

    def install_contributions(self, contributions: MemoryContributions) -> Disposer:
        """Install one batch for this entry; returns its idempotent disposer."""
        return self._install(contributions)


class Engine:
    """Owns the registry, the serving and draining generations, and composition."""

    def __init__(self, settings: HostSettings, observers: Observers | None = None) -> None:
        self.observers = observers or Observers()
        self.registry = Registry()
        self.settings = settings
        self._serving: Generation | None = None
        self._draining: list[Generation] = []
        self._state: EngineState = "empty"
        self._diagnostics: tuple[Diagnostic, ...] = ()
        self._built: tuple[int, HostSettings] = (0, settings)
        self._lock = anyio.Lock()
        self._pending: set[anyio.CancelScope] = set()
        self._composing = 0  # admitted turns: composing, or held back by pacing
        self._pacer = Pacer()
        self._disposed = False

    # ------------------------------------------------------------------ changes

    @property
    def disposed(self) -> bool:
        return self._disposed

    @property
    def state(self) -> EngineState:
        return self._state

    @property
    def serving(self) -> Generation | None:
        return self._serving

    def _check_open(self) -> None:
        if self._disposed:
            raise InstallError("the memory host is disposed")

    async def change(
        self,
        stage: Callable[[], Awaitable[None]] | None = None,
        *,
        entry_ids: frozenset[str] = frozenset(),
        settings: HostSettings | None = None,
    ) -> None:
        """Apply a change atomically: nothing changes unless its candidate can serve.

        `stage` runs with installs staged (a mount's `apply`); `settings` replaces the host
        settings. A missing Source or Strategy is not a failure: the change is kept and the
        host reports `incomplete`.

        Raises:
            CompositionRejected: the candidate was rejected; the serving generation is kept.
        """
        async with self._lock:
            self._check_open()
            self.registry.begin_staging(entry_ids)
            committed = False
            try:
                if stage is not None:
                    await stage()
                candidate = self.registry.candidate()
                new_settings = settings or self.settings
                if candidate.installed == self.registry.state.installed:
                    candidate = self.registry.state
                try:
                    generation = await self._build(candidate, new_settings)
                except Incomplete as exc:
                    if exc.code == "missing-strategy" and candidate is not self.registry.state:
                        try:
                            # nothing can serve yet, but bad configuration fails at mount
                            await trial_sources(candidate, new_settings)
                        except CompositionRejected as rejected:
                            self._reject(rejected)
                            raise
                    self._adopt(candidate, new_settings)
                    committed = True
                    await self._become_incomplete(exc)
                    return
                except CompositionRejected as exc:
                    self._reject(exc)
                    raise
                self._adopt(candidate, new_settings)
                committed = True
                await self._serve(generation)
            finally:
                if not committed:
                    self.registry.end_staging(commit=False)

    def _adopt(self, candidate: RegistryState, settings: HostSettings) -> None:
        self.registry.end_staging(commit=candidate is not self.registry.state)
        self.settings = settings
        self._built = (self.registry.state.revision, settings)

    async def refresh(self) -> None:
        """Rebuild after changes made outside `change` (removals, late installs).

        Fails closed when the change removed something the serving generation used.
        """
        async with self._lock:
            await self._refresh_locked()

    async def _refresh_locked(self) -> None:
        state, settings = self.registry.state, self.settings
        if self._disposed or self._built == (state.revision, settings):
            return
        self._built = (state.revision, settings)
        try:
            generation = await self._build(state, settings)
        except Incomplete as exc:
            await self._become_incomplete(exc)
            return
        except CompositionRejected as exc:
            serving = self._serving
            self._reject(exc)
            if serving is not None and not _is_additive(serving.plan, state):
                # fail closed: what served is gone, so new turns get no View
                self._serving = None
                await self._retire(serving)
            return
        await self._serve(generation)

    async def _build(self, state: RegistryState, settings: HostSettings) -> Generation | None:
        plan = plan_generation(state, settings)
        if self._serving is not None and plan.id == self._serving.id:
            return None
        return await realize_generation(plan, self.observers)

    def _observe_state(self, reason: str | None = None) -> None:
        serving = self._serving
        self.observers.emit(
            "mnemon_observe_generation",
            state=self._state,
            generation_id=None if serving is None else serving.id,
            source_count=0 if serving is None else len(serving.sources),
            reason=reason,
        )

    async def _serve(self, generation: Generation | None) -> None:
        if generation is None:  # an identical generation is already serving
            self._state = "serving"
            self._diagnostics = self._serving.plan.diagnostics if self._serving else ()
            return
        previous, self._serving = self._serving, generation
        self._state = "serving"
        self._diagnostics = generation.plan.diagnostics
        self._observe_state()
        if previous is not None:
            await self._retire(previous)

    async def _become_incomplete(self, exc: Incomplete) -> None:
        self._state = "incomplete"
        self._diagnostics = (Diagnostic(code=exc.code, message=exc.message),)
        serving, self._serving = self._serving, None
        self._observe_state(exc.code)
        if serving is not None:
            await self._retire(serving)

    def _reject(self, exc: CompositionRejected) -> None:
        self._state = "rejected"
        # the message names rules and keys, never plugin text: safe for reports
        self._diagnostics = (Diagnostic(code="composition-rejected", message=_bounded(str(exc))),)
        _log.warning("memory candidate rejected: %s", _bounded(str(exc)))
        self._observe_state("composition-rejected")

    async def _retire(self, generation: Generation) -> None:
        if generation.leases:
            self._draining.append(generation)
        await generation.retire()

    # ------------------------------------------------------------------ turns

    async def compose(self, request: CompositionRequest) -> tuple[PinnedView, Lease]:
        """Lease the serving generation and compose a View on it.

        Raises:
            CompositionUnavailable: nothing serves, or the host was disposed meanwhile.
            CompositionRejected: the View was rejected; the lease is released.
        """
        started = time.perf_counter()
        outcome = "unavailable"
        pinned: PinnedView | None = None
        admitted = False
        try:
            limit = self.settings.max_concurrent_compositions
            if self._composing >= limit:
                # refused before any Source is asked: an overloaded host says so
                raise CompositionUnavailable(
                    f"the memory host is busy: {limit} turns are composing or waiting to, its "
                    "max_concurrent_compositions; try this turn again shortly"
                )
            self._composing += 1
            admitted = True
            outcome = "cancelled"
            # held back while the process is CPU-bound (see `pacing`); the generation is
            # leased once a place is had, so a turn held back composes on what serves then
            async with self._pacer.place():
                outcome = "unavailable"
                if self.registry.state.revision != self._built[0]:
                    await self.refresh()
                lease = self.lease()
                outcome = "cancelled"
                scope = anyio.CancelScope()
                self._pending.add(scope)
                try:
                    with scope:
                        pinned = await compose_view(lease.generation, request)
                    if pinned is None:
                        await anyio.lowlevel.checkpoint_if_cancelled()  # the caller's cancel wins
                        outcome = "unavailable"
                        raise CompositionUnavailable(
                            "the memory host was disposed during composition"
                        )
                except BaseException as exc:
                    if isinstance(exc, CompositionRejected):
                        outcome = "rejected"
                    with anyio.CancelScope(shield=True):
                        await lease.release()
                    raise
                finally:
                    self._pending.discard(scope)
            outcome = "composed"
            return pinned, lease
        finally:
            if admitted:
                self._composing -= 1
            if self.observers.active:
                codes = () if pinned is None else sorted({d.code for d in pinned.view.diagnostics})
                self.observers.emit(
                    "mnemon_observe_turn",
                    duration=time.perf_counter() - started,
                    outcome=outcome,
                    source_count=0 if pinned is None else len(pinned.view.consistency),
                    diagnostic_codes=tuple(codes),
                )

    def lease(self) -> Lease:
        """Lease the serving generation.

        Raises:
            CompositionUnavailable: the host is disposed or nothing serves.
        """
        if self._disposed:
            raise CompositionUnavailable("the memory host is disposed")
        if self._serving is None:
            reason = "; ".join(d.message for d in self._diagnostics) or "nothing is installed"
            raise CompositionUnavailable(
                f"no memory generation is serving ({self._state}: {reason})"
            )
        return self._serving.lease()

    @asynccontextmanager
    async def leased(self) -> AsyncIterator[Generation]:
        """Hold a lease on the serving generation for the length of one operation.

        Raises:
            CompositionUnavailable: the host is disposed or nothing serves.
        """
        lease = self.lease()
        try:
            yield lease.generation
        finally:
            with anyio.CancelScope(shield=True):
                await lease.release()

    # ------------------------------------------------------------------ lifetime

    async def dispose(self) -> None:
        """Abort pending compositions and retire everything; in-flight leases finish first."""
        if self._disposed:
            return
        self._disposed = True
        for scope in tuple(self._pending):
            scope.cancel()
        with anyio.CancelScope(shield=True):
            async with self._lock:
                serving, self._serving = self._serving, None
                self._state = "disposed"
                self._diagnostics = ()
                self._observe_state()
                if serving is not None:
                    await self._retire(serving)

    def report(self) -> dict[str, Any]:
        """A JSON-only picture of serving and draining generations."""
        self._draining = [g for g in self._draining if not g.disposed]
        serving = self._serving
        return {
            "state": self._state,
            "registry_revision": self.registry.state.revision,
            "source_timeout": self.settings.source_timeout,
            "data_dir": self.settings.data_dir,
            "serving": None if serving is None else _describe(serving),
            "draining": [{"generation_id": g.id, "leases": g.leases} for g in self._draining],
            "diagnostics": [thaw_json(d.model_dump()) for d in self._diagnostics],
        }


def _describe(generation: Generation) -> dict[str, Any]:
    plan = generation.plan
    return {
        "generation_id": generation.id,
        "leases": generation.leases,
        "strategy": {
            "key": plan.strategy.instance_key,
            "type_id": plan.strategy.type_id,
            "package_name": plan.strategy.package_name,
        },
        "sources": [
            {
                "key": slot.key,
                "type_id": slot.manifest.type_id,
                "role": slot.manifest.role,
                "package_name": slot.plan.provenance.package_name,
                "entry_id": slot.plan.provenance.entry_id,
                "consistency": slot.manifest.consistency,
                "partition_keys": list(slot.partition_keys),
            }
            for slot in generation.sources
        ],
        "extensions": [
            {"key": item.instance_key, "type_id": item.type_id} for item in plan.active_extensions
        ],
        "embedders": [
            {
                "key": item.instance_key,
                "type_id": item.type_id,
                "package_name": item.package_name,
                "spaces": [space.key for space in item.definition.manifest.spaces],
            }
            for item in plan.embedders
        ],
    }


def _is_additive(plan: GenerationPlan, state: RegistryState) -> bool:
    """Whether `state` still holds every contribution the plan's generation serves."""
    present = {(item.instance_key, item.batch) for item in state.installed}
    used = [source.installed for source in plan.sources]
    used += [plan.strategy, *plan.active_extensions]
    return all((item.instance_key, item.batch) in present for item in used)


def _bounded(text: str) -> str:
    return text if len(text) <= 500 else text[:497] + "..."
