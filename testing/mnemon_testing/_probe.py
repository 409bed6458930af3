"""A configurable Strategy the conformance suites compose with: it selects one Source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon import (
    ComposeRequest,
    CompositionRejected,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    define_memory_strategy,
    install_memory,
)

PROBE_TYPE = "conformance-probe"


def _compose(
    settings: Mapping[str, Any],
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    key = settings["source_key"]
    source = next((s for s in sources if s.key == key), None)
    if source is None:
        raise CompositionRejected(f"conformance probe: Source {key} is not installed")
    selection: dict[str, Any] = {"source_key": key, "required": settings.get("required", True)}
    available = source.facts.availability != "unavailable"
    if available and settings.get("project", True) and "project" in source.facts.capabilities:
        share = settings.get("max_characters", request.budget.max_projection_characters)
        selection["projection"] = {"mode": settings.get("mode", "eager"), "max_characters": share}
    if available and settings.get("routes", True):
        selection["route_ids"] = [route.id for route in source.routes]
    if available and settings.get("actions", True):
        selection["action_ids"] = [action.id for action in source.actions]
    return ViewSpec.model_validate(
        {
            "strategy_type_id": PROBE_TYPE,
            "sources": [selection] if available or selection["required"] else [],
            "explanation": f"conformance probe of {key}",
        }
    )


class ProbeStrategy:
    """Plugin object: `config` picks the Source key, mode, budget share, routes and actions.

    Every candidate the Strategy is shown is appended to `seen`, so a suite can inspect the
    facts (and hints) a Source reported.
    """

    def __init__(self) -> None:
        self.seen: list[SourceCandidate] = []

    def apply(self, ctx: PluginContext) -> None:
        """Install the probe Strategy configured by the entry."""
        settings = dict(ctx.configuration)
        seen = self.seen

        def compose(
            request: ComposeRequest,
            sources: tuple[SourceCandidate, ...],
            contributions: tuple[ExtensionContribution, ...],
        ) -> ViewSpec:
            seen.extend(sources)
            return _compose(settings, request, sources, contributions)

        strategy = define_memory_strategy(
            {
                "type_id": PROBE_TYPE,
                "package_name": "mnemon-testing",
                "supported_source_roles": ["*"],
                "max_sources": 32,
                "max_routes": 1000,
                "max_actions": 1000,
            },
            compose,
        )
        install_memory(ctx, strategies=[strategy])
