"""The `nexent-provider` Source's configuration, nested or in Nexent's flat `plugin.<key>` form.

As in Nexent, a provider instance belongs to a tenant: `tenants` gives a tenant its own
parameters (credentials, endpoint), switch and timeout, on top of the entry's own `plugin`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from mnemon.sdk import ConfigPath, Configuration, SourceInit, read_configuration

__all__ = ["NexentConfiguration", "TenantConfiguration", "mask_secret", "read_settings"]


class TenantConfiguration(Configuration):
    """One tenant's provider instance: its parameters over the entry's, and its switches."""

    plugin: dict[str, Any] = Field(default_factory=dict)
    """The tenant's `config_schema` values (its credentials); they replace the entry's."""
    enabled: bool = True
    """Whether this tenant's instance serves (and the entry's switch is on too)."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=300)
    """This tenant's own limit per provider call; default: the entry's."""


class NexentConfiguration(Configuration):
    """One provider of one plugin folder, its switches, and its per-tenant instances."""

    plugin_dir: ConfigPath = Field(title="Plugin folder")
    """The provider directory: one child folder per plugin, each with a `plugin.yaml`."""
    plugin: dict[str, Any]
    """`name` (the plugin's) and its `config_schema` keys."""
    enabled: bool = True
    """Whether the provider serves at all."""
    search_enabled: bool = Field(default=True, title="Search enabled")
    """Whether the provider's search is offered."""
    ingest_enabled: bool = Field(default=True, title="Ingest enabled")
    """Whether the provider is offered writes."""
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, title="Timeout (seconds)")
    """Each provider call's own limit, handed to the provider as `timeout_seconds` too."""
    tenants: dict[str, TenantConfiguration] = Field(default_factory=dict)
    """Per tenant id: its own instance's parameters, `enabled` and `timeout_seconds`."""
    tenants_only: bool = Field(default=False, title="Listed tenants only")
    """Serve only the tenants listed in `tenants` (others are `tenant-not-configured`)."""
    nexent_shim: bool = Field(default=True, title="Nexent stand-ins")
    """Register stand-ins for `nexent.memory.*` (when Nexent is not installed) before a
    provider's module is imported."""
    data_dir: ConfigPath | None = Field(default=None, title="Data folder")
    """Where this entry keeps its state (an access refusal that disabled an instance)."""

    def instance(self, tenant: str | None) -> tuple[dict[str, Any], bool, float] | None:
        """The parameters, switch and timeout of `tenant`'s instance; None when not served."""
        own = None if tenant is None else self.tenants.get(tenant)
        if own is None:
            if self.tenants_only:
                return None
            return dict(self.plugin), self.enabled, self.timeout_seconds
        return (
            {**self.plugin, **own.plugin, "name": self.plugin.get("name")},
            self.enabled and own.enabled,
            own.timeout_seconds or self.timeout_seconds,
        )


def _folded(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` with Nexent's flat `plugin.<key>` keys folded into `plugin`."""
    own: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if key.startswith("plugin."):
            flat[key.removeprefix("plugin.")] = value
        else:
            own[key] = value
    if flat:
        nested = own.get("plugin")
        own["plugin"] = {**(dict(nested) if isinstance(nested, Mapping) else {}), **flat}
    return own


def read_settings(init: SourceInit) -> NexentConfiguration:
    """Validate the configuration, folding Nexent's flat `plugin.<key>` keys into `plugin`.

    Raises:
        DefinitionError: a key breaks its rule (named, never its value).
    """
    raw = _folded(init.configuration)
    tenants = raw.get("tenants")
    if isinstance(tenants, Mapping):
        raw["tenants"] = {
            tenant: _folded(value) if isinstance(value, Mapping) else value
            for tenant, value in tenants.items()
        }
    folded = init.model_copy(update={"configuration": raw})
    return read_configuration(NexentConfiguration, folded, subject="nexent-provider")


def mask_secret(value: object) -> str:
    """How a secret is shown to a person: `***` up to 8 characters, else `abc***wxyz`."""
    text = str(value)
    if len(text) <= 8:
        return "***"
    return f"{text[:3]}***{text[-4:]}"
