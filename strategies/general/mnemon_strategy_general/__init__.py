"""The general Strategy: any roles; resident Sources eager, the others routed.

Mount the package itself with optional configuration, e.g.
`config={"resident_source_keys": ["source:runtime"], "instruction": "..."}`.
"""

from ._compose import (
    GENERAL_CONFIGURATION,
    GeneralConfiguration,
    apply,
    compose,
    deal_round_robin,
    memory_plugin,
)

__all__ = [
    "GENERAL_CONFIGURATION",
    "GeneralConfiguration",
    "apply",
    "compose",
    "deal_round_robin",
    "memory_plugin",
]
