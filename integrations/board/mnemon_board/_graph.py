"""What a switch would move: the activation graph of provides and requires, entry by entry.

A mounted entry's node comes from the host (`MemoryHost.installed()`: each contribution's
capabilities, implicit and declared). An entry not mounted yet is known by its plugin's
declaration (`memory_plugin`, from `define_memory_plugin`) and its manifest's `installs`, so
switching it on is planned before anything of it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mnemon import RegistrySnapshot
from mnemon.sdk import PluginDescriptor

__all__ = ["Move", "Node", "Plan", "declared_node", "mounted_nodes", "plan_switch"]


@dataclass(frozen=True, slots=True)
class Node:
    """One entry in the activation graph."""

    entry_id: str
    provides: Mapping[str, bool] = field(default_factory=dict)
    """Capability -> whether it is exclusive."""
    requires: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Move:
    """One entry a switch turns on or off, and why."""

    entry_id: str
    on: bool
    why: Literal["asked", "requires", "conflicts"]
    capability: str | None = None
    """The capability behind a `requires` or `conflicts` move."""
    other: str | None = None
    """The entry whose move causes this one."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What switching one entry does: every move, or why it cannot be done."""

    moves: tuple[Move, ...] = ()
    blocked: tuple[str, str] | None = None
    """(capability, entry) when the entry requires a capability nothing switched on provides."""


def mounted_nodes(snapshot: RegistrySnapshot) -> dict[str, Node]:
    """Each mounted entry's node: the union of what its contributions provide and require."""
    provides: dict[str, dict[str, bool]] = {}
    requires: dict[str, set[str]] = {}
    for item in snapshot.contributions:
        mine = provides.setdefault(item.entry_id, {})
        for capability in item.provides:
            mine[capability.id] = mine.get(capability.id, False) or capability.exclusive
        requires.setdefault(item.entry_id, set()).update(item.requires)
    return {
        entry_id: Node(entry_id, provides[entry_id], frozenset(requires[entry_id]))
        for entry_id in provides
    }


def declared_node(entry_id: str, plugin: Any, installs: Iterable[str]) -> Node:
    """The node an entry not mounted yet would add: its plugin's declaration and installs.

    `source` and `strategy` are what every Source and Strategy provides; the `source.<role>`
    of a Source is known once it is mounted.
    """
    kinds = set(installs)
    provides: dict[str, bool] = {name: False for name in ("source", "strategy") if name in kinds}
    descriptor = getattr(plugin, "memory_plugin", None)
    requires: frozenset[str] = frozenset()
    if isinstance(descriptor, PluginDescriptor):
        for capability in descriptor.provides:
            provides[capability.id] = provides.get(capability.id, False) or capability.exclusive
        requires = frozenset(descriptor.requires)
    return Node(entry_id, provides, requires)


def plan_switch(
    entry_id: str, on: bool, nodes: Mapping[str, Node], node: Node | None = None
) -> Plan:
    """What switching `entry_id` on (with its `node`) or off does to the mounted `nodes`.

    Off: every entry left requiring a capability only it (or an entry moved with it) provides
    moves off too. On: every mounted entry sharing a capability either marks exclusive moves
    off (and what requires only those), and the switch is blocked when the entry requires a
    capability nothing left on provides.
    """
    moves = [Move(entry_id, on, "asked")]
    active = {key: value for key, value in nodes.items() if key != entry_id}
    if on:
        mine = node or Node(entry_id)
        for other in sorted(active):
            for capability, exclusive in active[other].provides.items():
                if capability in mine.provides and (exclusive or mine.provides[capability]):
                    moves.append(Move(other, False, "conflicts", capability, entry_id))
                    del active[other]
                    break
        moves += _unmet(active, provided_by=[mine])
        left = [*active.values(), mine]
        for capability in sorted(mine.requires):
            if not any(capability in item.provides for item in left):
                return Plan(tuple(moves), (capability, entry_id))
    else:
        moves += _unmet(active, provided_by=[])
    return Plan(tuple(moves))


def _unmet(active: dict[str, Node], provided_by: list[Node]) -> list[Move]:
    """Move off, until none is left, each entry whose requirement nothing left provides."""
    moves: list[Move] = []
    while True:
        for entry_id in sorted(active):
            for capability in sorted(active[entry_id].requires):
                others = [*(n for k, n in active.items() if k != entry_id), *provided_by]
                if not any(capability in other.provides for other in others):
                    moves.append(Move(entry_id, False, "requires", capability))
                    del active[entry_id]
                    break
            else:
                continue
            break
        else:
            return moves
