"""`SelectAll`: a configurable Strategy for Source authors' tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon import CompositionRejected
from mnemon.sdk import (
    ComposeRequest,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    allocate_characters,
    define_memory_strategy,
    install_memory,
)

__all__ = ["SELECT_ALL_TYPE", "SelectAll"]

SELECT_ALL_TYPE = "select-all"


def _compose(
    settings: Mapping[str, Any],
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    required = bool(settings.get("required", False))
    keys = settings.get("source_keys")
    if keys is None:
        chosen = list(sources)
    else:
        by_key = {source.key: source for source in sources}
        missing = [key for key in keys if key not in by_key]
        if missing:
            raise CompositionRejected(f"select-all: Source {missing[0]} is not installed")
        chosen = [by_key[key] for key in keys]
    if not required:
        chosen = [s for s in chosen if s.facts.availability != "unavailable"]
    projecting = [
        s
        for s in chosen
        if settings.get("project", True)
        and s.facts.availability != "unavailable"
        and "project" in s.facts.capabilities
    ]
    share = settings.get("max_characters")
    shares = (
        [share] * len(projecting)
        if share is not None
        else allocate_characters(request.budget.max_projection_characters, [1] * len(projecting))
    )
    allotted = dict(zip((s.key for s in projecting), shares, strict=True))
    selections = []
    for source in chosen:
        available = source.facts.availability != "unavailable"
        selection: dict[str, Any] = {"source_key": source.key, "required": required}
        if source.key in allotted:
            selection["projection"] = {
                "mode": settings.get("mode", "eager"),
                "max_characters": allotted[source.key],
            }
        if available and settings.get("routes", True):
            selection["route_ids"] = [route.id for route in source.routes]
        if available and settings.get("actions", True):
            selection["action_ids"] = [action.id for action in source.actions]
        selections.append(selection)
    return ViewSpec.model_validate(
        {
            "strategy_type_id": SELECT_ALL_TYPE,
            "sources": selections,
            "explanation": f"select-all: {len(selections)} Source(s)",
        }
    )


class SelectAll:
    """A Strategy plugin for testing Sources: it selects Sources with all they offer.

    Entry configuration (all optional): `source_keys` (default: every available Source),
    `mode` (`eager` or `routed`), `max_characters` per Source (default: an even split of the
    budget), `project`, `routes`, `actions` (booleans, default true) and `required` (default
    false: unavailable Sources are left out). Every candidate it is shown is appended to
    `seen`, so a test can inspect the facts and hints a Source reported. Keyword arguments
    given here are defaults the entry configuration overrides.
    """

    def __init__(self, **defaults: Any) -> None:
        self.defaults = defaults
        self.seen: list[SourceCandidate] = []

    def apply(self, ctx: PluginContext) -> None:
        """Install the Strategy configured by the entry."""
        settings = {**self.defaults, **ctx.configuration}
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
                "type_id": SELECT_ALL_TYPE,
                "package_name": "mnemon-testing",
                "supported_source_roles": ["*"],
                "max_sources": 32,
                "max_routes": 1000,
                "max_actions": 1000,
            },
            compose,
        )
        install_memory(ctx, strategies=[strategy])
