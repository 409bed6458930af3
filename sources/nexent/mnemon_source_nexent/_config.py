"""The `nexent-provider` Source's configuration, nested or in Nexent's flat `plugin.<key>` form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from mnemon import ConfigPath, SourceConfiguration, SourceInit, read_configuration

__all__ = ["NexentConfiguration", "mask_secret", "read_settings"]


class NexentConfiguration(SourceConfiguration):
    """One provider of one plugin folder, and its switches."""

    plugin_dir: ConfigPath
    """The provider directory: one child folder per plugin, each with a `plugin.yaml`."""
    plugin: dict[str, Any]
    """`name` (the plugin's) and its `config_schema` keys."""
    enabled: bool = True
    search_enabled: bool = True
    ingest_enabled: bool = True
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """Each provider call's own limit (the turn's read deadline still applies)."""
    nexent_shim: bool = False
    """Register stand-ins for `nexent.memory.*` before the provider's module is imported."""
    data_dir: ConfigPath | None = None
    """Where this entry keeps its state (an access refusal that disabled it)."""


def read_settings(init: SourceInit) -> NexentConfiguration:
    """Validate the configuration, folding Nexent's flat `plugin.<key>` keys into `plugin`.

    Raises:
        DefinitionError: a key breaks its rule (named, never its value).
    """
    raw: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for key, value in dict(init.configuration).items():
        if key.startswith("plugin."):
            flat[key.removeprefix("plugin.")] = value
        else:
            raw[key] = value
    if flat:
        nested = raw.get("plugin")
        raw["plugin"] = {**(dict(nested) if isinstance(nested, Mapping) else {}), **flat}
    folded = init.model_copy(update={"configuration": raw})
    return read_configuration(NexentConfiguration, folded, subject="nexent-provider")


def mask_secret(value: object) -> str:
    """How a secret is shown to a person: `***` up to 8 characters, else `abc***wxyz`."""
    text = str(value)
    if len(text) <= 8:
        return "***"
    return f"{text[:3]}***{text[-4:]}"
