"""mnemon remote plugin protocol v0: a Source served over HTTP, from any language.

- `serve(definition, manifest_path)` serves any in-process `SourceDefinition` (`create_app`
  gives the ASGI app itself).
- Mounting this package with `{manifest, endpoint | launch: true, configuration}` installs the
  client Source `remote`: the plugin's Source, reached over HTTP.
- `certify(...)` is the contract runner behind `mnemon plugin inspect` and `mnemon plugin test`;
  `develop(session, ...)` runs `mnemon plugin dev`'s loop over a `DevelopmentSession` (a
  remote Source's from `open_remote_development`, a Quivr plugin's from its runner).
- `mnemon new remote-source NAME` (the `mnemon.scaffolds` entry point `remote_source_scaffold`,
  a `TemplateScaffold` of the real files in `mnemon_remote/scaffolds/remote-source/`): a
  remote Source in Python's standard library, certified by `mnemon plugin test`.
- The out-of-process kit every plugin family that runs plugins in their own process builds on:
  `launch_plugin` (a `RunConvention`, a minimal environment, a per-launch caller secret, the
  process group killed on stop), `read_bounded`/`decode_answer` (answers read up to a cap,
  parsed off the event loop when large, secrets scrubbed by a `Redactor`; error envelopes read
  by `parse_envelope`), and the contract report (`ContractChecks`, `CheckResult`, `timed`,
  `summarize`, `report_validator`, with the `RecordingTransport` that keeps each `Exchange`
  for replay and credential checks).

`docs/protocol.md` specifies the protocol for plugin authors in any language.
"""

from __future__ import annotations

from ._answers import (
    OFF_LOOP_BYTES,
    AnswerTooLarge,
    InvalidAnswer,
    Redactor,
    decode_answer,
    read_bounded,
)
from ._client import (
    DiscoveryMismatch,
    RemoteSettings,
    RemoteSource,
    apply,
    define_remote_source,
    memory_plugin,
)
from ._command import plugin_command
from ._develop import (
    IGNORED_FOLDERS,
    DevelopmentSession,
    DevelopmentStep,
    develop,
    folder_state,
    open_remote_development,
)
from ._launch import (
    INHERITED_VARIABLES,
    MNEMON_RUN,
    LaunchedPlugin,
    PluginUnavailable,
    RunConvention,
    launch_plugin,
    plugin_environment,
)
from ._manifest import (
    MANIFEST_NAME,
    PLUGIN_API_VERSIONS,
    ManifestIssue,
    ManifestReport,
    engine_version,
    inspect_manifest,
)
from ._recording import Exchange, RecordingTransport
from ._report import (
    CHECKS,
    CheckResult,
    ContractChecks,
    check_lines,
    report_validator,
    summarize,
    timed,
)
from ._runner import certify
from ._scaffolds import TemplateScaffold, remote_source_scaffold, template_words
from ._server import LOOPBACK_HOSTS, create_app, serve
from ._wire import Envelope, parse_envelope

__all__ = [
    "CHECKS",
    "IGNORED_FOLDERS",
    "INHERITED_VARIABLES",
    "LOOPBACK_HOSTS",
    "MANIFEST_NAME",
    "MNEMON_RUN",
    "OFF_LOOP_BYTES",
    "PLUGIN_API_VERSIONS",
    "AnswerTooLarge",
    "CheckResult",
    "ContractChecks",
    "DevelopmentSession",
    "DevelopmentStep",
    "DiscoveryMismatch",
    "Envelope",
    "Exchange",
    "InvalidAnswer",
    "LaunchedPlugin",
    "ManifestIssue",
    "ManifestReport",
    "PluginUnavailable",
    "RecordingTransport",
    "Redactor",
    "RemoteSettings",
    "RemoteSource",
    "RunConvention",
    "TemplateScaffold",
    "apply",
    "certify",
    "check_lines",
    "create_app",
    "decode_answer",
    "define_remote_source",
    "develop",
    "engine_version",
    "folder_state",
    "inspect_manifest",
    "launch_plugin",
    "memory_plugin",
    "open_remote_development",
    "parse_envelope",
    "plugin_command",
    "plugin_environment",
    "read_bounded",
    "remote_source_scaffold",
    "report_validator",
    "serve",
    "summarize",
    "template_words",
    "timed",
]
