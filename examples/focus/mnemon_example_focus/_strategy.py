"""The focus Strategy: configured Sources in one mode, the budget split evenly."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from mnemon.sdk import (
    ComposeRequest,
    CompositionRejected,
    Configuration,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    define_memory_plugin,
    define_memory_strategy,
    install_memory,
    read_configuration,
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


def _source_keys(value: object) -> object:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(key, str) and key for key in value)
        or len(set(value)) != len(value)
    ):
        raise ValueError("a non-empty list of unique instance keys")
    return value


def _mode(value: object) -> object:
    if value not in ("eager", "routed"):
        raise ValueError('must be "eager" or "routed"')
    return value


def _flag(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


class FocusConfiguration(Configuration):
    """What a profile may say about the focus Strategy (see the README's table)."""

    source_keys: Annotated[
        tuple[Annotated[str, Field(min_length=1)], ...],
        Field(min_length=1, json_schema_extra={"uniqueItems": True}),
        BeforeValidator(_source_keys),
    ] = Field(description="The Source instance keys to select, in priority order.")
    mode: Annotated[
        Literal["eager", "routed"],
        BeforeValidator(_mode),
        Field(description="The projection mode of every selected Source."),
    ] = "eager"
    required: Annotated[
        bool,
        BeforeValidator(_flag),
        Field(description="Whether a missing or unavailable Source rejects the View."),
    ] = False


def _settings(configuration: Mapping[str, Any]) -> FocusConfiguration:
    # an unknown key or a bad value is refused naming the key, as every plugin's is
    return read_configuration(FocusConfiguration, configuration, subject="focus")


def _compose(
    settings: FocusConfiguration,
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    keys, mode, required = settings.source_keys, settings.mode, settings.required
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
