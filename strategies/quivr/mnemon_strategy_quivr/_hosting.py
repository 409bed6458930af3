"""Which Contributions of a valid Quivr manifest mnemon hosts, and why not the others.

A manifest may declare several Contributions. mnemon hosts two kinds: `retrieval` (a ranker of
recall and search) and `ingestion` (an embedder of the plugin's vector spaces), when the
manifest's range admits a Plugin API version mnemon speaks that has everything they use. The
others, `normalizer`, `subscription` and `connector`, are valid Quivr but not hosted: each is
listed with the reason, never a manifest error. A plugin with nothing hosted is still a valid
Quivr plugin; mnemon just has nothing of it to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._manifest import (
    HOSTED,
    PLUGIN_API_VERSIONS,
    ManifestReport,
    admitted_versions,
    contribution_features,
)

__all__ = ["ContributionHosting", "HostingPlan", "plan_hosting"]

#: why mnemon runs none of these (docs/quivr.md says more)
NOT_HOSTED = {
    "normalizer": (
        "a normalizer turns input files into the text of a document store's records; mnemon's "
        "Sources keep their own text and have no such pipeline"
    ),
    "subscription": (
        "a subscription decides alert rules over a store's records and saved queries; mnemon "
        "keeps neither"
    ),
    "connector": (
        "a connector collects an external source's items into a store the core owns; mnemon's "
        "Sources own their storage and write only through their own actions"
    ),
}
_SPOKEN = f"{PLUGIN_API_VERSIONS[0]} to {PLUGIN_API_VERSIONS[-1]}"


@dataclass(frozen=True)
class ContributionHosting:
    """One declared Contribution: whether mnemon hosts it, and as what or why not.

    Attributes:
        name: the Contribution (`retrieval`, `normalizer`, ...).
        hosted: whether mounting the plugin installs it.
        reason: what it becomes in mnemon, or why mnemon does not run it.
    """

    name: str
    hosted: bool
    reason: str

    def as_json(self) -> dict[str, Any]:
        """`{name, hosted, reason}`, as `mnemon plugin inspect --json` lists it."""
        return {"name": self.name, "hosted": self.hosted, "reason": self.reason}

    def line(self) -> str:
        """One line for a listing: `retrieval: hosted (...)` or `normalizer: not hosted (...)`."""
        return f"{self.name}: {'hosted' if self.hosted else 'not hosted'} ({self.reason})"


@dataclass(frozen=True)
class HostingPlan:
    """What mnemon makes of a valid manifest's Contributions, in the order it declares them.

    Attributes:
        contributions: every declared Contribution (none for an invalid manifest).
        plugin_api: the Plugin API version mnemon speaks with the plugin: the highest one it
            speaks that the range admits, when anything is hosted; else None.
    """

    contributions: tuple[ContributionHosting, ...]
    plugin_api: str | None

    @property
    def hosted(self) -> tuple[str, ...]:
        """The names of the hosted Contributions, in report order (`ingestion`, `retrieval`)."""
        names = {c.name for c in self.contributions if c.hosted}
        return tuple(name for name in HOSTED if name in names)

    @property
    def not_hosted(self) -> tuple[ContributionHosting, ...]:
        """The declared Contributions mnemon does not run."""
        return tuple(c for c in self.contributions if not c.hosted)


def _hosted_as(name: str, manifest: Mapping[str, Any]) -> str:
    contribution = manifest["contributions"][name]
    if name == "retrieval":
        profiles = len(contribution["profiles"])
        return f"a ranker of recall and search, the quivr-ranking Strategy; {profiles} profile(s)"
    spaces = len(contribution["spaces"])
    return f"an embedder of its {spaces} vector space(s), for recall by meaning"


def plan_hosting(report: ManifestReport) -> HostingPlan:
    """Which of a manifest's Contributions mnemon hosts, at which Plugin API version.

    A Contribution mnemon can host is hosted when the highest Plugin API version mnemon
    speaks that the manifest's range admits is at least the version it and its fields need
    (`ingestion` 0.6, `retrieval` 0.7, `paging: true` 0.18 ...). An invalid manifest hosts
    nothing and lists nothing: its issues say why.
    """
    manifest = report.manifest
    if manifest is None or not report.valid:
        return HostingPlan((), None)
    spoken = admitted_versions(manifest, PLUGIN_API_VERSIONS)
    best = spoken[-1] if spoken else None
    listing = []
    for name in manifest["contributions"]:
        if name not in HOSTED:
            listing.append(ContributionHosting(name, False, NOT_HOSTED[name]))
            continue
        needed = contribution_features(manifest, name)
        if best is None:
            reason = f"its plugin_api range admits none of the versions mnemon speaks, {_SPOKEN}"
            listing.append(ContributionHosting(name, False, reason))
            continue
        newer = [f for f in needed if f.since > best]
        if newer:
            reason = f"{newer[0].label} needs Plugin API {newer[0].since}; mnemon speaks {_SPOKEN}"
            listing.append(ContributionHosting(name, False, reason))
            continue
        listing.append(ContributionHosting(name, True, _hosted_as(name, manifest)))
    contributions = tuple(listing)
    hosts = any(c.hosted for c in contributions)
    return HostingPlan(contributions, str(best) if hosts and best is not None else None)
