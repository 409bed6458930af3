"""Quivr retrieval plugins as mnemon rankers.

The rule engine judges a Quivr retrieval plugin's answers exactly as Quivr's normative fixtures
do (`check_search_output`).
"""

from __future__ import annotations

from ._manifest import (
    ENGINE_VERSION,
    PLUGIN_API_VERSIONS,
    ManifestIssue,
    ManifestReport,
    inspect_manifest,
)
from ._rules import (
    RetrievalLimits,
    RetrievalProfile,
    RetrievalSession,
    check_search_output,
    check_search_request,
)
from ._signing import (
    EngineRequestAuth,
    EngineRequestClaims,
    SignatureRejected,
    sign_engine_request,
    verify_engine_request,
)
from ._versions import RangeError, Version, VersionRange, parse_range, parse_version

__all__ = [
    "ENGINE_VERSION",
    "PLUGIN_API_VERSIONS",
    "EngineRequestAuth",
    "EngineRequestClaims",
    "ManifestIssue",
    "ManifestReport",
    "RangeError",
    "RetrievalLimits",
    "RetrievalProfile",
    "RetrievalSession",
    "SignatureRejected",
    "Version",
    "VersionRange",
    "check_search_output",
    "check_search_request",
    "inspect_manifest",
    "parse_range",
    "parse_version",
    "sign_engine_request",
    "verify_engine_request",
]
