"""The remote plugin manifest, `mnemon-source.yaml`: reading, checking, compatibility, digest.

A manifest is read without running any plugin code. Its digest is the SHA-256 of the file's
exact bytes, which the plugin repeats in `GET /v0/discovery`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

import mnemon
from mnemon.sdk import DefinitionError, SourceManifest, describe_schema_error, parse_yaml
from mnemon.versions import RangeError, Version, parse_range, parse_version

__all__ = [
    "MANIFEST_NAME",
    "PLUGIN_API_VERSIONS",
    "ManifestIssue",
    "ManifestReport",
    "engine_version",
    "inspect_manifest",
    "load_schema",
]

MANIFEST_NAME = "mnemon-source.yaml"
#: the protocol versions this mnemon speaks; the highest one a manifest admits is spoken
#: 0.2.0: the caller secret, configuration given at launch only (0.1.0 plugins had neither)
PLUGIN_API_VERSIONS = ("0.2.0",)


def engine_version() -> str:
    """The installed mnemon's version, which `compatibility.mnemon` must admit."""
    return mnemon.__version__


@cache
def load_schema(name: str) -> dict[str, Any]:
    """One of the JSON Schemas shipped in `mnemon_remote/schemas/`, parsed."""
    text = resources.files("mnemon_remote").joinpath("schemas", name).read_text("utf-8")
    value: dict[str, Any] = json.loads(text)
    return value


@dataclass(frozen=True)
class ManifestIssue:
    """One problem with a manifest: a stable code, the path at fault and what is wrong."""

    code: str
    path: str
    message: str


@dataclass
class ManifestReport:
    """What inspecting a manifest found; `valid` when there is no issue."""

    path: Path
    digest: str | None = None
    manifest: dict[str, Any] | None = None
    source: SourceManifest | None = None
    issues: list[ManifestIssue] = field(default_factory=list)
    #: {"mnemon": (range, version, compatible), "plugin_api": (range, version, compatible)}
    compatibility: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    plugin_api: str | None = None

    @property
    def valid(self) -> bool:
        """Whether the manifest has no issue at all (shape and compatibility)."""
        return not self.issues

    @property
    def plugin_id(self) -> str:
        """The manifest's `id`, or an empty string when it could not be read."""
        return str((self.manifest or {}).get("id", ""))

    @property
    def version(self) -> str:
        """The manifest's `version`, or an empty string."""
        return str((self.manifest or {}).get("version", ""))

    @property
    def timeout_seconds(self) -> float:
        """The per-call deadline the manifest declares, in seconds."""
        return int((self.manifest or {}).get("timeout_ms", 10_000)) / 1000

    @property
    def max_response_bytes(self) -> int:
        """The largest answer the client reads."""
        limits = (self.manifest or {}).get("limits") or {}
        return int(limits.get("max_response_bytes", 1_048_576))

    @property
    def secret_names(self) -> list[str]:
        """The names of the secrets the manifest declares."""
        return [str(s["name"]) for s in (self.manifest or {}).get("secrets", [])]

    @property
    def configuration_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the plugin's configuration must satisfy, or None."""
        configuration = (self.manifest or {}).get("configuration")
        return None if configuration is None else dict(configuration["schema"])


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "(manifest)"


def _read(report: ManifestReport) -> dict[str, Any] | None:
    try:
        raw = report.path.read_bytes()
    except OSError as exc:
        report.issues.append(
            ManifestIssue("unreadable", "(manifest)", f"cannot read the manifest: {exc.strerror}")
        )
        return None
    report.digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    try:
        # no aliases, bounded nesting: a hostile file is refused before anything walks it
        value = parse_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        report.issues.append(
            ManifestIssue("invalid_yaml", "(manifest)", "the manifest is not UTF-8 YAML")
        )
        return None
    except DefinitionError as refused:  # the rule, with a line and column; never the text
        report.issues.append(ManifestIssue("invalid_yaml", "(manifest)", str(refused)))
        return None
    if not isinstance(value, dict):
        report.issues.append(
            ManifestIssue("schema_violation", "(manifest)", "the manifest must be a mapping")
        )
        return None
    return value


def _check_shape(report: ManifestReport, value: dict[str, Any]) -> None:
    validator = Draft202012Validator(load_schema("manifest.schema.json"))
    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.path))):
        report.issues.append(
            ManifestIssue(
                "schema_violation", _path(error.absolute_path), describe_schema_error(error)
            )
        )


def _check_version(report: ManifestReport, value: dict[str, Any]) -> None:
    try:
        parse_version(str(value["version"]))
    except RangeError:
        report.issues.append(
            ManifestIssue("invalid_version", "version", "version must be a SemVer version")
        )


def _check_source(report: ManifestReport, value: dict[str, Any]) -> None:
    try:
        report.source = SourceManifest.model_validate(
            {**value["source"], "package_name": value["id"]}
        )
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            report.issues.append(
                ManifestIssue("invalid_source", _path(("source", *error["loc"])), message)
            )


def _check_configuration(report: ManifestReport, value: dict[str, Any]) -> None:
    schema = (value.get("configuration") or {}).get("schema")
    if schema is None:
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        report.issues.append(
            ManifestIssue("invalid_configuration_schema", "configuration.schema", exc.message)
        )


def _check_secrets(report: ManifestReport, value: dict[str, Any]) -> None:
    names = [s.get("name") for s in value.get("secrets", []) if isinstance(s, dict)]
    if len(names) != len(set(names)):
        report.issues.append(
            ManifestIssue("duplicate_secret", "secrets", "each secret name may appear only once")
        )
    for index, name in enumerate(names):
        # the launcher's own variables always win; a secret named like one would be lost
        if isinstance(name, str) and name.startswith("MNEMON_PLUGIN_"):
            report.issues.append(
                ManifestIssue(
                    "reserved_secret",
                    f"secrets[{index}].name",
                    "names starting with MNEMON_PLUGIN_ belong to the run convention",
                )
            )


def _admits(report: ManifestReport, key: str, text: str, versions: list[Version]) -> Version | None:
    try:
        admitted = parse_range(text)
    except RangeError as exc:
        report.issues.append(ManifestIssue("invalid_range", f"compatibility.{key}", str(exc)))
        return None
    chosen = max((v for v in versions if admitted.admits(v)), default=None)
    shown = str(chosen or max(versions))
    report.compatibility[key] = (text, shown, chosen is not None)
    if chosen is None:
        report.issues.append(
            ManifestIssue(
                f"incompatible_{key}",
                f"compatibility.{key}",
                f"the range {text!r} admits none of the versions this host supports ({shown})",
            )
        )
    return chosen


def _check_compatibility(report: ManifestReport, value: dict[str, Any]) -> None:
    ranges = value["compatibility"]
    _admits(report, "mnemon", str(ranges["mnemon"]), [parse_version(engine_version())])
    spoken = _admits(
        report,
        "plugin_api",
        str(ranges["plugin_api"]),
        [parse_version(v) for v in PLUGIN_API_VERSIONS],
    )
    report.plugin_api = None if spoken is None else str(spoken)


def inspect_manifest(path: Path) -> ManifestReport:
    """Read and check a `mnemon-source.yaml` (a file, or the folder holding one).

    Every problem is reported, none hides the others: the shape (the shipped JSON Schema), the
    SemVer version, the Source fields (the core's `SourceManifest` rules), the configuration
    schema, the secrets, and the compatibility ranges against this host.
    """
    if path.is_dir():
        path = path / MANIFEST_NAME
    report = ManifestReport(path=path)
    value = _read(report)
    if value is None:
        return report
    _check_shape(report, value)
    if report.issues:
        return report
    report.manifest = value
    _check_version(report, value)
    _check_source(report, value)
    _check_configuration(report, value)
    _check_secrets(report, value)
    _check_compatibility(report, value)
    return report


def require_valid(report: ManifestReport) -> ManifestReport:
    """Return `report` when the manifest is valid and compatible.

    Raises:
        DefinitionError: naming the first issue's path and code.
    """
    if report.issues:
        issue = report.issues[0]
        raise DefinitionError(f"remote manifest {issue.path}: {issue.code}: {issue.message}")
    return report
