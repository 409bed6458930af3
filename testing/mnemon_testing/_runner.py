"""`MemoryCompositionRunner`: a real `MemoryHost` behind the narrow surface tests need."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from mnemon import CompositionRequest, MemoryHost, MemoryTurn, View

__all__ = ["MemoryCompositionRunner", "RunnerTurn"]


class RunnerTurn:
    """A turn begun by the runner: its pinned `view`, and `release()`."""

    __slots__ = ("_turn",)

    def __init__(self, turn: MemoryTurn) -> None:
        self._turn = turn

    @property
    def view(self) -> View:
        """The View pinned for this turn."""
        return self._turn.view

    async def release(self) -> None:
        """End the turn and release its lease (idempotent)."""
        await self._turn.release()


class MemoryCompositionRunner:
    """Drive real compositions the way a host does, without exposing the engine.

    Arguments are those of `MemoryHost`. Use as an async context manager, or call
    `dispose()` when done.
    """

    def __init__(
        self,
        *,
        source_timeout: float = 10.0,
        strategy_type_id: str | None = None,
        strategy_fallback: Literal["sole-strategy"] | None = None,
        source_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        source_capabilities: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._host = MemoryHost(
            source_timeout=source_timeout,
            strategy_type_id=strategy_type_id,
            strategy_fallback=strategy_fallback,
            source_configuration=source_configuration,
            source_capabilities=source_capabilities,
        )

    async def __aenter__(self) -> MemoryCompositionRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.dispose()

    async def mount(
        self, plugin: Any, *, instance_id: str, config: Mapping[str, Any] | None = None
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

    def inspect(self) -> dict[str, Any]:
        """The host's JSON-only report."""
        return self._host.inspect()

    async def dispose(self) -> None:
        """Abort pending compositions and retire everything (idempotent)."""
        await self._host.dispose()
