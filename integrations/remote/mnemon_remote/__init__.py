"""mnemon remote plugin protocol v0: a Source served over HTTP, from any language.

- `serve(definition, manifest_path)` serves any in-process `SourceDefinition` (`create_app`
  gives the ASGI app itself).
- Mounting this package with `{manifest, endpoint | launch: true, configuration}` installs the
  client Source `remote`: the plugin's Source, reached over HTTP.
- `certify(...)` is the contract runner behind `mnemon plugin inspect` and `mnemon plugin test`.

`docs/protocol.md` specifies the protocol for plugin authors in any language.
"""

from __future__ import annotations

from ._client import (
    DiscoveryMismatch,
    RemoteSettings,
    RemoteSource,
    apply,
    define_remote_source,
    memory_plugin,
)
from ._command import plugin_command
from ._launch import LaunchedPlugin, PluginUnavailable, launch_plugin
from ._manifest import (
    MANIFEST_NAME,
    PLUGIN_API_VERSIONS,
    ManifestIssue,
    ManifestReport,
    engine_version,
    inspect_manifest,
)
from ._report import CHECKS
from ._runner import certify
from ._server import create_app, serve
from ._wire import Envelope

__all__ = [
    "CHECKS",
    "MANIFEST_NAME",
    "PLUGIN_API_VERSIONS",
    "DiscoveryMismatch",
    "Envelope",
    "LaunchedPlugin",
    "ManifestIssue",
    "ManifestReport",
    "PluginUnavailable",
    "RemoteSettings",
    "RemoteSource",
    "apply",
    "certify",
    "create_app",
    "define_remote_source",
    "engine_version",
    "inspect_manifest",
    "launch_plugin",
    "memory_plugin",
    "plugin_command",
    "serve",
]
