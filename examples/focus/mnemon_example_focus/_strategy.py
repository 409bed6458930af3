"""The focus Strategy: configured Sources in one mode, the budget split evenly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from mnemon.sdk import (
    ComposeRequest,
    CompositionRejected,
    DefinitionError,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    define_memory_plugin,
    define_memory_strategy,
    install_memory,
)

PACKAGE = "mnemon-example-focus"

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Focus",
    description="Selects configured Sources in one mode and splits the budget evenly.",
    roles=["strategy"],
    provides=["strategy.focus"],
    requires=["source"],
)

MANIFEST = {
    "type_id": "focus",
    "package_name": PACKAGE,
    "supported_source_roles": ["*"],
    "max_sources": 16,
    "max_routes": 32,
    "max_actions": 32,
}


def split_evenly(total: int, count: int) -> list[int]:
    """Split `total` into `count` shares differing by at most one, summing to `total`."""
    if count <= 0:
        return []
    share, remainder = divmod(total, count)
    return [share + (1 if index < remainder else 0) for index in range(count)]


def _settings(configuration: Mapping[str, Any]) -> tuple[tuple[str, ...], str, bool]:
    unknown = sorted(set(configuration) - {"source_keys", "mode", "required"})
    if unknown:
        raise DefinitionError(f"focus configuration: unknown key {unknown[0]!r}")
    keys = configuration.get("source_keys")
    if (
        not isinstance(keys, Sequence)
        or isinstance(keys, str)
        or not keys
        or not all(isinstance(key, str) and key for key in keys)
        or len(set(keys)) != len(keys)
    ):
        raise DefinitionError(
            "focus configuration.source_keys: a non-empty list of unique instance keys"
        )
    mode = configuration.get("mode", "eager")
    if mode not in ("eager", "routed"):
        raise DefinitionError('focus configuration.mode: must be "eager" or "routed"')
    required = configuration.get("required", False)
    if not isinstance(required, bool):
        raise DefinitionError("focus configuration.required: must be true or false")
    return tuple(keys), mode, required


def _compose(
    settings: tuple[tuple[str, ...], str, bool],
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    keys, mode, required = settings
    by_key = {source.key: source for source in sources}
    missing = [key for key in keys if key not in by_key]
    if missing and required:
        raise CompositionRejected(f"focus: configured Source {missing[0]} is not installed")
    chosen = [
        by_key[key]
        for key in keys
        if key in by_key and (required or by_key[key].facts.availability != "unavailable")
    ]
    shares = split_evenly(request.budget.max_projection_characters, len(chosen))
    selections = []
    for source, share in zip(chosen, shares, strict=True):
        projects = "project" in source.facts.capabilities
        selections.append(
            {
                "source_key": source.key,
                "required": required,
                "projection": {"mode": mode, "max_characters": share} if projects else None,
                "route_ids": [route.id for route in source.routes],
                "action_ids": [action.id for action in source.actions],
            }
        )
    skipped = len(keys) - len(chosen)
    explanation = f"focus: {len(chosen)} configured Source(s) in {mode} mode"
    if skipped:
        explanation += f"; {skipped} missing or unavailable"
    return ViewSpec.model_validate(
        {"strategy_type_id": "focus", "sources": selections, "explanation": explanation}
    )


def apply(ctx: PluginContext) -> None:
    """Install the focus Strategy configured for this entry."""
    settings = _settings(ctx.configuration)
    strategy = define_memory_strategy(MANIFEST, partial(_compose, settings))
    install_memory(ctx, strategies=[strategy])
