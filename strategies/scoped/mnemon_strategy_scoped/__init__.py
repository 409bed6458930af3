"""The scoped View extension (slot `selection`): which Sources, in which order, may write.

Configured: `source_keys` (exact instance keys, priority order) and optionally
`writable_source_keys` (a subset; default: all of them). Unconfigured: every installed
Source, ordered by role (working context, narrative, durable evidence, then others) and key,
all writable. It only selects: it creates no storage and deletes no data.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from mnemon.sdk import (
    Configuration,
    ExtensionRequest,
    PluginContext,
    SourceKeys,
    ViewExtensionDefinition,
    define_memory_plugin,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
)

__all__ = ["SCOPED_CONFIGURATION", "ScopedConfiguration", "apply", "memory_plugin", "selection"]

ROLE_ORDER = ("working-context", "narrative", "durable-evidence")
MAX_SOURCES = 32

memory_plugin = define_memory_plugin(
    "mnemon-strategy-scoped",
    label="Scoped",
    description="Selects exact Sources in priority order, with an optional writable subset.",
    roles=["strategy-extension"],
    provides=["extension.selection"],
)


class ScopedConfiguration(Configuration):
    """Which Sources a View selects, in which order, and which of them may be written."""

    source_keys: SourceKeys | None = Field(default=None, title="Sources")
    """Exact Source keys in priority order; by default every installed Source, by role."""
    writable_source_keys: SourceKeys | None = Field(default=None, title="Writable Sources")
    """The Sources of `source_keys` that may be written; by default all of them."""

    @model_validator(mode="after")
    def _writable_are_selected(self) -> ScopedConfiguration:
        if self.writable_source_keys is None:
            return self
        if self.source_keys is None:
            raise ValueError("writable_source_keys: needs source_keys beside it")
        for index, key in enumerate(self.writable_source_keys):
            if key not in self.source_keys:
                raise ValueError(f"writable_source_keys[{index}]: must be one of source_keys")
        return self


def selection(config: ScopedConfiguration, request: ExtensionRequest) -> dict[str, Any]:
    """The selection value for one composition (pure)."""
    keys: tuple[str, ...] | None = config.source_keys
    if keys is None:
        ranked = sorted(
            request.sources,
            key=lambda s: (
                ROLE_ORDER.index(s.facts.role) if s.facts.role in ROLE_ORDER else len(ROLE_ORDER),
                s.key,
            ),
        )
        keys = tuple(source.key for source in ranked)[:MAX_SOURCES]
    writable = config.writable_source_keys
    return {
        "source_keys": list(keys),
        "writable_source_keys": list(keys if writable is None else writable),
    }


def _create(config: ScopedConfiguration) -> ViewExtensionDefinition:
    return define_view_extension(
        "scoped",
        "mnemon-strategy-scoped",
        "selection",
        lambda request: selection(config, request),
    )


SCOPED_CONFIGURATION = define_strategy_configuration(
    "strategy-extension",
    "scoped",
    "Scoped",
    "Exact Sources in priority order; optionally only some of them writable.",
    configuration=ScopedConfiguration,
    create=_create,
)


def apply(ctx: PluginContext) -> None:
    """Install the scoped extension configured by the entry."""
    install_memory(ctx, view_extensions=[SCOPED_CONFIGURATION.create(ctx.configuration)])
