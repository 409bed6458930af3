"""The scoped View extension (slot `selection`): which Sources, in which order, may write.

Configured: `source_keys` (exact instance keys, priority order) and optionally
`writable_source_keys` (a subset; default: all of them). Unconfigured: every installed
Source, ordered by role (working context, narrative, durable evidence, then others) and key,
all writable. It only selects: it creates no storage and deletes no data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon.sdk import (
    DefinitionError,
    ExtensionRequest,
    PluginContext,
    ViewExtensionDefinition,
    define_memory_plugin,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
)

__all__ = ["SCOPED_CONFIGURATION", "apply", "memory_plugin", "selection"]

ROLE_ORDER = ("working-context", "narrative", "durable-evidence")
MAX_SOURCES = 32

memory_plugin = define_memory_plugin(
    "mnemon-strategy-scoped",
    label="Scoped",
    description="Selects exact Sources in priority order, with an optional writable subset.",
    roles=["strategy-extension"],
    provides=["extension.selection"],
)


def selection(config: Mapping[str, Any], request: ExtensionRequest) -> dict[str, Any]:
    """The selection value for one composition (pure)."""
    keys = config.get("source_keys")
    if keys is None:
        ranked = sorted(
            request.sources,
            key=lambda s: (
                ROLE_ORDER.index(s.facts.role) if s.facts.role in ROLE_ORDER else len(ROLE_ORDER),
                s.key,
            ),
        )
        keys = [source.key for source in ranked][:MAX_SOURCES]
    writable = config.get("writable_source_keys")
    return {
        "source_keys": list(keys),
        "writable_source_keys": list(keys if writable is None else writable),
    }


def _create(config: Mapping[str, Any]) -> ViewExtensionDefinition:
    keys, writable = config.get("source_keys"), config.get("writable_source_keys")
    if writable is not None:
        if keys is None:
            raise DefinitionError(
                "scoped configuration.writable_source_keys: needs source_keys beside it"
            )
        outside = [key for key in writable if key not in keys]
        if outside:
            raise DefinitionError(
                f"scoped configuration.writable_source_keys: {outside[0]!r} is not in source_keys"
            )
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
    [
        {"id": "source_keys", "label": "Sources", "input": "source-list"},
        {"id": "writable_source_keys", "label": "Writable Sources", "input": "source-list"},
    ],
    _create,
)


def apply(ctx: PluginContext) -> None:
    """Install the scoped extension configured by the entry."""
    install_memory(ctx, view_extensions=[SCOPED_CONFIGURATION.create(ctx.configuration)])
