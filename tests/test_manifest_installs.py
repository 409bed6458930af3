"""A first-party manifest declares what its plugin installs, as the plugin itself says."""

from __future__ import annotations

import pytest

from mnemon._discovery import DiscoveredPlugin, discover_plugins

FIRST_PARTY = [
    plugin
    for plugin in discover_plugins()
    if plugin.origin in ("bundled", "entry-point")
    and plugin.manifest is not None
    and plugin.manifest.format == "mnemon"
]


def test_every_first_party_plugin_is_checked() -> None:
    ids = {plugin.id for plugin in FIRST_PARTY}
    assert {"runtime", "layered", "scoped", "minilm", "notes", "focus"} <= ids


@pytest.mark.parametrize("plugin", FIRST_PARTY, ids=lambda plugin: plugin.id)
def test_the_manifest_declares_the_roles_of_the_plugin_descriptor(
    plugin: DiscoveredPlugin,
) -> None:
    assert plugin.manifest is not None
    for entry in plugin.manifest.entries:
        descriptor = plugin.load(entry.name).memory_plugin
        assert sorted(entry.installs) == sorted(descriptor.roles), (
            f"{plugin.id}: mnemon-plugin.toml entry {entry.name!r} must declare "
            f"installs = {sorted(descriptor.roles)}"
        )
