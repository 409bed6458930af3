"""The light-context View extension (slot `projection`): cap the projection budget.

Configuration: `max_projection_characters`, an integer from 1 to 10,000,000 (default 4,096).
"""

from __future__ import annotations

from pydantic import Field, StrictInt

from mnemon.sdk import (
    Configuration,
    PluginContext,
    ViewExtensionDefinition,
    define_memory_plugin,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
)

__all__ = [
    "DEFAULT_CHARACTERS",
    "LIGHT_CONTEXT_CONFIGURATION",
    "LightContextConfiguration",
    "apply",
    "memory_plugin",
]

DEFAULT_CHARACTERS = 4_096

memory_plugin = define_memory_plugin(
    "mnemon-strategy-light-context",
    label="Light context",
    description="Caps how many characters of memory a View projects.",
    roles=["strategy-extension"],
    provides=["extension.projection"],
)


class LightContextConfiguration(Configuration):
    """The light-context extension's one setting."""

    max_projection_characters: StrictInt = Field(
        default=DEFAULT_CHARACTERS, ge=1, le=10_000_000, title="Projection characters"
    )
    """The most characters of memory a View projects; a smaller budget in the request still wins."""


def _create(config: LightContextConfiguration) -> ViewExtensionDefinition:
    value = {"max_projection_characters": config.max_projection_characters}
    return define_view_extension(
        "light-context", "mnemon-strategy-light-context", "projection", lambda request: value
    )


LIGHT_CONTEXT_CONFIGURATION = define_strategy_configuration(
    "strategy-extension",
    "light-context",
    "Light context",
    "Caps the projection budget of every View.",
    configuration=LightContextConfiguration,
    create=_create,
)


def apply(ctx: PluginContext) -> None:
    """Install the light-context extension configured by the entry."""
    install_memory(ctx, view_extensions=[LIGHT_CONTEXT_CONFIGURATION.create(ctx.configuration)])
