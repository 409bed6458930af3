"""Registry snapshots: what listeners see after each change."""

from __future__ import annotations

from typing import Literal

from .base import EntryId, Id, InstanceKey, PackageName, WireModel


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


class RegistrySnapshot(WireModel):
    """A frozen picture of the registry after one change."""

    revision: int
    """The registry's revision; every change increments it."""
    contributions: tuple[InstalledContribution, ...]
    """Everything installed after the change."""
