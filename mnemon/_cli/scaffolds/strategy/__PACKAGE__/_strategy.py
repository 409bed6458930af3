"""The __TITLE__ Strategy: every available Source, the projection budget split evenly."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from mnemon.sdk import (
    ComposeRequest,
    DefinitionError,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    allocate_characters,
    define_memory_plugin,
    define_memory_strategy,
    install_memory,
)

PACKAGE = "__DIST__"
TYPE_ID = "__TYPE_ID__"
MAX_ROUTES = 16
MAX_ACTIONS = 16

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="__TITLE__",
    description="Every available Source, the projection budget split evenly.",
    roles=["strategy"],
    provides=["strategy.__TYPE_ID__"],
    requires=["source"],
)

MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "supported_source_roles": ["*"],
    "max_sources": 16,
    "max_routes": MAX_ROUTES,
    "max_actions": MAX_ACTIONS,
}


def compose(
    mode: str,
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    """Pure: the same frozen input always gives the same proposal."""
    available = [s for s in sources if s.facts.availability != "unavailable"]
    projecting = [s for s in available if "project" in s.facts.capabilities]
    shares = allocate_characters(request.budget.max_projection_characters, [1] * len(projecting))
    allotted = dict(zip((s.key for s in projecting), shares, strict=True))
    routes_left, actions_left = MAX_ROUTES, MAX_ACTIONS
    selections = []
    for source in available:
        route_ids = [route.id for route in source.routes][:routes_left]
        action_ids = [action.id for action in source.actions][:actions_left]
        routes_left -= len(route_ids)
        actions_left -= len(action_ids)
        selection: dict[str, Any] = {
            "source_key": source.key,
            "required": False,  # a slow or broken Source is dropped, not the whole turn
            "route_ids": route_ids,
            "action_ids": action_ids,
        }
        if source.key in allotted:
            selection["projection"] = {"mode": mode, "max_characters": allotted[source.key]}
        selections.append(selection)
    return ViewSpec.model_validate(
        {
            "strategy_type_id": TYPE_ID,
            "sources": selections,
            "explanation": f"__TYPE_ID__: {len(selections)} available Source(s), {mode}",
        }
    )


def _mode(configuration: Mapping[str, Any]) -> str:
    unknown = sorted(set(configuration) - {"mode"})
    if unknown:
        raise DefinitionError(f"__TYPE_ID__ configuration: unknown key {unknown[0]!r}")
    mode = configuration.get("mode", "eager")
    if mode not in ("eager", "routed"):
        raise DefinitionError('__TYPE_ID__ configuration.mode: must be "eager" or "routed"')
    return str(mode)


def apply(ctx: PluginContext) -> None:
    """Install the Strategy for this profile entry."""
    strategy = define_memory_strategy(MANIFEST, partial(compose, _mode(ctx.configuration)))
    install_memory(ctx, strategies=[strategy])


class __CLASS__Plugin:
    """The plugin object named by `mnemon-plugin.toml`; mounting it installs the Strategy."""

    memory_plugin = memory_plugin

    def apply(self, ctx: PluginContext) -> None:
        """Install the Strategy for this profile entry."""
        apply(ctx)


plugin = __CLASS__Plugin()
