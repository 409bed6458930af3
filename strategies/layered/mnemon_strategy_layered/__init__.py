"""The layered Strategy: resident working context, routed narrative and evidence.

Mount the package itself: `await host.mount(mnemon_strategy_layered, instance_id="layered")`.
"""

from mnemon import PluginContext, define_memory_plugin, define_memory_strategy, install_memory

from ._compose import MANIFEST, allocation, compose
from ._policy import LayeredTurn, create_turn, normalized_query

__all__ = [
    "LAYERED",
    "LayeredTurn",
    "allocation",
    "apply",
    "compose",
    "memory_plugin",
    "normalized_query",
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

LAYERED = define_memory_strategy(MANIFEST, compose, create_turn)


def apply(ctx: PluginContext) -> None:
    """Install the layered Strategy."""
    install_memory(ctx, strategies=[LAYERED])
