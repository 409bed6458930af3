"""The host API: mount plugins, open turns that pin a View, inspect, dispose."""

from __future__ import annotations

import inspect as _inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio

from ._definitions import PluginDescriptor
from ._engine import (
    DEFAULT_MAX_INPUT_BYTES,
    Engine,
    EntryMemoryService,
    HostSettings,
    Lease,
    PinnedView,
    TurnExecution,
    current_revision,
    management_catalog,
    run_management,
)
from ._errors import (
    CompositionRejected,
    DefinitionError,
    InstallError,
    ManagementError,
    MnemonError,
)
from ._install import MemoryContributions, PluginContext
from ._json import FrozenDict, freeze_json, json_size_exceeds
from ._models import (
    ENTRY_ID_PATTERN,
    SOURCE_CAPABILITIES,
    Authorize,
    CompositionRequest,
    Evidence,
    EvidenceLimits,
    ManagementEntry,
    ManagementRequest,
    ManagementResult,
    MutationReceipt,
    RegistrySnapshot,
    Scope,
    View,
    ViewBudget,
    validate_model,
)
from ._wake import WakeTools, render_wake

__all__ = ["ManagementClient", "MemoryHost", "MemoryTurn", "Unmount"]

_log = logging.getLogger("mnemon.host")
_ENTRY_ID = re.compile(ENTRY_ID_PATTERN)
MAX_SOURCE_TIMEOUT = 300.0
MIN_INPUT_BYTES = 1024
MAX_INPUT_BYTES = 64 * 1024 * 1024


class Unmount(Protocol):
    """What `MemoryHost.mount` returns: awaiting it unmounts the entry (idempotent)."""

    def __call__(self) -> Awaitable[None]:
        """Remove exactly what the entry installed; a second call does nothing."""
        ...


def _settings(
    source_timeout: float,
    strategy_type_id: str | None,
    strategy_fallback: str | None,
    source_configuration: Mapping[str, Mapping[str, Any]] | None,
    source_capabilities: Mapping[str, Iterable[str]] | None,
    data_dir: str | PathLike[str] | None,
    max_input_bytes: int,
) -> HostSettings:
    if data_dir is not None:
        data_dir = str(Path(data_dir).expanduser())
        if not Path(data_dir).is_absolute():
            # never the value: a path may carry a token
            raise DefinitionError("data_dir: must be an absolute path")
    if (
        isinstance(max_input_bytes, bool)
        or not isinstance(max_input_bytes, int)
        or not MIN_INPUT_BYTES <= max_input_bytes <= MAX_INPUT_BYTES
    ):
        raise DefinitionError(
            f"max_input_bytes: must be an integer from {MIN_INPUT_BYTES} to {MAX_INPUT_BYTES}"
        )
    if (
        isinstance(source_timeout, bool)
        or not isinstance(source_timeout, int | float)
        or not math.isfinite(source_timeout)
        or not 0 < source_timeout <= MAX_SOURCE_TIMEOUT
    ):
        raise DefinitionError(
            f"source_timeout: must be a number of seconds in (0, {MAX_SOURCE_TIMEOUT:g}]"
        )
    if strategy_type_id is not None and not isinstance(strategy_type_id, str):
        raise DefinitionError("strategy_type_id: must be a Strategy type id or instance key")
    if strategy_fallback not in (None, "sole-strategy"):
        raise DefinitionError('strategy_fallback: must be None or "sole-strategy"')
    configuration = freeze_json(
        source_configuration or {}, what="source_configuration", error=DefinitionError
    )
    for key, value in configuration.items():
        if not isinstance(value, Mapping):
            raise DefinitionError(f"source_configuration[{key!r}]: must be a JSON object")
    ceilings: dict[str, frozenset[str]] | None = None
    if source_capabilities is not None:
        ceilings = {}
        for key, allowed in source_capabilities.items():
            listed = [allowed] if isinstance(allowed, str) else list(allowed)
            unknown = sorted(set(listed) - set(SOURCE_CAPABILITIES))
            if unknown:
                raise DefinitionError(
                    f"source_capabilities[{key!r}]: unknown capability {unknown[0]!r}"
                )
            ceilings[key] = frozenset(listed)
    return HostSettings(
        source_timeout=float(source_timeout),
        max_input_bytes=max_input_bytes,
        strategy_selector=strategy_type_id,
        strategy_fallback=strategy_fallback,  # type: ignore[arg-type]
        source_configuration=configuration,
        source_capabilities=ceilings,
        data_dir=data_dir,
    )


class MemoryTurn:
    """One agent turn: a leased generation and exactly one pinned View."""

    __slots__ = ("_execution", "_lease", "_pinned", "_released")

    def __init__(self, pinned: PinnedView, lease: Lease) -> None:
        self._pinned = pinned
        self._lease = lease
        self._execution = TurnExecution(pinned)
        self._released = False

    @property
    def view(self) -> View:
        """The pinned View of this turn."""
        return self._pinned.view

    @property
    def released(self) -> bool:
        """Whether the turn has ended."""
        return self._released

    def wake(self, *, tools: WakeTools = "inline") -> str:
        """The text the model sees for this turn; `tools="native"` omits the input schemas."""
        return render_wake(self._pinned.view, tools=tools)

    async def execute_route(
        self,
        route_id: str,
        input: Mapping[str, Any] | None = None,
        *,
        limits: EvidenceLimits | Mapping[str, Any] | None = None,
    ) -> Evidence:
        """Read through route `route_id` of the pinned View, within optional narrower `limits`.

        The read sees exactly what the View pinned, holds its own lease until it ends, and
        costs one of the route's calls even when it fails.

        Raises:
            RouteError: with a `code`: `released`, `unknown-route`, `invalid-input`,
                `invalid-budget`, `call-budget-exhausted`, `timeout`, `source-failed`,
                `contract`, or a Source's own error code.
        """
        return await self._execution.execute_route(route_id, input, limits)

    async def execute_action(
        self,
        offer_id: str,
        input: Mapping[str, Any] | None,
        authorize: Authorize,
        *,
        idempotency_key: str | None = None,
    ) -> MutationReceipt:
        """Write through offer `offer_id` if `authorize(offer)` (sync or async) allows it now.

        Raises:
            ActionError: refused, failed or timed out; its `receipt` (when a write was
                attempted) says honestly how far the write got.
            RevisionConflict: the Source refused a stale expected revision.
        """
        return await self._execution.execute_action(
            offer_id, input, authorize, idempotency_key=idempotency_key
        )

    async def release(self) -> None:
        """End the turn and release its lease (idempotent); later executions raise `released`.

        Reads and writes already running keep their own leases and finish.
        """
        if self._released:
            return
        self._released = True
        self._execution.close()
        with anyio.CancelScope(shield=True):
            await self._lease.release()

    async def aclose(self) -> None:
        """End the turn (the same as `release()`); works with `contextlib.aclosing`."""
        await self.release()

    async def __aenter__(self) -> MemoryTurn:
        """Use a turn from `begin_turn()` in `async with`; it is released on exit.

        Raises:
            RuntimeError: the turn has already ended.
        """
        if self._released:
            raise RuntimeError("this turn has ended and cannot be entered again")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()


class ManagementClient:
    """One Source's management plane for one scope, captured when the client was made."""

    __slots__ = ("_host", "_scope", "_source_key")

    def __init__(self, host: MemoryHost, source_key: str, scope: Scope) -> None:
        self._host = host
        self._source_key = source_key
        self._scope = scope

    @property
    def scope(self) -> Scope:
        """The scope every operation of this client runs in."""
        return self._scope

    async def revision(self) -> str | None:
        """The Source's current revision in this client's scope (what `mutate` fences on).

        Raises:
            ManagementError: the Source is unknown or its facts() failed.
        """
        return await self._host._management_revision(self._source_key, self._scope)

    async def read(self, operation: str, input: Mapping[str, Any] | None = None) -> Any:
        """Run a read operation and return its JSON output.

        Raises:
            ManagementError: the operation was refused or failed.
        """
        self._host._check_management_input(input)
        result = await self._host.execute_management(
            ManagementRequest(
                source_key=self._source_key,
                operation=operation,
                input=input or {},
                scope=self._scope,
            )
        )
        return result.output

    async def mutate(
        self,
        operation: str,
        input: Mapping[str, Any] | None = None,
        *,
        confirmed: bool = False,
        expected_revision: str | None = None,
    ) -> ManagementResult:
        """Run a mutating operation; it needs `confirmed=True` and the current revision.

        Raises:
            ManagementError: unconfirmed, refused or failed.
            RevisionConflict: `expected_revision` is not the Source's current revision.
        """
        self._host._check_management_input(input)
        return await self._host.execute_management(
            ManagementRequest(
                source_key=self._source_key,
                operation=operation,
                input=input or {},
                scope=self._scope,
                confirmed=confirmed,
                expected_revision=expected_revision,
            )
        )


@dataclass(slots=True)
class _Entry:
    entry_id: str
    plugin: Any
    context: PluginContext
    batches: list[int] = field(default_factory=list)

    async def apply(self) -> None:
        """Run the plugin's `apply(ctx)`; its installs are staged by the caller."""
        try:
            result = self.plugin.apply(self.context)
            if _inspect.isawaitable(result):
                await result
        except MnemonError as exc:
            # raised on purpose (install_memory, a definition): its message is for the host
            raise InstallError(f"entry {self.entry_id!r}: {exc}") from exc
        except Exception as exc:
            raise InstallError(f"entry {self.entry_id!r}: plugin apply() failed") from exc


class MemoryHost:
    """What an agent host embeds: the registry, generations and turns.

    Args:
        source_timeout: the per-read deadline for `facts()` and `project()`, in seconds.
        strategy_type_id: the Strategy to select, by type id or instance key.
        strategy_fallback: `"sole-strategy"` to fall back to the only installed Strategy
            when the selected one is not installed.
        source_configuration: per instance key, configuration overriding the entry's.
        source_capabilities: per instance key (or `"*"`), the capabilities the model may
            use: a ceiling narrowing what each Source offers.
        data_dir: the absolute folder Sources keep their data under unless their
            configuration names one (default: `$MNEMON_HOME`, else `~/.mnemon`).
        max_input_bytes: the largest route, action or management input accepted, in bytes
            of compact JSON (default 256 KiB); a larger one is refused with the code
            `input-too-large` before it is copied or validated.

    Raises:
        DefinitionError: an argument is invalid; the message names it.
    """

    def __init__(
        self,
        source_timeout: float = 10.0,
        strategy_type_id: str | None = None,
        strategy_fallback: Literal["sole-strategy"] | None = None,
        source_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        source_capabilities: Mapping[str, Iterable[str]] | None = None,
        data_dir: str | PathLike[str] | None = None,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    ) -> None:
        self._engine = Engine(
            _settings(
                source_timeout,
                strategy_type_id,
                strategy_fallback,
                source_configuration,
                source_capabilities,
                data_dir,
                max_input_bytes,
            )
        )
        self._entries: dict[str, _Entry] = {}

    async def __aenter__(self) -> MemoryHost:
        """Use the host in `async with`; it is closed on exit.

        Raises:
            RuntimeError: the host is already closed; make a new one.
        """
        if self._engine.disposed:
            raise RuntimeError("this MemoryHost is closed and cannot be entered again")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.dispose()

    async def aclose(self) -> None:
        """Close the host (the same as `dispose()`); works with `contextlib.aclosing`."""
        await self.dispose()

    @property
    def closed(self) -> bool:
        """Whether the host was closed; a closed host serves no turn and mounts nothing."""
        return self._engine.disposed

    # ------------------------------------------------------------------ plugins

    async def mount(
        self, plugin: Any, *, instance_id: str, config: Mapping[str, Any] | None = None
    ) -> Unmount:
        """Mount one entry of `plugin`: call its `apply(ctx)` and serve the result.

        Atomic: if the resulting candidate is rejected, nothing the entry installed remains,
        the serving generation is kept, and its `on_dispose` callbacks run.

        Returns:
            An idempotent coroutine function that unmounts the entry.

        Raises:
            InstallError: the entry id, configuration or plugin is invalid, `apply` failed,
                or the candidate generation was rejected (the message says why).
        """
        (unmount,) = await self.mount_all([(plugin, instance_id, config)])
        return unmount

    async def mount_all(
        self, entries: Sequence[tuple[Any, str, Mapping[str, Any] | None]]
    ) -> list[Unmount]:
        """Mount several `(plugin, instance_id, config)` entries as one atomic change.

        The activation graph is checked on all of them together, so their order does not
        matter, and one generation is built for the lot. Either every entry is mounted or
        none is.

        Returns:
            One idempotent unmount coroutine function per entry, in order.

        Raises:
            InstallError: an entry is invalid or its `apply` failed, or the candidate was
                rejected; nothing was mounted.
        """
        if self._engine.disposed:
            raise InstallError("the memory host is disposed")
        prepared = [
            self._prepare(plugin, instance_id, config) for plugin, instance_id, config in entries
        ]
        ids = [entry.entry_id for entry in prepared]
        duplicated = sorted({entry_id for entry_id in ids if ids.count(entry_id) > 1})
        if duplicated:
            raise InstallError(f"entry {duplicated[0]!r} is mounted twice in one call")

        async def stage() -> None:
            for entry in prepared:
                await entry.apply()

        try:
            await self._engine.change(stage, entry_ids=frozenset(ids))
        except CompositionRejected as exc:
            for entry in prepared:
                await _run_callbacks(entry.entry_id, entry.context)
            cause = exc.__cause__
            detail = f" ({cause})" if isinstance(cause, MnemonError) else ""
            names = ", ".join(repr(entry_id) for entry_id in ids)
            raise InstallError(f"entry {names} was not mounted: {exc}{detail}") from exc
        except BaseException:
            for entry in prepared:
                await _run_callbacks(entry.entry_id, entry.context)
            raise
        for entry in prepared:
            self._entries[entry.entry_id] = entry
        return [self._unmounter(entry) for entry in prepared]

    def _unmounter(self, entry: _Entry) -> Unmount:
        async def unmount() -> None:
            await self._unmount(entry.entry_id, entry)

        return unmount

    def _prepare(self, plugin: Any, instance_id: str, config: Mapping[str, Any] | None) -> _Entry:
        """Check one entry and bind its context to the registry (nothing is installed yet)."""
        if not isinstance(instance_id, str) or not _ENTRY_ID.match(instance_id):
            raise InstallError(f"entry id {instance_id!r} must match {ENTRY_ID_PATTERN}")
        if instance_id in self._entries:
            raise InstallError(f"entry {instance_id!r} is already mounted")
        configuration = freeze_json(
            {} if config is None else config,
            what=f"entry {instance_id!r} configuration",
            error=InstallError,
        )
        if not isinstance(configuration, FrozenDict):
            raise InstallError(f"entry {instance_id!r} configuration: must be a JSON object")
        if not callable(getattr(plugin, "apply", None)):
            raise InstallError(f"entry {instance_id!r}: the plugin has no apply(ctx)")
        descriptor = getattr(plugin, "memory_plugin", None)
        if descriptor is not None and not isinstance(descriptor, PluginDescriptor):
            raise InstallError(
                f"entry {instance_id!r}: memory_plugin must come from define_memory_plugin"
            )
        batches: list[int] = []

        def install(contributions: MemoryContributions) -> Callable[[], None]:
            number, dispose = self._engine.registry.install(
                instance_id, configuration, contributions, descriptor
            )
            batches.append(number)
            return dispose

        context = PluginContext(instance_id, configuration, EntryMemoryService(install))
        return _Entry(instance_id, plugin, context, batches)

    async def unmount(self, instance_id: str) -> None:
        """Unmount an entry by id (idempotent): remove exactly what it installed."""
        entry = self._entries.get(instance_id)
        if entry is not None:
            await self._unmount(instance_id, entry)

    async def _unmount(self, instance_id: str, entry: _Entry) -> None:
        if self._entries.get(instance_id) is not entry:
            return
        del self._entries[instance_id]
        with anyio.CancelScope(shield=True):
            self._engine.registry.remove_batches(set(entry.batches))
            await self._engine.refresh()
            await _run_callbacks(instance_id, entry.context)

    async def reconfigure(
        self,
        *,
        source_timeout: float | None = None,
        strategy_type_id: str | None = None,
        strategy_fallback: Literal["sole-strategy"] | None = None,
        source_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        source_capabilities: Mapping[str, Iterable[str]] | None = None,
        max_input_bytes: int | None = None,
    ) -> None:
        """Replace host settings atomically; an identical result reuses the serving generation.

        Arguments left as None keep their current value.

        Raises:
            DefinitionError: an argument is invalid.
            CompositionRejected: the new settings cannot serve; nothing changed.
        """
        current = self._engine.settings
        settings = _settings(
            current.source_timeout if source_timeout is None else source_timeout,
            current.strategy_selector if strategy_type_id is None else strategy_type_id,
            current.strategy_fallback if strategy_fallback is None else strategy_fallback,
            current.source_configuration if source_configuration is None else source_configuration,
            current.source_capabilities if source_capabilities is None else source_capabilities,
            current.data_dir,
            current.max_input_bytes if max_input_bytes is None else max_input_bytes,
        )
        await self._engine.change(settings=settings)

    def subscribe(self, listener: Callable[[RegistrySnapshot], None]) -> Callable[[], None]:
        """Call `listener` with a frozen registry snapshot after every change."""
        return self._engine.registry.subscribe(listener)

    # ------------------------------------------------------------------ turns

    @asynccontextmanager
    async def turn(
        self,
        *,
        scope: Scope | Mapping[str, Any] | None = None,
        scenario: str = "agent.turn",
        budget: ViewBudget | Mapping[str, Any] | None = None,
    ) -> AsyncIterator[MemoryTurn]:
        """Open one turn: lease the serving generation and pin a freshly composed View.

        Raises:
            DefinitionError: the scope, scenario or budget is invalid.
            CompositionUnavailable: nothing serves (or the host was disposed meanwhile).
            CompositionRejected: the View was rejected.
        """
        request = validate_model(
            CompositionRequest,
            {
                "scope": scope if scope is not None else Scope(),
                "scenario": scenario,
                "budget": budget if budget is not None else ViewBudget(),
            },
            subject="turn",
            error=DefinitionError,
        )
        turn = await self.begin_turn(request)
        try:
            yield turn
        finally:
            await turn.release()

    async def begin_turn(
        self, request: CompositionRequest | Mapping[str, Any] | None = None
    ) -> MemoryTurn:
        """Start a turn without a context manager; the caller must `release()` it.

        Raises:
            CompositionUnavailable: nothing serves (or the host was disposed meanwhile).
            CompositionRejected: the View was rejected.
        """
        if request is None:
            request = CompositionRequest()
        elif not isinstance(request, CompositionRequest):
            request = validate_model(
                CompositionRequest, request, subject="turn request", error=DefinitionError
            )
        pinned, lease = await self._engine.compose(request)
        return MemoryTurn(pinned, lease)

    # ------------------------------------------------------------------ management

    def management_catalog(self) -> tuple[ManagementEntry, ...]:
        """Every serving Source with a management plane: its form and operations.

        Never grants, secrets or memory content. The host's capability ceiling applies to the
        model, not to management.
        """
        generation = self._engine.serving
        return () if generation is None else management_catalog(generation)

    async def execute_management(
        self, request: ManagementRequest | Mapping[str, Any]
    ) -> ManagementResult:
        """Run one management operation for an authenticated human.

        A `mutate` operation needs `confirmed=True` and an `expected_revision` equal to the
        Source's fresh revision; the Source re-checks inside its own lock.

        Raises:
            ManagementError: the request was refused or failed.
            RevisionConflict: the expected revision is stale.
            CompositionUnavailable: nothing serves.
        """
        if isinstance(request, Mapping):
            # before pydantic copies it: an oversized input must cost no more than the limit
            self._check_management_input(request.get("input"))
        checked = validate_model(
            ManagementRequest, request, subject="management request", error=ManagementError
        )
        async with self._engine.leased() as generation:
            return await run_management(generation, checked)

    def _check_management_input(self, value: object) -> None:
        limit = self._engine.settings.max_input_bytes
        if json_size_exceeds(value, limit):
            raise ManagementError(
                f"management input: larger than {limit} bytes of JSON (the host's max_input_bytes)",
                code="input-too-large",
            )

    async def _management_revision(self, source_key: str, scope: Scope) -> str | None:
        async with self._engine.leased() as generation:
            return await current_revision(generation, source_key, scope)

    def management_client(
        self, source_key: str, scope: Scope | Mapping[str, Any] | None = None
    ) -> ManagementClient:
        """A client for one Source's management plane; `scope` is captured now.

        Raises:
            ManagementError: the scope is invalid.
        """
        checked = validate_model(
            Scope, scope if scope is not None else Scope(), subject="scope", error=ManagementError
        )
        return ManagementClient(self, source_key, checked)

    # ------------------------------------------------------------------ reports and lifetime

    def inspect(self) -> dict[str, Any]:
        """A JSON-only report: state, serving and draining generations, diagnostics, entries."""
        report = self._engine.report()
        report["entries"] = sorted(self._entries)
        return report

    async def dispose(self) -> None:
        """Abort pending compositions, unmount every entry and retire all generations.

        In-flight operations keep their leases; their Sources are disposed once they end.
        Idempotent.
        """
        if self._engine.disposed:
            return
        await self._engine.dispose()
        entries, self._entries = self._entries, {}
        for instance_id, entry in reversed(entries.items()):
            await _run_callbacks(instance_id, entry.context)


async def _run_callbacks(instance_id: str, context: PluginContext) -> None:
    with anyio.CancelScope(shield=True):
        for callback in context._take_dispose_callbacks():
            try:
                result = callback()
                if _inspect.isawaitable(result):
                    await result
            except Exception:
                _log.warning("entry %s: an on_dispose callback failed", instance_id)
                _log.debug("on_dispose failure of %s", instance_id, exc_info=True)
