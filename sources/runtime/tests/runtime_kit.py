"""Helpers of the runtime Source's tests: a Strategy that shows the Source, and a runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mnemon_source_runtime as runtime

from mnemon import (
    ComposeRequest,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    define_memory_strategy,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner

KEY = "source:runtime"
OFFER = f"{KEY}/mutate"


class ShowAll:
    """A Strategy plugin: every available Source, eager within `max_characters`, its actions."""

    def apply(self, ctx: PluginContext) -> None:
        share = int(ctx.configuration.get("max_characters", 4_000))

        def compose(
            request: ComposeRequest,
            sources: tuple[SourceCandidate, ...],
            contributions: tuple[ExtensionContribution, ...],
        ) -> ViewSpec:
            selected = [
                {
                    "source_key": source.key,
                    "required": False,
                    "projection": {"mode": "eager", "max_characters": share},
                    "action_ids": [action.id for action in source.actions],
                }
                for source in sources
                if source.facts.availability != "unavailable"
            ]
            return ViewSpec.model_validate(
                {"strategy_type_id": "show-all", "sources": selected, "explanation": "all"}
            )

        strategy = define_memory_strategy(
            {
                "type_id": "show-all",
                "package_name": "runtime-tests",
                "supported_source_roles": ["*"],
                "max_sources": 8,
                "max_routes": 8,
                "max_actions": 8,
            },
            compose,
        )
        install_memory(ctx, strategies=[strategy])


def allow(offer: object) -> bool:
    return True


async def open_runtime(
    runner: MemoryCompositionRunner,
    config: Mapping[str, Any],
    *,
    max_characters: int = 4_000,
) -> None:
    """Mount the runtime Source as entry `runtime`, and the ShowAll Strategy."""
    await runner.mount(runtime, instance_id="runtime", config=dict(config))
    await runner.mount(ShowAll(), instance_id="show", config={"max_characters": max_characters})
