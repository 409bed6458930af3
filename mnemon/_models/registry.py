"""Registry snapshots: what listeners see after each change."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Strict

from .base import CapabilityId, EntryId, Id, InstanceKey, PackageName, WireModel


class ProvidedCapability(WireModel):
    """A capability a plugin provides; `exclusive` forbids a second active provider."""

    id: CapabilityId
    """The capability's id (`source.notes`, `strategy.focus`)."""
    exclusive: Annotated[bool, Strict()] = False
    """Whether a second active provider of this capability is refused."""


class InstalledContribution(WireModel):
    """One installed contribution as listeners see it."""

    instance_key: InstanceKey
    """The contribution's instance key."""
    kind: Literal["source", "strategy", "strategy-extension", "embedder"]
    """`source`, `strategy`, `strategy-extension` or `embedder`."""
    type_id: Id
    """The contribution's type."""
    entry_id: EntryId
    """The entry that installed it."""
    package_name: PackageName
    """The distribution that defines it."""
    provides: tuple[ProvidedCapability, ...] = ()
    """What it adds to the activation graph: its plugin's declared capabilities, and those
    every contribution of its kind provides (`source` and `source.<role>`, `strategy`)."""
    requires: tuple[CapabilityId, ...] = ()
    """The capabilities its plugin requires of the other active contributions."""


class RegistrySnapshot(WireModel):
    """A frozen picture of the registry after one change."""

    revision: int
    """The registry's revision; every change increments it."""
    contributions: tuple[InstalledContribution, ...]
    """Everything installed after the change."""
