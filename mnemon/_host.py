"""The host API: mount plugins, open turns that pin a View, inspect, dispose."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, Protocol

import anyio
from pydantic import ValidationError

from ._awaited import awaited
from ._collector import release_serving, take_serving
from ._definitions import PluginDescriptor
from ._engine import (
    Engine,
    EntryMemoryService,
    Lease,
    PinnedView,
    TurnExecution,
    current_revision,
    management_catalog,
    run_maintenance,
    run_management,
)
from ._errors import (
    CompositionRejected,
    DefinitionError,
    InstallError,
    ManagementError,
    MnemonError,
)
from ._install import MemoryContributions, MemoryPlugin, PluginContext
from ._json import FrozenDict, freeze_json, json_size_exceeds
from ._models import (
    ENTRY_ID_PATTERN,
    Authorize,
    CompositionRequest,
    Evidence,
    EvidenceLimits,
    HostSettings,
    MaintenanceReport,
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
from ._observe import Observers
from ._wake import WakeTools, render_wake

__all__ = ["ManagementClient", "MemoryHost", "MemoryTurn", "Unmount"]

_log = logging.getLogger("mnemon.host")
_ENTRY_ID = re.compile(ENTRY_ID_PATTERN)


class Unmount(Protocol):
    """What `MemoryHost.mount` returns: awaiting it unmounts the entry (idempotent)."""

    def __call__(self) -> Awaitable[None]:
        """Remove exactly what the entry installed; a second call does nothing."""
        ...


def host_settings(base: HostSettings | None, options: Mapping[str, Any]) -> HostSettings:
    """`base` (or the defaults) with `options` applied, validated as a whole.

    Raises:
        DefinitionError: the first setting at fault, with its rule (never a path's value).
    """
    if base is not None and not isinstance(base, HostSettings):
        raise DefinitionError("settings: must be a HostSettings")
    values = (
        {} if base is None else {name: getattr(base, name) for name in HostSettings.model_fields}
    )
    values.update(options)
    try:
        return HostSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        name = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            problem = f"unknown host setting {name!r}"
        else:
            problem = str(error["msg"]).removeprefix("Value error, ")
            if not problem.startswith(name.split(".")[0]):
                problem = f"{name}: {problem}"
        raise DefinitionError(problem) from None


class MemoryTurn:
    """One agent turn: a leased generation and exactly one pinned View."""

    __slots__ = ("_execution", "_lease", "_pinned", "_released")

    def __init__(self, pinned: PinnedView, lease: Lease) -> None:
        self._pinned = pinned
        self._lease = lease
        self._execution = TurnExecution(pinned, run_maintenance)
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

    @property
    def maintenance(self) -> tuple[MaintenanceReport, ...]:
        """The maintenance runs of this turn, in order: after a refused write, or `maintain()`.

        Each report says per entry what happened (archived, kept, refused, unknown) and which
        maintenance tasks were created for the host's agent.
        """
        return tuple(self._execution.maintenance)

    async def maintain(
        self, authorize: Authorize, *, dry_run: bool = False, expected_plan: str | None = None
    ) -> MaintenanceReport:
        """Run the Strategy's maintenance for this turn's View, as an operator.

        `authorize(offer)` is asked before each archive write, for the receiving Source's
        offer. A dry run writes nothing; a run given `expected_plan` (a dry run's
        `plan_digest`) applies that plan or nothing.

        Raises:
            MaintenanceError: with a `code` (see `MaintenanceError`); nothing was written
                unless its `report` says otherwise.
        """
        return await self._execution.maintain(
            authorize, dry_run=dry_run, expected_plan=expected_plan
        )

    async def release(self) -> None:
        """End the turn and release its lease (idempotent); later executions raise `released`.

        Reads and writes already running keep their own leases and finish.
        """
        if self._released:
            return
        self._released = True
        self._execution.close()
        # not shielded here: the release counts down before it can suspend, and a generation
        # it disposes is disposed under a shield of its own
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
        result = await self._host._run_management(
            ManagementRequest(
                source_key=self._source_key,
                operation=operation,
                input=input or {},
                scope=self._scope,
            ),
            size_checked=True,
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
        return await self._host._run_management(
            ManagementRequest(
                source_key=self._source_key,
                operation=operation,
                input=input or {},
                scope=self._scope,
                confirmed=confirmed,
                expected_revision=expected_revision,
            ),
            size_checked=True,
        )


@dataclass(slots=True)
class _Entry:
    entry_id: str
    plugin: MemoryPlugin
    context: PluginContext
    batches: list[int] = field(default_factory=list)

    async def apply(self) -> None:
        """Run the plugin's `apply(ctx)`; its installs are staged by the caller."""
        try:
            await awaited(self.plugin.apply(self.context))
        except MnemonError as exc:
            # raised on purpose (install_memory, a definition): its message is for the host
            raise InstallError(f"entry {self.entry_id!r}: {exc}") from exc
        except Exception as exc:
            raise InstallError(f"entry {self.entry_id!r}: plugin apply() failed") from exc


class MemoryHost:
    """What an agent host embeds: the registry, generations and turns.

    Args:
        settings: a `HostSettings` to start from (the defaults when omitted).
        observers: objects implementing `mnemon_observe_*` hooks (see `mnemon.hookimpl`);
            each is checked against the hook specifications now.
        **options: `HostSettings` fields overriding it, by name (`source_timeout=2.0`); each
            field's description says what it does (`help(mnemon.HostSettings)`).

    Raises:
        DefinitionError: a setting is invalid (or unknown); the message names it.
        pluggy.PluginValidationError: an observer's hook is misspelt or takes an argument
            its specification does not have (pluggy's own message).
    """

    def __init__(
        self,
        settings: HostSettings | None = None,
        /,
        *,
        observers: Iterable[object] = (),
        **options: Any,
    ) -> None:
        checked = host_settings(settings, options)
        self._engine = Engine(checked, Observers(observers))
        self._entries: dict[str, _Entry] = {}
        self._serving = checked.collector == "serving"
        if self._serving:
            take_serving()

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
        self,
        plugin: MemoryPlugin | ModuleType,
        *,
        instance_id: str,
        config: Mapping[str, Any] | None = None,
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
        self, entries: Sequence[tuple[MemoryPlugin | ModuleType, str, Mapping[str, Any] | None]]
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
        return await self._change(entries, (), None, what="mount")

    async def change(
        self,
        mount: Sequence[tuple[MemoryPlugin | ModuleType, str, Mapping[str, Any] | None]] = (),
        *,
        unmount: Iterable[str] = (),
        **options: Any,
    ) -> list[Unmount]:
        """Unmount entries, mount entries and change settings as one atomic change.

        One candidate is built from the result: the entries named in `unmount` leave it, the
        `(plugin, instance_id, config)` entries of `mount` join it (an id in both is mounted
        again, with its new plugin or configuration) and `options` (`HostSettings` fields)
        replace those settings. Either all of it serves, as one new generation, or nothing
        changes: the serving generation is kept and the entries to unmount stay mounted. Turns
        in flight keep the View they pinned. An id in `unmount` that is not mounted is ignored.

        Returns:
            One idempotent unmount coroutine function per entry of `mount`, in order.

        Raises:
            DefinitionError: a setting in `options` is invalid (or unknown).
            InstallError: an entry is invalid or its `apply` failed, or the candidate was
                rejected; nothing changed (the message says why).
        """
        settings = host_settings(self._engine.settings, options) if options else None
        return await self._change(mount, unmount, settings, what="change")

    async def _change(
        self,
        entries: Sequence[tuple[MemoryPlugin | ModuleType, str, Mapping[str, Any] | None]],
        unmount: Iterable[str],
        settings: HostSettings | None,
        *,
        what: Literal["mount", "change"],
    ) -> list[Unmount]:
        if self._engine.disposed:
            raise InstallError("the memory host is disposed")
        leaving = {
            entry_id: self._entries[entry_id]
            for entry_id in dict.fromkeys(unmount)
            if entry_id in self._entries
        }
        prepared = [
            self._prepare(plugin, instance_id, config, replacing=leaving.keys())
            for plugin, instance_id, config in entries
        ]
        ids = [entry.entry_id for entry in prepared]
        duplicated = sorted({entry_id for entry_id in ids if ids.count(entry_id) > 1})
        if duplicated:
            raise InstallError(f"entry {duplicated[0]!r} is mounted twice in one call")
        removed = {batch for entry in leaving.values() for batch in entry.batches}

        async def stage() -> None:
            if removed:
                self._engine.registry.stage_removal(removed)
            for entry in prepared:
                await entry.apply()

        try:
            await self._engine.change(stage, entry_ids=frozenset(ids), settings=settings)
        except CompositionRejected as exc:
            for entry in prepared:
                await _run_callbacks(entry.entry_id, entry.context)
            cause = exc.__cause__
            detail = f" ({cause})" if isinstance(cause, MnemonError) else ""
            if what == "mount":
                names = ", ".join(repr(entry_id) for entry_id in ids)
                raise InstallError(f"entry {names} was not mounted: {exc}{detail}") from exc
            raise InstallError(f"the change was not applied: {exc}{detail}") from exc
        except BaseException:
            for entry in prepared:
                await _run_callbacks(entry.entry_id, entry.context)
            raise
        for entry_id in leaving:
            del self._entries[entry_id]
        for entry in prepared:
            self._entries[entry.entry_id] = entry
        for entry_id, entry in leaving.items():
            await _run_callbacks(entry_id, entry.context)
        return [self._unmounter(entry) for entry in prepared]

    def _unmounter(self, entry: _Entry) -> Unmount:
        async def unmount() -> None:
            await self._unmount(entry.entry_id, entry)

        return unmount

    def _prepare(
        self,
        plugin: MemoryPlugin | ModuleType,
        instance_id: str,
        config: Mapping[str, Any] | None,
        *,
        replacing: Iterable[str] = (),
    ) -> _Entry:
        """Check one entry and bind its context to the registry (nothing is installed yet)."""
        if not isinstance(instance_id, str) or not _ENTRY_ID.match(instance_id):
            raise InstallError(f"entry id {instance_id!r} must match {ENTRY_ID_PATTERN}")
        if instance_id in self._entries and instance_id not in replacing:
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

        context = PluginContext(
            instance_id,
            configuration,
            EntryMemoryService(install),
            config_dir=self._engine.settings.config_dir,
        )
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

    async def reconfigure(self, **options: Any) -> None:
        """Change host settings atomically; an identical result reuses the serving generation.

        `options` are `HostSettings` fields; those not given keep their current value.

        Raises:
            DefinitionError: a setting is invalid.
            CompositionRejected: the new settings cannot serve; nothing changed.
        """
        await self._engine.change(settings=host_settings(self._engine.settings, options))

    @property
    def settings(self) -> HostSettings:
        """The host's current settings."""
        return self._engine.settings

    def installed(self) -> RegistrySnapshot:
        """What is installed now, each contribution with its activation-graph node.

        The same frozen snapshot `subscribe` listeners receive after a change.
        """
        return self._engine.registry.state.snapshot()

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

    async def maintain(
        self,
        *,
        scope: Scope | Mapping[str, Any] | None = None,
        authorize: Authorize,
        dry_run: bool = False,
        expected_plan: str | None = None,
    ) -> MaintenanceReport:
        """Run the serving Strategy's maintenance for `scope`, as an operator asked.

        Composes a View for the scope (scenario `maintenance`), then plans with the Strategy's
        maintenance policy and, unless `dry_run`, runs the plan: `authorize(offer)` is asked
        before each archive write. Give a dry run's `plan_digest` as `expected_plan` to apply
        exactly the plan that was shown (or nothing, when the memory changed meanwhile).

        Raises:
            MaintenanceError: refused or failed (its `code` says why); nothing was written
                unless its `report` says otherwise.
            CompositionUnavailable: nothing serves.
        """
        async with self.turn(scope=scope, scenario="maintenance") as turn:
            return await turn.maintain(authorize, dry_run=dry_run, expected_plan=expected_plan)

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
        size_checked = isinstance(request, Mapping)
        if isinstance(request, Mapping):
            # before pydantic copies it: an oversized input must cost no more than the limit
            self._check_management_input(request.get("input"))
        checked = validate_model(
            ManagementRequest, request, subject="management request", error=ManagementError
        )
        return await self._run_management(checked, size_checked=size_checked)

    async def _run_management(
        self, request: ManagementRequest, *, size_checked: bool
    ) -> ManagementResult:
        # `size_checked`: the input was walked against max_input_bytes before it was copied
        # into `request`, so the engine does not walk it a second time
        async with self._engine.leased() as generation:
            return await run_management(generation, request, size_checked=size_checked)

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
        if self._serving:
            self._serving = False
            release_serving()
        await self._engine.dispose()
        entries, self._entries = self._entries, {}
        for instance_id, entry in reversed(entries.items()):
            await _run_callbacks(instance_id, entry.context)


async def _run_callbacks(instance_id: str, context: PluginContext) -> None:
    with anyio.CancelScope(shield=True):
        for callback in context._take_dispose_callbacks():
            try:
                await awaited(callback())
            except Exception:
                _log.warning("entry %s: an on_dispose callback failed", instance_id)
                _log.debug("on_dispose failure of %s", instance_id, exc_info=True)
