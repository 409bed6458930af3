"""Registry snapshots: what listeners see after each change."""

from __future__ import annotations

from typing import Literal

from .base import EntryId, Id, InstanceKey, PackageName, WireModel


class InstalledContribution(WireModel):
    """One installed contribution as listeners see it."""

    instance_key: InstanceKey
    kind: Literal["source", "strategy", "strategy-extension"]
    type_id: Id
    entry_id: EntryId
    package_name: PackageName


class RegistrySnapshot(WireModel):
    """A frozen picture of the registry after one change."""

    revision: int
    contributions: tuple[InstalledContribution, ...]
