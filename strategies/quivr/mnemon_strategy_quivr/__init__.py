"""Quivr plugins in mnemon: retrieval plugins as rankers, ingestion plugins as embedders.

Mount the package with a configuration to host a Quivr plugin reached over HTTP:
`await host.mount(mnemon_strategy_quivr, instance_id="quivr", config={"manifest":
"/path/quivr-plugin.yaml", "launch": True})`. A `retrieval` Contribution ranks `recall` and
`search`; an `ingestion` Contribution becomes an embedder of the plugin's vector spaces, which
the Sources beside it use to recall by meaning; a plugin declaring both runs once for both.

The rule engine (`check_search_output`, `judge_segment_answer`, `judge_query_vector`), the
manifest inspector (`inspect_manifest`, every Contribution of Quivr's contract) and the
signed-request helpers judge a plugin exactly as Quivr's normative fixtures do;
`plan_hosting` says which Contributions of a valid manifest mnemon hosts, and why not the
others; `certify_plugin` is the contract runner's Quivr-compat mode
behind `mnemon plugin test`.

Plugins run in their own processes through mnemon-remote's out-of-process kit: `launch_plugin`
is Quivr's run convention on its launcher, and `LaunchedPlugin` and `PluginUnavailable` are the
kit's own classes.
"""

from __future__ import annotations

from mnemon.versions import RangeError, Version, VersionRange, parse_range, parse_version

from ._certify import FixtureIssue, FixtureOutcome, invoke_fixture, serve_fixture
from ._contract import ContractRunner, certify_plugin, inspect_plugin
from ._develop import QuivrDevelopment, open_development
from ._embedder import QuivrEmbedder, define_quivr_embedder
from ._entry import contract_runner, quivr_ranker_scaffold
from ._hosting import ContributionHosting, HostingPlan, plan_hosting
from ._ingestion import (
    IngestionContribution,
    check_embed_query_request,
    check_segment_request,
    judge_query_vector,
    judge_segment_answer,
    segment_request_body,
    segment_request_from_body,
)
from ._link import PluginLink
from ._manifest import (
    ENGINE_VERSION,
    HOSTED,
    PLUGIN_API_VERSIONS,
    QUIVR_PLUGIN_API_VERSIONS,
    ManifestIssue,
    ManifestReport,
    inspect_manifest,
)
from ._plugin import LaunchedPlugin, PluginRefused, PluginUnavailable, QuivrPlugin, launch_plugin
from ._ranking import QuivrRanker, QuivrRankingTurn, candidate_from_item
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
from ._spaces import offered_spaces, searches_by_meaning
from ._strategy import (
    QUIVR_CONFIGURATION,
    TYPE_ID,
    QuivrConfiguration,
    apply,
    compose,
    create_ranker,
    define_ranking_strategy,
    memory_plugin,
    plugin_link,
)

__all__ = [
    "ENGINE_VERSION",
    "HOSTED",
    "PLUGIN_API_VERSIONS",
    "QUIVR_CONFIGURATION",
    "QUIVR_PLUGIN_API_VERSIONS",
    "TYPE_ID",
    "ContractRunner",
    "ContributionHosting",
    "EngineRequestAuth",
    "EngineRequestClaims",
    "FixtureIssue",
    "FixtureOutcome",
    "HostingPlan",
    "IngestionContribution",
    "LaunchedPlugin",
    "ManifestIssue",
    "ManifestReport",
    "PluginLink",
    "PluginRefused",
    "PluginUnavailable",
    "QuivrConfiguration",
    "QuivrDevelopment",
    "QuivrEmbedder",
    "QuivrPlugin",
    "QuivrRanker",
    "QuivrRankingTurn",
    "RangeError",
    "RetrievalLimits",
    "RetrievalProfile",
    "RetrievalSession",
    "SignatureRejected",
    "Version",
    "VersionRange",
    "apply",
    "candidate_from_item",
    "certify_plugin",
    "check_embed_query_request",
    "check_search_output",
    "check_search_request",
    "check_segment_request",
    "compose",
    "contract_runner",
    "create_ranker",
    "define_quivr_embedder",
    "define_ranking_strategy",
    "inspect_manifest",
    "inspect_plugin",
    "invoke_fixture",
    "judge_query_vector",
    "judge_segment_answer",
    "launch_plugin",
    "memory_plugin",
    "offered_spaces",
    "open_development",
    "parse_range",
    "parse_version",
    "plan_hosting",
    "plugin_link",
    "quivr_ranker_scaffold",
    "searches_by_meaning",
    "segment_request_body",
    "segment_request_from_body",
    "serve_fixture",
    "sign_engine_request",
    "verify_engine_request",
]
