"""The auto-capture View extension (slot `capture`): guidance to record durable memory.

It only adds guidance naming the eligible Sources and recording actions: it runs nothing in
the background, and every write still needs the host's authorization. It requires a Source
of role `durable-evidence`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon.sdk import (
    DefinitionError,
    PluginContext,
    ViewExtensionDefinition,
    define_memory_plugin,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
)

__all__ = ["AUTO_CAPTURE_CONFIGURATION", "DEFAULT_INSTRUCTION", "apply", "memory_plugin"]

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


def _create(config: Mapping[str, Any]) -> ViewExtensionDefinition:
    if not config["action_ids"]:
        raise DefinitionError("auto-capture configuration.action_ids: name at least one action")
    value: dict[str, Any] = {
        "instruction": config["instruction"],
        "action_ids": list(config["action_ids"]),
    }
    if "source_keys" in config:
        value["source_keys"] = list(config["source_keys"])
    return define_view_extension(
        "auto-capture", "mnemon-strategy-auto-capture", "capture", lambda request: value
    )


AUTO_CAPTURE_CONFIGURATION = define_strategy_configuration(
    "strategy-extension",
    "auto-capture",
    "Auto-capture",
    "Guidance to propose recording durable memory through the named actions.",
    [
        {
            "id": "instruction",
            "label": "Instruction",
            "input": "textarea",
            "default": DEFAULT_INSTRUCTION,
        },
        {
            "id": "action_ids",
            "label": "Recording actions",
            "input": "string-list",
            "default": ["remember"],
        },
        {"id": "source_keys", "label": "Eligible Sources", "input": "source-list"},
    ],
    _create,
)


def apply(ctx: PluginContext) -> None:
    """Install the auto-capture extension configured by the entry."""
    install_memory(ctx, view_extensions=[AUTO_CAPTURE_CONFIGURATION.create(ctx.configuration)])
