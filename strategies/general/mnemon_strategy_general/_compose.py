"""The general composition: resident weight 9, routed weight 1, offers dealt round-robin."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import Field

from mnemon.sdk import (
    ComposeRequest,
    Configuration,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    SourceKeys,
    StrategyDefinition,
    Textarea,
    ViewSpec,
    allocate_characters,
    define_memory_plugin,
    define_memory_strategy,
    define_strategy_configuration,
    install_memory,
)

TYPE_ID = "general"
MAX_SOURCES = 32
MAX_ROUTES = 64
MAX_ACTIONS = 64
RESIDENT_WEIGHT = 9
ROUTED_WEIGHT = 1
NOTHING_ADMITTED = "No memory Source is available for this turn; answer without memory."

memory_plugin = define_memory_plugin(
    "mnemon-strategy-general",
    label="General",
    description="Role-agnostic: resident Sources eager, the others routed, offers dealt fairly.",
    roles=["strategy"],
    provides=["strategy.general"],
)


class GeneralConfiguration(Configuration):
    """Which Sources are resident, and the instruction shown before memory."""

    resident_source_keys: SourceKeys | None = Field(default=None, title="Resident Sources")
    """Sources projected eagerly; default: those of role working-context."""
    instruction: Textarea = ""
    """Trusted guidance shown to the model before memory."""


def deal_round_robin(offers: Sequence[Sequence[str]], limit: int) -> list[list[str]]:
    """Deal each Source's offers in turns: everyone gets a first before anyone a second."""
    dealt: list[list[str]] = [[] for _ in offers]
    total = 0
    depth = max((len(items) for items in offers), default=0)
    for round_ in range(depth):
        for index, items in enumerate(offers):
            if total == limit:
                return dealt
            if round_ < len(items):
                dealt[index].append(items[round_])
                total += 1
    return dealt


def _admitted(
    sources: Sequence[SourceCandidate], resident_keys: Sequence[str] | None
) -> tuple[list[SourceCandidate], set[str]]:
    # key order, whatever order the facts came in: the View never depends on it
    available = sorted(
        (s for s in sources if s.facts.availability != "unavailable"), key=lambda s: s.key
    )
    if resident_keys is None:
        resident = {s.key for s in available if s.facts.role == "working-context"}
        ordered = [s for s in available if s.key in resident]
    else:
        by_key = {s.key: s for s in available}
        ordered = [by_key[key] for key in resident_keys if key in by_key]
        resident = {s.key for s in ordered}
    ordered += [s for s in available if s.key not in resident]
    admitted = ordered[:MAX_SOURCES]
    return admitted, resident & {s.key for s in admitted}


def compose(
    settings: GeneralConfiguration,
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    """Compose a general View (pure)."""
    admitted, resident = _admitted(sources, settings.resident_source_keys)
    instruction = settings.instruction
    if not admitted:
        return ViewSpec.model_validate(
            {
                "strategy_type_id": TYPE_ID,
                "explanation": "general: no Source is available",
                "guidance": {"system": f"{instruction}\n\n{NOTHING_ADMITTED}".strip()},
            }
        )
    projecting = [s for s in admitted if "project" in s.facts.capabilities]
    weights = [RESIDENT_WEIGHT if s.key in resident else ROUTED_WEIGHT for s in projecting]
    shares = dict(
        zip(
            (s.key for s in projecting),
            allocate_characters(request.budget.max_projection_characters, weights),
            strict=True,
        )
    )
    routes = deal_round_robin([[r.id for r in s.routes] for s in admitted], MAX_ROUTES)
    actions = deal_round_robin([[a.id for a in s.actions] for s in admitted], MAX_ACTIONS)
    selections = []
    for source, route_ids, action_ids in zip(admitted, routes, actions, strict=True):
        selection: dict[str, Any] = {
            "source_key": source.key,
            "required": False,
            "route_ids": route_ids,
            "action_ids": action_ids,
        }
        if source.key in shares:
            mode = "eager" if source.key in resident else "routed"
            selection["projection"] = {"mode": mode, "max_characters": shares[source.key]}
        selections.append(selection)
    guidance = {"system": instruction} if instruction else None
    return ViewSpec.model_validate(
        {
            "strategy_type_id": TYPE_ID,
            "sources": selections,
            "explanation": (
                f"general: {len(resident)} resident and {len(admitted) - len(resident)} routed "
                "Source(s)"
            ),
            "guidance": guidance,
        }
    )


def _create(config: GeneralConfiguration) -> StrategyDefinition:
    return define_memory_strategy(
        {
            "type_id": TYPE_ID,
            "package_name": "mnemon-strategy-general",
            "supported_source_roles": ["*"],
            "max_sources": MAX_SOURCES,
            "max_routes": MAX_ROUTES,
            "max_actions": MAX_ACTIONS,
        },
        partial(compose, config),
    )


GENERAL_CONFIGURATION = define_strategy_configuration(
    "strategy",
    TYPE_ID,
    "General",
    "Resident Sources eager (weight 9), the others routed (weight 1).",
    configuration=GeneralConfiguration,
    create=_create,
)


def apply(ctx: PluginContext) -> None:
    """Install the general Strategy configured by the entry."""
    install_memory(ctx, strategies=[GENERAL_CONFIGURATION.create(ctx.configuration)])
