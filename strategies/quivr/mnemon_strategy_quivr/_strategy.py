"""The `quivr-ranking` Strategy, and the entry that hosts a Quivr plugin's Contributions.

Composition is role-agnostic (working context eager, the rest routed, every route and action
offered within the maxima); what the plugin changes is the order of the evidence a ranked
route returns, never what the View may read. Mounting the package installs what the plugin's
manifest declares: this Strategy for `retrieval`, an embedder for `ingestion`, both reaching
one plugin.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, StrictBool, StrictInt, model_validator

from mnemon.sdk import (
    ComposeRequest,
    Configuration,
    ExtensionContribution,
    InstallError,
    PluginContext,
    SourceCandidate,
    StrategyDefinition,
    StringList,
    Text,
    ViewSpec,
    allocate_characters,
    define_memory_plugin,
    define_memory_strategy,
    define_strategy_configuration,
    install_memory,
)

from ._embedder import define_quivr_embedder
from ._hosting import plan_hosting
from ._link import PluginLink
from ._manifest import inspect_manifest
from ._ranking import QuivrRanker
from ._rules import RetrievalProfile

__all__ = [
    "QUIVR_CONFIGURATION",
    "TYPE_ID",
    "QuivrConfiguration",
    "apply",
    "compose",
    "create_ranker",
    "memory_plugin",
    "plugin_link",
]

TYPE_ID = "quivr-ranking"
MAX_SOURCES = 32
MAX_ROUTES = 64
MAX_ACTIONS = 64
WORKING = "working-context"

memory_plugin = define_memory_plugin(
    "mnemon-strategy-quivr",
    label="Quivr plugins",
    description=(
        "A Quivr plugin reached over HTTP: its retrieval Contribution ranks recall and document "
        "search, its ingestion Contribution embeds text for recall by meaning."
    ),
    roles=["strategy", "embedder"],
    provides=["strategy.quivr-ranking", "embedding"],
)


def compose(
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    """Compose the View (pure): working context eager, the others routed, all offers."""
    admitted = sorted(
        (s for s in sources if s.facts.availability != "unavailable"), key=lambda s: s.key
    )[:MAX_SOURCES]
    projecting = [s for s in admitted if "project" in s.facts.capabilities]
    weights = [9 if s.facts.role == WORKING else 1 for s in projecting]
    shares = dict(
        zip(
            (s.key for s in projecting),
            allocate_characters(request.budget.max_projection_characters, weights),
            strict=True,
        )
    )
    selections = []
    routes = actions = 0
    for source in admitted:
        route_ids = [r.id for r in source.routes][: MAX_ROUTES - routes]
        action_ids = [a.id for a in source.actions][: MAX_ACTIONS - actions]
        routes += len(route_ids)
        actions += len(action_ids)
        selection: dict[str, Any] = {
            "source_key": source.key,
            "required": False,
            "route_ids": route_ids,
            "action_ids": action_ids,
        }
        if source.key in shares:
            mode = "eager" if source.facts.role == WORKING else "routed"
            selection["projection"] = {"mode": mode, "max_characters": shares[source.key]}
        selections.append(selection)
    return ViewSpec.model_validate(
        {
            "strategy_type_id": TYPE_ID,
            "sources": selections,
            "explanation": f"quivr-ranking: {len(selections)} Source(s); recall and search ranked",
        }
    )


class QuivrConfiguration(Configuration):
    """Which Quivr plugin ranks, how mnemon reaches it, and what it ranks."""

    manifest: Text = Field(min_length=1)
    """Path of the plugin's quivr-plugin.yaml."""
    endpoint: Text | None = None
    """Base URL of a running plugin; or set launch."""
    launch: StrictBool = False
    """Start the plugin from the manifest's run.command."""
    profile: Text = "default"
    """The manifest profile searches run under."""
    routes: StringList = Field(default=("recall", "search"), title="Ranked routes")
    """Route ids the plugin ranks."""
    signing_secret_env: Text | None = Field(default=None, title="Signing secret variable")
    """Environment variable holding the HS256 key for signed requests."""
    startup_timeout_ms: StrictInt = Field(
        default=10_000, ge=100, le=120_000, title="Startup timeout (ms)"
    )
    """How long a launched plugin has to become healthy."""

    @model_validator(mode="after")
    def _one_way_to_reach_the_plugin(self) -> QuivrConfiguration:
        if (self.endpoint is None) == (not self.launch):
            raise ValueError("endpoint: give either an endpoint or launch: true")
        if self.endpoint is not None and not self.endpoint.startswith(("http://", "https://")):
            raise ValueError("endpoint: must be an http:// or https:// URL")
        return self


def _fail(field: str, rule: str) -> InstallError:
    return InstallError(f"{TYPE_ID} configuration.{field}: {rule}")


def plugin_link(config: QuivrConfiguration) -> PluginLink:
    """The plugin a validated configuration names, inspected, as every Contribution reaches it.

    Raises:
        InstallError: naming the configuration key at fault (never its value).
    """
    path = Path(config.manifest)
    try:
        raw = path.read_bytes()
    except OSError:
        raise _fail("manifest", "cannot be read") from None
    report = inspect_manifest(raw)
    if not report.valid:
        raise _fail("manifest", f"the manifest is invalid ({', '.join(sorted(report.codes))})")
    manifest = report.manifest or {}
    plan = plan_hosting(report)
    if not plan.hosted:
        reasons = "; ".join(c.line() for c in plan.contributions)
        raise _fail("manifest", f"mnemon hosts none of the plugin's Contributions ({reasons})")
    endpoint = config.endpoint
    launch = endpoint is None
    # a launched plugin's environment is not the host's: it gets the secrets its manifest
    # declares (Quivr's convention: each from the host's variable of its name), nothing else
    secrets = {
        name: os.environ[name]
        for name in (str(s.get("name")) for s in manifest.get("secrets") or [])
        if launch and os.environ.get(name)
    }
    key = None
    secret_env = config.signing_secret_env
    if secret_env is not None:
        secret = os.environ.get(secret_env)
        if not secret:
            raise _fail("signing_secret_env", "the environment variable is not set")
        # a launched plugin verifies with the key it reads from the same variable
        secrets[secret_env] = secret
        key = secret.encode("utf-8")
    return PluginLink(
        report=report,
        manifest_path=path.resolve(),
        endpoint=endpoint,
        signing_key=key,
        startup_timeout=config.startup_timeout_ms / 1000,
        secrets=secrets,
    )


def create_ranker(config: QuivrConfiguration, link: PluginLink | None = None) -> QuivrRanker:
    """The ranker a validated configuration describes, over `link` (by default its own).

    Raises:
        InstallError: naming the configuration key at fault (never its value).
    """
    link = link or plugin_link(config)
    if "retrieval" not in plan_hosting(link.report).hosted:
        raise _fail("manifest", "the plugin has no retrieval Contribution mnemon hosts")
    retrieval = (link.report.manifest or {})["contributions"]["retrieval"]
    name = config.profile
    declared = retrieval["profiles"].get(name)
    if declared is None:
        raise _fail("profile", "not a profile the manifest declares")
    profile = RetrievalProfile(name, declared["max_latency_ms"], declared["max_cost_cents"])
    return QuivrRanker(
        link=link,
        profile=profile,
        routes=frozenset(config.routes),
    )


def define_ranking_strategy(ranker: QuivrRanker) -> StrategyDefinition:
    """The Strategy whose turns rank through `ranker`."""
    return define_memory_strategy(
        {
            "type_id": TYPE_ID,
            "package_name": "mnemon-strategy-quivr",
            "supported_source_roles": ["*"],
            "max_sources": MAX_SOURCES,
            "max_routes": MAX_ROUTES,
            "max_actions": MAX_ACTIONS,
        },
        compose,
        ranker.create_turn,
    )


QUIVR_CONFIGURATION = define_strategy_configuration(
    "strategy",
    TYPE_ID,
    "Quivr ranking",
    "A Quivr retrieval plugin ranks recall and search.",
    configuration=QuivrConfiguration,
    # hosts that mount the package get the ranker stopped with the entry (see apply)
    create=lambda config: define_ranking_strategy(create_ranker(config)),
)


def apply(ctx: PluginContext) -> None:
    """Install what the plugin declares: its ranker, its embedder, or both from one process.

    A `retrieval` Contribution becomes the `quivr-ranking` Strategy, an `ingestion` one an
    embedder of the plugin's spaces; both reach the same plugin, launched once, and unmounting
    the entry stops it. The Contributions mnemon does not host (`normalizer`, `subscription`,
    `connector`) are left alone: the plugin may declare them beside these.

    Raises:
        DefinitionError: the configuration breaks its rules (naming the key), or a declared
            vector space mnemon cannot hold.
        InstallError: the plugin the configuration names cannot be used (naming the key).
    """
    config = QUIVR_CONFIGURATION.validate(ctx.configuration)
    link = plugin_link(config)
    hosted = plan_hosting(link.report).hosted
    strategies = []
    if "retrieval" in hosted:
        strategies.append(define_ranking_strategy(create_ranker(config, link)))
    embedders = [define_quivr_embedder(link)] if "ingestion" in hosted else []
    ctx.on_dispose(link.aclose)
    install_memory(ctx, strategies=strategies, embedders=embedders)
