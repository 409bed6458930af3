"""The auto-capture View extension (slot `capture`): guidance to record durable memory.

It only adds guidance naming the eligible Sources and recording actions: it runs nothing in
the background, and every write still needs the host's authorization. It requires a Source
of role `durable-evidence`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mnemon.sdk import (
    Configuration,
    PluginContext,
    SourceKeys,
    StringList,
    Textarea,
    ViewExtensionDefinition,
    define_memory_plugin,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
)

__all__ = [
    "AUTO_CAPTURE_CONFIGURATION",
    "DEFAULT_INSTRUCTION",
    "AutoCaptureConfiguration",
    "apply",
    "memory_plugin",
]

DEFAULT_INSTRUCTION = (
    "Record durable facts, preferences and decisions the user states, once, in their words."
)

memory_plugin = define_memory_plugin(
    "mnemon-strategy-auto-capture",
    label="Auto-capture",
    description="Guides the model to propose recording durable memory; writes stay authorized.",
    roles=["strategy-extension"],
    provides=["extension.capture"],
    requires=["source.durable-evidence"],
)


class AutoCaptureConfiguration(Configuration):
    """What the capture guidance says, and through which actions and Sources."""

    instruction: Textarea = DEFAULT_INSTRUCTION
    """What the model should propose to record."""
    action_ids: StringList = Field(default=("remember",), min_length=1, title="Recording actions")
    """The ids of the actions that record memory (at least one)."""
    source_keys: SourceKeys | None = Field(default=None, title="Eligible Sources")
    """The Sources whose recording actions the guidance may name; by default every writable
    Source of role durable-evidence."""


def _create(config: AutoCaptureConfiguration) -> ViewExtensionDefinition:
    value: dict[str, Any] = {
        "instruction": config.instruction,
        "action_ids": list(config.action_ids),
    }
    if config.source_keys is not None:
        value["source_keys"] = list(config.source_keys)
    return define_view_extension(
        "auto-capture", "mnemon-strategy-auto-capture", "capture", lambda request: value
    )


AUTO_CAPTURE_CONFIGURATION = define_strategy_configuration(
    "strategy-extension",
    "auto-capture",
    "Auto-capture",
    "Guidance to propose recording durable memory through the named actions.",
    configuration=AutoCaptureConfiguration,
    create=_create,
)


def apply(ctx: PluginContext) -> None:
    """Install the auto-capture extension configured by the entry."""
    install_memory(ctx, view_extensions=[AUTO_CAPTURE_CONFIGURATION.create(ctx.configuration)])
