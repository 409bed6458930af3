"""Installation: the context a plugin's `apply(ctx)` receives and `install_memory`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ._definitions import (
    PluginDescriptor,
    SourceDefinition,
    StrategyDefinition,
    ViewExtensionDefinition,
)
from ._embedding import EmbedderDefinition
from ._errors import InstallError

__all__ = [
    "DisposeCallback",
    "Disposer",
    "MemoryContributions",
    "MemoryPlugin",
    "MemoryService",
    "PluginContext",
    "install_memory",
]

Disposer = Callable[[], None]
DisposeCallback = Callable[[], "Awaitable[None] | None"]


@dataclass(frozen=True, slots=True)
class MemoryContributions:
    """One install batch: everything in it installs and unloads together."""

    plugin: PluginDescriptor | None
    sources: tuple[SourceDefinition, ...]
    strategies: tuple[StrategyDefinition, ...]
    view_extensions: tuple[ViewExtensionDefinition, ...]
    instance_id: str | None
    embedders: tuple[EmbedderDefinition, ...] = ()


class MemoryService(Protocol):
    """The narrow memory service a plugin reaches through `ctx.memory`."""

    def install_contributions(self, contributions: MemoryContributions) -> Disposer:
        """Install one batch, bound to the entry; return its idempotent disposer."""
        ...


class PluginContext:
    """What a plugin's `apply(ctx)` receives from the host for one entry."""

    __slots__ = ("_callbacks", "_config_dir", "_configuration", "_entry_id", "_memory")

    def __init__(
        self,
        entry_id: str,
        configuration: Mapping[str, Any],
        memory: MemoryService,
        *,
        config_dir: str | None = None,
    ) -> None:
        self._entry_id = entry_id
        self._configuration = configuration
        self._memory = memory
        self._config_dir = config_dir
        self._callbacks: list[DisposeCallback] = []

    @property
    def entry_id(self) -> str:
        """The stable id of the entry being mounted (for example `work`)."""
        return self._entry_id

    @property
    def configuration(self) -> Mapping[str, Any]:
        """The entry's frozen configuration."""
        return self._configuration

    @property
    def config_dir(self) -> str | None:
        """The folder relative paths in the configuration are taken from, or None.

        It is the profile's folder, the same a Source factory gets as `SourceInit.config_dir`;
        a host made without a profile may have none.
        """
        return self._config_dir

    @property
    def memory(self) -> MemoryService:
        """The narrow memory service; its one method is `install_contributions`."""
        return self._memory

    def on_dispose(self, callback: DisposeCallback) -> None:
        """Run `callback` (sync or async) when the entry is unmounted, newest first."""
        if not callable(callback):
            raise InstallError(f"entry {self._entry_id!r}: on_dispose needs a callable")
        self._callbacks.append(callback)

    def _take_dispose_callbacks(self) -> list[DisposeCallback]:
        taken, self._callbacks = self._callbacks, []
        return taken[::-1]


def install_memory(
    ctx: PluginContext,
    *,
    plugin: PluginDescriptor | None = None,
    sources: Iterable[SourceDefinition] = (),
    strategies: Iterable[StrategyDefinition] = (),
    view_extensions: Iterable[ViewExtensionDefinition] = (),
    instance_id: str | None = None,
    embedders: Iterable[EmbedderDefinition] = (),
) -> Disposer:
    """Install Sources, Strategies, View extensions and embedders for the entry `ctx` belongs to.

    Everything passed in one call installs and unloads together. The returned disposer is
    idempotent; unmounting the entry also removes exactly what it installed.

    Raises:
        InstallError: the batch is empty, a key is already installed, or an item is not a
            definition made by the matching `define_*` helper.
    """
    if not isinstance(ctx, PluginContext):
        raise InstallError("install_memory needs the PluginContext passed to apply(ctx)")
    if plugin is not None and not isinstance(plugin, PluginDescriptor):
        raise InstallError("install_memory plugin= must come from define_memory_plugin")
    batch = MemoryContributions(
        plugin=plugin,
        sources=_checked(sources, SourceDefinition, "sources", "define_memory_source"),
        strategies=_checked(strategies, StrategyDefinition, "strategies", "define_memory_strategy"),
        view_extensions=_checked(
            view_extensions, ViewExtensionDefinition, "view_extensions", "define_view_extension"
        ),
        instance_id=instance_id,
        embedders=_checked(embedders, EmbedderDefinition, "embedders", "define_embedder"),
    )
    return ctx.memory.install_contributions(batch)


def _checked(items: Iterable[Any], kind: type[Any], field: str, helper: str) -> tuple[Any, ...]:
    checked = tuple(items)
    for index, item in enumerate(checked):
        if not isinstance(item, kind):
            raise InstallError(f"install_memory {field}[{index}]: expected a {helper}() result")
    return checked


class MemoryPlugin(Protocol):
    """What `MemoryHost.mount` accepts: any object, or a module, with `apply(ctx)`.

    `apply` receives the entry's `PluginContext` and installs contributions through
    `install_memory`; it may be async. A `memory_plugin` attribute (`define_memory_plugin`)
    declares what the plugin provides and requires, checked before any Source is made.
    """

    def apply(self, ctx: PluginContext, /) -> Awaitable[None] | None:
        """Install this entry's contributions."""
        ...
