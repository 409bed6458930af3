"""`MemoryCompositionRunner`: a real `MemoryHost` behind the narrow surface tests need."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import ModuleType
from typing import Any

from mnemon import (
    ActionOffer,
    Authorize,
    CompositionRequest,
    Evidence,
    EvidenceLimits,
    HostSettings,
    MaintenanceReport,
    ManagementClient,
    MemoryHost,
    MemoryPlugin,
    MemoryTurn,
    MutationReceipt,
    Scope,
    View,
)

__all__ = ["MemoryCompositionRunner", "RunnerTurn"]


class RunnerTurn:
    """A turn begun by the runner: `view`, `execute_route`, `execute_action`, `release`."""

    __slots__ = ("_turn",)

    def __init__(self, turn: MemoryTurn) -> None:
        self._turn = turn

    @property
    def view(self) -> View:
        """The View pinned for this turn."""
        return self._turn.view

    async def execute_route(
        self,
        route_id: str,
        input: Mapping[str, Any] | None = None,
        *,
        limits: EvidenceLimits | Mapping[str, Any] | None = None,
    ) -> Evidence:
        """Read through a route of the pinned View (see `MemoryTurn.execute_route`).

        Raises:
            mnemon.RouteError: the read was refused or failed; `code` says why.
        """
        return await self._turn.execute_route(route_id, input, limits=limits)

    async def execute_action(
        self,
        offer_id: str,
        input: Mapping[str, Any] | None,
        authorize: Callable[[ActionOffer], bool | Awaitable[bool]],
        *,
        idempotency_key: str | None = None,
    ) -> MutationReceipt:
        """Write through an offer after `authorize(offer)` (see `MemoryTurn.execute_action`).

        Raises:
            mnemon.ActionError: refused or failed; `receipt` says how far the write got.
            mnemon.RevisionConflict: the Source refused a stale revision.
        """
        return await self._turn.execute_action(
            offer_id, input, authorize, idempotency_key=idempotency_key
        )

    async def release(self) -> None:
        """End the turn (idempotent); later executions raise `released`."""
        await self._turn.release()

    async def aclose(self) -> None:
        """End the turn (the same as `release()`); works with `contextlib.aclosing`."""
        await self._turn.release()

    async def __aenter__(self) -> RunnerTurn:
        """Use the turn in `async with`; it is released on exit.

        Raises:
            RuntimeError: the turn has already ended.
        """
        await self._turn.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._turn.release()


class MemoryCompositionRunner:
    """Drive real compositions the way a host does, without exposing the engine.

    Arguments are those of `MemoryHost`: a `HostSettings` and/or its fields. Use it as an
    async context manager, or call `dispose()` when done.
    """

    def __init__(self, settings: HostSettings | None = None, /, **options: Any) -> None:
        self._host = MemoryHost(settings, **options)

    async def __aenter__(self) -> MemoryCompositionRunner:
        """Use the runner in `async with`; it is disposed on exit.

        Raises:
            RuntimeError: the runner is already disposed; make a new one.
        """
        await self._host.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.dispose()

    async def mount(
        self,
        plugin: MemoryPlugin | ModuleType,
        *,
        instance_id: str,
        config: Mapping[str, Any] | None = None,
    ) -> Any:
        """Mount one entry of `plugin`; returns an idempotent async unmount.

        Raises:
            mnemon.InstallError: the mount was refused; nothing it installed remains.
        """
        return await self._host.mount(plugin, instance_id=instance_id, config=config)

    async def begin_turn(
        self, request: CompositionRequest | Mapping[str, Any] | None = None
    ) -> RunnerTurn:
        """Compose and pin a View for one turn.

        Raises:
            mnemon.CompositionUnavailable: nothing serves, or the runner was disposed.
            mnemon.CompositionRejected: the View was rejected.
        """
        turn = await self._host.begin_turn(request)
        return RunnerTurn(turn)

    def management_client(
        self, source_key: str, scope: Scope | Mapping[str, Any] | None = None
    ) -> ManagementClient:
        """A management client for one Source; `scope` is captured now."""
        return self._host.management_client(source_key, scope)

    async def maintain(
        self,
        *,
        scope: Scope | Mapping[str, Any] | None = None,
        authorize: Authorize,
        dry_run: bool = False,
        expected_plan: str | None = None,
    ) -> MaintenanceReport:
        """Run the serving Strategy's maintenance for `scope`, as `MemoryHost.maintain` does.

        Raises:
            mnemon.MaintenanceError: refused or failed; its `report` says what happened.
        """
        return await self._host.maintain(
            scope=scope, authorize=authorize, dry_run=dry_run, expected_plan=expected_plan
        )

    def inspect(self) -> dict[str, Any]:
        """The host's JSON-only report."""
        return self._host.inspect()

    async def dispose(self) -> None:
        """Abort pending compositions and retire everything (idempotent)."""
        await self._host.dispose()

    async def aclose(self) -> None:
        """Dispose the runner (the same as `dispose()`); works with `contextlib.aclosing`."""
        await self._host.dispose()
