"""The `quivr-plugin.yaml` inspector: shape, ranges, compatibility and the semantic rules.

It reads a manifest without running the plugin and reports every rule it breaks with Quivr's
codes, as `quivr plugin inspect` does: for every Contribution (`normalizer`, `subscription`,
`connector`, `ingestion`, `retrieval`), whether mnemon hosts it or not, and the protocol-level
rules every manifest shares. A manifest is judged against Quivr's contract, every Plugin API
version it defines; which of its Contributions mnemon hosts, and the version mnemon speaks with
it, is `plan_hosting`'s answer. The YAML is read by the core's safe loader, which refuses
aliases and deep nesting before anything walks the value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemon.sdk import DefinitionError, describe_schema_error, parse_yaml
from mnemon.versions import RangeError, Version, VersionRange, parse_range, parse_version

from ._issues import Feature, ManifestIssue, compiles
from ._schemas import manifest_validator
from ._unhosted import connector_rules, subscription_rules

__all__ = [
    "ENGINE_VERSION",
    "HOSTED",
    "PLUGIN_API_VERSIONS",
    "QUIVR_PLUGIN_API_VERSIONS",
    "SINCE",
    "ManifestIssue",
    "ManifestReport",
    "admitted_versions",
    "contribution_features",
    "inspect_manifest",
]

# the Quivr engine version mnemon answers to, for `compatibility.engine`
ENGINE_VERSION = "0.1.0"
#: every Plugin API version of Quivr's contract, lowest first (0.19 is the newest one a
#: normative fixture uses): a manifest is compatible when its range admits one of them
QUIVR_PLUGIN_API_VERSIONS = tuple(
    sorted([parse_version(f"0.{minor}.0") for minor in range(1, 20)] + [parse_version("0.3.1")])
)
#: the ones mnemon speaks with a plugin it hosts, the highest one admitted; 0.14 signs requests
PLUGIN_API_VERSIONS = tuple(v for v in QUIVR_PLUGIN_API_VERSIONS if v <= parse_version("0.14.0"))
#: the first Plugin API version of each Contribution, and of later fields of those mnemon hosts
SINCE = {
    "normalizer": parse_version("0.1.0"),
    "subscription": parse_version("0.2.0"),
    "connector": parse_version("0.3.0"),
    "ingestion": parse_version("0.6.0"),
    "retrieval": parse_version("0.7.0"),
    "requires": parse_version("0.12.0"),
    # a vector space's price (index.json), and ingestion in bounded pages
    "input_price": parse_version("0.9.0"),
    "paging": parse_version("0.18.0"),
}
RESERVED = frozenset({"enricher", "validator", "projector", "retriever"})
#: the Contributions mnemon hosts, in report order: an embedder of the plugin's vector spaces,
#: and a ranker
HOSTED = ("ingestion", "retrieval")


@dataclass(frozen=True)
class ManifestReport:
    """What inspecting one manifest found.

    Attributes:
        manifest: the parsed value (None when the file is not a YAML mapping).
        digest: `sha256:<hex>` of the manifest's exact bytes.
        issues: every broken rule.
        plugin_api: the Plugin API version negotiated by Quivr's rule (the highest version of
            its contract the range admits), when the manifest is valid; mnemon may speak a
            lower one with the plugin (`plan_hosting`).
    """

    manifest: Mapping[str, Any] | None
    digest: str
    issues: tuple[ManifestIssue, ...]
    plugin_api: str | None

    @property
    def codes(self) -> frozenset[str]:
        """The exact set of codes."""
        return frozenset(issue.code for issue in self.issues)

    @property
    def valid(self) -> bool:
        """Whether no rule is broken."""
        return not self.issues


def _path(parts: Any) -> str:
    return "/" + "/".join(str(part) for part in parts)


def inspect_manifest(source: str | bytes | Path) -> ManifestReport:
    """Inspect a `quivr-plugin.yaml` (a path, or its bytes or text).

    Messages name the path and the rule, never a value from the file.
    """
    raw = source.read_bytes() if isinstance(source, Path) else source
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        value = parse_yaml(data.decode("utf-8"))
    except UnicodeDecodeError:
        value = None
    except DefinitionError as refused:
        # the message names the rule (not YAML, an alias, the nesting), never the text
        issue = ManifestIssue("schema_violation", "/", str(refused))
        return ManifestReport(None, digest, (issue,), None)
    if not isinstance(value, dict):
        issue = ManifestIssue("schema_violation", "/", "the manifest is not a YAML mapping")
        return ManifestReport(None, digest, (issue,), None)
    issues = _shape(value)
    issues += _semantics(value)
    admitted = admitted_versions(value)
    spoken = str(admitted[-1]) if admitted and not issues else None
    unique = tuple(dict.fromkeys(issues))
    return ManifestReport(value, digest, unique, spoken)


def _shape(value: Mapping[str, Any]) -> list[ManifestIssue]:
    issues = []
    for error in manifest_validator().iter_errors(value):
        where = list(error.absolute_path)
        if where == ["contributions"] and error.validator is None:
            continue  # a reserved name's `false` schema: reserved_contribution, below
        in_range = where[:1] == ["compatibility"] or where[:1] + where[-1:] == [
            "requires",
            "version",
        ]
        if in_range and error.validator in ("pattern", "type", "maxLength"):
            continue  # a malformed range is invalid_range, reported below
        issues.append(ManifestIssue("schema_violation", _path(where), describe_schema_error(error)))
    return issues


def _range(value: Any, path: str, issues: list[ManifestIssue]) -> VersionRange | None:
    if not isinstance(value, str):
        return None  # a missing or non-string range is a schema_violation already
    try:
        return parse_range(value)
    except RangeError as error:
        issues.append(ManifestIssue("invalid_range", path, str(error)))
        return None


def admitted_versions(
    value: Mapping[str, Any], versions: tuple[Version, ...] = QUIVR_PLUGIN_API_VERSIONS
) -> list[Version]:
    """The `versions` a manifest's `plugin_api` range admits, lowest first."""
    compatibility = value.get("compatibility")
    if not isinstance(compatibility, Mapping):
        return []
    try:
        declared = parse_range(str(compatibility.get("plugin_api")))
    except RangeError:
        return []
    return sorted(version for version in versions if declared.admits(version))


def _semantics(value: Mapping[str, Any]) -> list[ManifestIssue]:
    issues: list[ManifestIssue] = []
    compatibility = value.get("compatibility")
    contributions = value.get("contributions")
    contributions = contributions if isinstance(contributions, Mapping) else {}
    rules = [
        subscription_rules(contributions.get("subscription")),
        connector_rules(contributions.get("connector")),
    ]
    if isinstance(compatibility, Mapping):
        engine = _range(compatibility.get("engine"), "/compatibility/engine", issues)
        if engine is not None and not engine.admits(ENGINE_VERSION):
            issues.append(
                ManifestIssue(
                    "incompatible_engine",
                    "/compatibility/engine",
                    f"engine {ENGINE_VERSION} is outside the declared range",
                )
            )
        plugin_api = _range(compatibility.get("plugin_api"), "/compatibility/plugin_api", issues)
        if plugin_api is not None:
            later = [feature for _, found in rules for feature in found]
            issues.extend(_plugin_api(value, contributions, later))
    for name in contributions:
        if name in RESERVED:
            issues.append(
                ManifestIssue(
                    "reserved_contribution", f"/contributions/{name}", "a reserved Contribution"
                )
            )
    requires = value.get("requires")
    if isinstance(requires, list):
        for index, item in enumerate(requires):
            if isinstance(item, Mapping) and "version" in item:
                _range(item["version"], f"/requires/{index}/version", issues)
    for broken, _ in rules:
        issues.extend(broken)
    issues.extend(_namespaces(value))
    issues.extend(_spaces(value))
    issues.extend(_secrets(value))
    issues.extend(_schemas(value))
    return issues


def contribution_features(value: Mapping[str, Any], name: str) -> list[Feature]:
    """A declared Contribution and its later fields mnemon hosts, each with its version.

    The Contribution `name` itself first, then (for `ingestion`) a space's `input_price` and
    `paging: true`; nothing when the manifest does not declare it.
    """
    contributions = value.get("contributions")
    if not isinstance(contributions, Mapping) or name not in contributions or name not in SINCE:
        return []
    features = [Feature(f"/contributions/{name}", name, SINCE[name])]
    if name == "ingestion":
        features.extend(
            Feature(f"/contributions/ingestion/{field}", field, SINCE[field])
            for field in _ingestion_features(contributions["ingestion"])
        )
    return features


def _plugin_api(
    value: Mapping[str, Any], contributions: Mapping[str, Any], later: list[Feature]
) -> list[ManifestIssue]:
    admitted = admitted_versions(value)
    if not admitted:
        first, last = QUIVR_PLUGIN_API_VERSIONS[0], QUIVR_PLUGIN_API_VERSIONS[-1]
        return [
            ManifestIssue(
                "incompatible_plugin_api",
                "/compatibility/plugin_api",
                f"no Plugin API version of Quivr's contract ({first} to {last}) is admitted",
            )
        ]
    needed = [f for name in contributions for f in contribution_features(value, name)]
    if "requires" in value:
        needed.append(Feature("/requires", "requires", SINCE["requires"]))
    # the field at fault is named, as Quivr's inspector does: `/contributions/connector/...`
    return [
        ManifestIssue(
            "incompatible_plugin_api",
            feature.path,
            f"{feature.label}: Plugin API {feature.since} or later, which the declared range "
            "does not admit",
        )
        for feature in [*needed, *later]
        if admitted[-1] < feature.since
    ]


def _ingestion_features(ingestion: Any) -> list[str]:
    """The later Plugin API features an ingestion Contribution uses."""
    if not isinstance(ingestion, Mapping):
        return []
    features = []
    spaces = ingestion.get("spaces")
    if isinstance(spaces, Mapping) and any(
        isinstance(space, Mapping) and "input_price" in space for space in spaces.values()
    ):
        features.append("input_price")
    # `paging: false` says what every earlier version does
    if ingestion.get("paging") is True:
        features.append("paging")
    return features


def _spaces(value: Mapping[str, Any]) -> list[ManifestIssue]:
    """`foreign_space`: a space id is the plugin id, or the plugin id, a dot and more."""
    contributions = value.get("contributions")
    ingestion = contributions.get("ingestion") if isinstance(contributions, Mapping) else None
    spaces = ingestion.get("spaces") if isinstance(ingestion, Mapping) else None
    plugin_id = value.get("id")
    if not isinstance(spaces, Mapping) or not isinstance(plugin_id, str):
        return []
    return [
        ManifestIssue(
            "foreign_space",
            f"/contributions/ingestion/spaces/{space_id}",
            "a space id is the plugin id or starts with the plugin id and a dot",
        )
        for space_id in spaces
        if space_id != plugin_id and not str(space_id).startswith(plugin_id + ".")
    ]


def _namespaces(value: Mapping[str, Any]) -> list[ManifestIssue]:
    extensions = value.get("extensions")
    plugin_id = value.get("id")
    if not isinstance(extensions, Mapping) or not isinstance(plugin_id, str):
        return []
    return [
        ManifestIssue(
            "foreign_namespace",
            f"/extensions/{namespace}",
            "an extension namespace is the plugin id or starts with the plugin id and a dot",
        )
        for namespace in extensions
        if namespace != plugin_id and not str(namespace).startswith(plugin_id + ".")
    ]


def _secrets(value: Mapping[str, Any]) -> list[ManifestIssue]:
    secrets = value.get("secrets")
    if not isinstance(secrets, list):
        return []
    seen: set[str] = set()
    issues = []
    for index, secret in enumerate(secrets):
        name = secret.get("name") if isinstance(secret, Mapping) else None
        if isinstance(name, str):
            if name in seen:
                issues.append(
                    ManifestIssue(
                        "duplicate_secret", f"/secrets/{index}/name", "a secret declared twice"
                    )
                )
            seen.add(name)
    return issues


def _schemas(value: Mapping[str, Any]) -> list[ManifestIssue]:
    issues = []
    configuration = value.get("configuration")
    if isinstance(configuration, Mapping) and not compiles(configuration.get("schema", True)):
        issues.append(
            ManifestIssue(
                "invalid_config_schema",
                "/configuration/schema",
                "not a valid JSON Schema 2020-12",
            )
        )
    extensions = value.get("extensions")
    if isinstance(extensions, Mapping):
        for namespace, versions in extensions.items():
            if not isinstance(versions, Mapping):
                continue
            for version, schema in versions.items():
                if not compiles(schema):
                    issues.append(
                        ManifestIssue(
                            "invalid_extension_schema",
                            f"/extensions/{namespace}/{version}",
                            "not a valid JSON Schema 2020-12",
                        )
                    )
    return issues
