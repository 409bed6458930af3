"""Generations: immutable, validated snapshots of everything installed, held by leases."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from .._awaited import awaited
from .._definitions import SourceDefinition, StrategyDefinition, ViewExtensionDefinition
from .._embedding import EmbedderDefinition, Embedding
from .._errors import CompositionRejected, CompositionUnavailable, DefinitionError, SourceError
from .._json import FrozenDict, configuration_digest, digest
from .._models import (
    Diagnostic,
    HostSettings,
    SourceAction,
    SourceInit,
    SourceManifest,
    SourceProvenance,
    SourceRoute,
    VectorSpace,
    partition_keys_problem,
)
from .._observe import Observers, SourceTelemetry
from .graph import check_activation_graph
from .installed import Installed, RegistryState

__all__ = [
    "Generation",
    "GenerationPlan",
    "Incomplete",
    "Lease",
    "SourceSlot",
    "plan_generation",
    "realize_generation",
    "trial_sources",
]

_log = logging.getLogger("mnemon.generation")

StrategyFallback = Literal["sole-strategy"]


class Incomplete(Exception):
    """Nothing can be served: a Source or the Strategy is missing."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """One Source of a planned generation."""

    installed: Installed
    manifest: SourceManifest
    provenance: SourceProvenance
    configuration: Mapping[str, Any]
    ceiling: frozenset[str] | None

    @property
    def key(self) -> str:
        return self.installed.instance_key


@dataclass(frozen=True, slots=True)
class GenerationPlan:
    """Everything a generation is made of, before any factory runs."""

    id: str
    revision: int
    settings: HostSettings
    sources: tuple[SourcePlan, ...]
    strategy: Installed
    active_extensions: tuple[Installed, ...]
    diagnostics: tuple[Diagnostic, ...]
    embedders: tuple[Installed, ...] = ()

    @property
    def strategy_definition(self) -> StrategyDefinition:
        definition = self.strategy.definition
        assert isinstance(definition, StrategyDefinition)
        return definition

    @property
    def vector_spaces(self) -> tuple[VectorSpace, ...]:
        """Every installed embedder's vector spaces, sorted by id (what a turn policy sees)."""
        spaces = (
            space
            for item in self.embedders
            if isinstance(item.definition, EmbedderDefinition)
            for space in item.definition.manifest.spaces
        )
        return tuple(sorted(spaces, key=lambda space: space.id))


def _select_strategy(
    strategies: tuple[Installed, ...], settings: HostSettings
) -> tuple[Installed, list[Diagnostic]]:
    selector = settings.strategy_type_id
    if selector is None:
        if len(strategies) != 1:
            raise CompositionRejected(
                f"exactly one memory Strategy must be selected; found {len(strategies)}"
            )
        return strategies[0], []
    by_key = selector.startswith("strategy:")
    matches = [
        item
        for item in strategies
        if (item.instance_key == selector if by_key else item.type_id == selector)
    ]
    if len(matches) == 1:
        return matches[0], []
    if len(matches) > 1:
        keys = ", ".join(item.instance_key for item in matches)
        raise CompositionRejected(f"memory Strategy selection {selector!r} is ambiguous: {keys}")
    if settings.strategy_fallback == "sole-strategy" and len(strategies) == 1:
        chosen = strategies[0]
        return chosen, [
            Diagnostic(
                code="strategy-fallback",
                message=(
                    f"selected memory Strategy {selector!r} is not installed; "
                    f"using the sole Strategy {chosen.instance_key}"
                ),
                key=chosen.instance_key,
            )
        ]
    # not an error: the selected Strategy may simply not be mounted yet
    raise Incomplete("missing-strategy", f"selected memory Strategy {selector!r} is not installed")


def _active_extensions(
    extensions: tuple[Installed, ...], strategy: StrategyDefinition
) -> tuple[tuple[Installed, ...], list[Diagnostic]]:
    active = []
    diagnostics = []
    for item in extensions:
        definition = item.definition
        assert isinstance(definition, ViewExtensionDefinition)
        declared = definition.slot in strategy.manifest.extension_slots
        if definition.strategy_type_id == strategy.type_id:
            if not declared:
                raise CompositionRejected(
                    f"View extension {item.instance_key} fills slot {definition.slot!r}, which "
                    f"Strategy {strategy.type_id} does not declare"
                )
            active.append(item)
        elif definition.strategy_type_id == "*" and declared:
            active.append(item)
        else:
            diagnostics.append(
                Diagnostic(
                    code="strategy-extension-inactive",
                    message=(
                        f"View extension {item.instance_key} ({definition.slot}) does not apply "
                        f"to the selected Strategy {strategy.type_id}"
                    ),
                    key=item.instance_key,
                )
            )
    return tuple(active), diagnostics


def _ceiling(settings: HostSettings, key: str) -> frozenset[str] | None:
    ceilings = settings.source_capabilities
    if ceilings is None:
        return None
    if key in ceilings:
        return ceilings[key]
    return ceilings.get("*")


def _source_plans(sources: tuple[Installed, ...], settings: HostSettings) -> list[SourcePlan]:
    plans = []
    for item in sources:
        source = item.definition
        assert isinstance(source, SourceDefinition)
        configuration: Mapping[str, Any] = item.configuration
        override = settings.source_configuration.get(item.instance_key)
        if override is not None:
            configuration = FrozenDict({**configuration, **override})
        plans.append(
            SourcePlan(
                installed=item,
                manifest=source.manifest,
                provenance=SourceProvenance(
                    entry_id=item.entry_id,
                    package_name=item.package_name,
                    type_id=source.type_id,
                ),
                configuration=configuration,
                ceiling=_ceiling(settings, item.instance_key),
            )
        )
    return plans


def plan_generation(state: RegistryState, settings: HostSettings) -> GenerationPlan:
    """Validate the registry state and settings into a plan; no factory runs here.

    Raises:
        Incomplete: no Source, no Strategy, or not the selected Strategy is installed.
        CompositionRejected: the activation graph or the Strategy selection is invalid.
    """
    sources = state.of_kind("source")
    strategies = state.of_kind("strategy")
    if not sources:
        raise Incomplete("missing-source", "no memory Source is installed")
    if not strategies:
        raise Incomplete("missing-strategy", "no memory Strategy is installed")
    check_activation_graph(state)
    strategy, diagnostics = _select_strategy(strategies, settings)
    definition = strategy.definition
    assert isinstance(definition, StrategyDefinition)
    active, inactive = _active_extensions(state.of_kind("strategy-extension"), definition)
    diagnostics.extend(inactive)

    plans = _source_plans(sources, settings)
    embedders = state.of_kind("embedder")
    identity = {
        "revision": state.revision,
        "source_timeout": settings.source_timeout,
        "max_input_bytes": settings.max_input_bytes,
        "data_dir": settings.data_dir,
        "config_dir": settings.config_dir,
        # Sources are made with the switches: a change makes a new generation
        **({"switches": dict(settings.switches)} if settings.switches else {}),
        "strategy": {
            "key": strategy.instance_key,
            "manifest": definition.manifest.model_dump(),
            "configuration": configuration_digest(strategy.configuration),
        },
        "extensions": [
            {
                "key": item.instance_key,
                "type_id": item.type_id,
                "slot": item.definition.slot,
                "configuration": configuration_digest(item.configuration),
            }
            for item in active
        ],
        "sources": [
            {
                "key": plan.key,
                "manifest": plan.manifest.model_dump(),
                "provenance": plan.provenance.model_dump(),
                "configuration": configuration_digest(plan.configuration),
                "ceiling": None if plan.ceiling is None else sorted(plan.ceiling),
            }
            for plan in plans
        ],
        # Sources are made with the embedders: another embedder or configuration is another
        # generation (absent when there is none, so generation ids stay as they were)
        **(
            {
                "embedders": [
                    {
                        "key": item.instance_key,
                        "manifest": item.definition.manifest.model_dump(),
                        "configuration": configuration_digest(item.configuration),
                    }
                    for item in embedders
                ]
            }
            if embedders
            else {}
        ),
    }
    diagnostics.sort(key=lambda item: (item.key or "", item.code))
    return GenerationPlan(
        id=digest("generation", identity),
        revision=state.revision,
        settings=settings,
        sources=tuple(plans),
        strategy=strategy,
        active_extensions=active,
        diagnostics=tuple(diagnostics),
        embedders=embedders,
    )


@dataclass(frozen=True, slots=True)
class SourceSlot:
    """A live Source runtime of a generation, with the routes and actions it may offer."""

    plan: SourcePlan
    runtime: Any
    routes: tuple[SourceRoute, ...] = ()
    actions: tuple[SourceAction, ...] = ()
    # the scope ids this instance partitions by: its runtime's, else its manifest's
    partition_keys: tuple[str, ...] = ()
    # read several times per Source in every turn: plain attributes, not properties
    key: str = field(init=False)
    manifest: SourceManifest = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.plan.key)
        object.__setattr__(self, "manifest", self.plan.manifest)


class Lease:
    """A hold on one generation; the generation is disposed only after its last lease ends."""

    __slots__ = ("_generation", "_released")

    def __init__(self, generation: Generation) -> None:
        self._generation = generation
        self._released = False

    @property
    def generation(self) -> Generation:
        return self._generation

    async def release(self) -> None:
        """End this hold (idempotent); may dispose a retired generation."""
        if self._released:
            return
        self._released = True
        await self._generation._release()


class Generation:
    """Live Source runtimes plus the plan they were built from, counted by leases."""

    def __init__(
        self,
        plan: GenerationPlan,
        slots: tuple[SourceSlot, ...],
        observers: Observers | None = None,
        embedders: tuple[EmbedderSlot, ...] = (),
    ) -> None:
        self.plan = plan
        self.sources = slots
        self.embedders = embedders
        self.observers = observers or Observers()
        self.by_key = {slot.key: slot for slot in slots}
        # what a turn derives from this generation and values it has checked before: checked
        # facts, validated specs, View parts and their dumps (compose.py), keyed by kind first
        self.assembly_cache: dict[tuple[Any, ...], Any] = {}
        self._leases = 0
        self._retired = False
        self._disposed = False

    def observe_call(
        self, phase: str, key: str, failure: BaseException | None, timed_out: bool, started: float
    ) -> None:
        """Tell observers about one call into Source `key` that began at `started`."""
        if not self.observers.active:
            return
        manifest = self.by_key[key].manifest
        self.observers.emit(
            "mnemon_observe_source_call",
            phase=phase,
            type_id=manifest.type_id,
            role=manifest.role,
            outcome="timeout" if timed_out else ("failed" if failure is not None else "ok"),
            error_code=failure.code if isinstance(failure, SourceError) else None,
            origin_code=failure.origin_code if isinstance(failure, SourceError) else None,
            retry_after=failure.retry_after if isinstance(failure, SourceError) else None,
            duration=time.perf_counter() - started,
        )

    @property
    def id(self) -> str:
        return self.plan.id

    @property
    def leases(self) -> int:
        return self._leases

    @property
    def retired(self) -> bool:
        return self._retired

    @property
    def disposed(self) -> bool:
        return self._disposed

    def lease(self) -> Lease:
        """Take a lease.

        Raises:
            CompositionUnavailable: the generation is already disposed.
        """
        if self._disposed:
            raise CompositionUnavailable("the memory generation is no longer available")
        self._leases += 1
        return Lease(self)

    async def retire(self) -> None:
        """Stop serving; dispose now, or when the last lease ends."""
        self._retired = True
        if self._leases == 0:
            await self._dispose()

    async def _release(self) -> None:
        self._leases -= 1
        if self._retired and self._leases == 0:
            await self._dispose()

    async def _dispose(self) -> None:
        if self._disposed:
            return
        self._disposed = True
        await dispose_runtimes(self.sources, self.plan.settings.source_timeout, self)
        # the Sources used the embedders: they go last
        await dispose_embedders(self.embedders, self.plan.settings.source_timeout)


async def dispose_runtimes(
    slots: tuple[SourceSlot, ...], deadline: float, generation: Generation | None = None
) -> None:
    """Dispose runtimes once each, newest first; failures are logged without their text."""
    with anyio.CancelScope(shield=True):
        for slot in reversed(slots):
            dispose = getattr(slot.runtime, "dispose", None)
            if dispose is None:
                continue
            started = time.perf_counter()
            failure: BaseException | None = None
            timed_out = False
            try:
                with anyio.fail_after(deadline):
                    await awaited(dispose())
            except TimeoutError:
                timed_out = True
                _log.warning("Memory Source %s dispose() timed out", slot.key)
            except Exception as exc:
                failure = exc
                _log.warning("Memory Source %s dispose() failed", slot.key)
                _log.debug("dispose failure of %s", slot.key, exc_info=True)
            if generation is not None:
                generation.observe_call("dispose", slot.key, failure, timed_out, started)


@dataclass(frozen=True, slots=True)
class EmbedderSlot:
    """A live embedder runtime of a generation."""

    key: str
    runtime: Any


async def dispose_embedders(slots: tuple[EmbedderSlot, ...], deadline: float) -> None:
    """Dispose embedder runtimes once each, newest first; failures logged without their text."""
    with anyio.CancelScope(shield=True):
        for slot in reversed(slots):
            dispose = getattr(slot.runtime, "dispose", None)
            if dispose is None:
                continue
            try:
                with anyio.fail_after(deadline):
                    await awaited(dispose())
            except TimeoutError:
                _log.warning("embedder %s dispose() timed out", slot.key)
            except Exception:
                _log.warning("embedder %s dispose() failed", slot.key)
                _log.debug("dispose failure of %s", slot.key, exc_info=True)


async def _create_embedders(
    items: Sequence[Installed], deadline: float
) -> tuple[Embedding | None, tuple[EmbedderSlot, ...]]:
    """Make every embedder's runtime (in key order) and the checked access Sources get.

    Raises:
        CompositionRejected: a factory failed, returned no embedder, or two embedders declare
            one space; runtimes already made are disposed first.
    """
    if not items:
        return None, ()
    slots: list[EmbedderSlot] = []
    try:
        for item in items:
            definition = item.definition
            assert isinstance(definition, EmbedderDefinition)
            try:
                runtime = await awaited(definition.create(item.configuration))
            except Exception as exc:
                raise CompositionRejected(f"embedder {item.instance_key} factory failed") from exc
            slots.append(EmbedderSlot(item.instance_key, runtime))
            for name in ("segment_and_embed", "embed_query"):
                method = getattr(runtime, name, None)
                if not inspect.iscoroutinefunction(method):
                    raise CompositionRejected(
                        f"embedder {item.instance_key} runtime: {name}() must be an async "
                        "function (async def)"
                    )
        try:
            embedding = Embedding(
                (item.definition.manifest, slot.runtime)
                for item, slot in zip(items, slots, strict=True)
            )
        except DefinitionError as exc:
            raise CompositionRejected(str(exc)) from None
    except BaseException:
        await dispose_embedders(tuple(slots), deadline)
        raise
    return embedding, tuple(slots)


_REQUIRED_METHODS = ("facts", "project")


def _kind_of(function: object) -> str:
    return "a generator" if inspect.isgeneratorfunction(function) else "a plain function"


def _offerings(source: SourcePlan) -> tuple[tuple[SourceRoute, ...], tuple[SourceAction, ...]]:
    """Routes and actions as a Strategy sees them, derived once per generation."""
    key = source.key
    routes = tuple(
        SourceRoute(
            source_key=key,
            **route.model_dump(exclude={"input_schema"}),
            input_schema=route.input_schema,
        )
        for route in source.manifest.routes
    )
    actions = tuple(
        SourceAction(
            source_key=key,
            **action.model_dump(exclude={"input_schema"}),
            input_schema=action.input_schema,
        )
        for action in source.manifest.actions
    )
    return routes, actions


async def realize_generation(plan: GenerationPlan, observers: Observers) -> Generation:
    """Run every Source factory (in key order) and check each runtime's shape.

    Raises:
        CompositionRejected: a factory failed or returned something that is not a Source;
            runtimes already made are disposed first.
    """
    deadline = plan.settings.source_timeout
    embedding, embedders = await _create_embedders(plan.embedders, deadline)
    try:
        sources = await _create_runtimes(plan.sources, plan.settings, embedding, observers)
    except BaseException:
        await dispose_embedders(embedders, deadline)
        raise
    return Generation(plan, sources, observers, embedders)


async def trial_sources(state: RegistryState, settings: HostSettings) -> None:
    """Create and dispose every Source's runtime: bad configuration fails at mount early.

    It runs while no Strategy is installed yet, so nothing serves; the activation graph is
    still checked first, so a requirement nobody provides fails here, before any factory.

    Raises:
        CompositionRejected: the activation graph is invalid, or a factory failed or
            returned something that is not a Source.
    """
    check_activation_graph(state)
    deadline = settings.source_timeout
    embedding, embedders = await _create_embedders(state.of_kind("embedder"), deadline)
    try:
        plans = _source_plans(state.of_kind("source"), settings)
        slots = await _create_runtimes(plans, settings, embedding)
        await dispose_runtimes(slots, deadline)
    finally:
        await dispose_embedders(embedders, deadline)


async def _create_runtimes(
    plans: Sequence[SourcePlan],
    settings: HostSettings,
    embedding: Embedding | None = None,
    observers: Observers | None = None,
) -> tuple[SourceSlot, ...]:
    slots: list[SourceSlot] = []
    try:
        for source in plans:
            definition = source.installed.definition
            assert isinstance(definition, SourceDefinition)
            init = SourceInit(
                instance_key=source.key,
                provenance=source.provenance,
                configuration=source.configuration,
                data_dir=settings.data_dir,
                config_dir=settings.config_dir,
                switches=settings.switches,
                embedding=embedding,
                telemetry=SourceTelemetry(observers, source.manifest.type_id),
            )
            try:
                runtime = await awaited(definition.create(init))
            except Exception as exc:
                raise CompositionRejected(f"Memory Source {source.key} factory failed") from exc
            needed = list(_REQUIRED_METHODS)
            if source.manifest.routes:
                needed.append("query")
            if source.manifest.actions:
                needed.append("mutate")
            if source.manifest.management is not None:
                needed.append("manage")
            # a runtime's own partition_keys (its configuration chose them) win over the type's
            keys = getattr(runtime, "partition_keys", None)
            problem = None if keys is None else partition_keys_problem(keys)
            slot = SourceSlot(
                source,
                runtime,
                *_offerings(source),
                source.manifest.partition_keys if keys is None or problem else tuple(keys),
            )
            slots.append(slot)
            missing = [name for name in needed if not callable(getattr(runtime, name, None))]
            if missing:
                raise CompositionRejected(
                    f"Memory Source {source.key} runtime lacks {', '.join(missing)}()"
                )
            if problem is not None:
                raise CompositionRejected(
                    f"Memory Source {source.key} runtime: partition_keys{problem}"
                )
            # checked now, with an exact message, not discovered later as "facts() failed"
            blocking = [
                name
                for name in needed
                if callable(getattr(runtime, name, None))
                and not inspect.iscoroutinefunction(getattr(runtime, name))
            ]
            if blocking:
                raise CompositionRejected(
                    f"Memory Source {source.key} runtime: {blocking[0]}() must be an async "
                    f"function (async def), not {_kind_of(getattr(runtime, blocking[0]))}"
                )
    except BaseException:
        await dispose_runtimes(tuple(slots), settings.source_timeout)
        raise
    return tuple(slots)
