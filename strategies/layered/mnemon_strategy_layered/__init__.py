"""The layered Strategy: resident working context, routed narrative and evidence.

Mount the package itself: `await host.mount(mnemon_strategy_layered, instance_id="layered")`,
with `config={"write_sources": ["source:spaces"]}` to choose where long-term writes go when
several long-term memory Sources serve. Its maintenance policy, `three_tier_action_workflow`,
makes room in a full working memory by archiving into long-term memory.
"""

from mnemon.sdk import PluginContext, define_memory_plugin, install_memory

from ._compose import LAYERED_CONFIGURATION, LayeredConfiguration, allocation, compose
from ._maintenance import three_tier_action_workflow
from ._policy import LayeredTurn, fuse, normalized_query

__all__ = [
    "LAYERED",
    "LAYERED_CONFIGURATION",
    "LayeredConfiguration",
    "LayeredTurn",
    "allocation",
    "apply",
    "compose",
    "fuse",
    "memory_plugin",
    "normalized_query",
    "three_tier_action_workflow",
]

memory_plugin = define_memory_plugin(
    "mnemon-strategy-layered",
    label="Layered",
    description=(
        "Working context resident and eager; documents and long-term evidence routed, with a "
        "per-turn read policy."
    ),
    roles=["strategy"],
    provides=["strategy.layered"],
)

LAYERED = LAYERED_CONFIGURATION.create()


def apply(ctx: PluginContext) -> None:
    """Install the layered Strategy configured by the entry (`write_sources`, optional)."""
    install_memory(ctx, strategies=[LAYERED_CONFIGURATION.create(ctx.configuration)])
