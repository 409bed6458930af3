"""What the registry holds: installed contributions and its immutable states."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._definitions import PluginDescriptor
from .._models import InstalledContribution, ProvidedCapability, RegistrySnapshot

__all__ = ["ContributionKind", "Installed", "RegistryState"]

ContributionKind = Literal["source", "strategy", "strategy-extension", "embedder"]


@dataclass(frozen=True, slots=True)
class Installed:
    """One installed contribution, bound to the entry and install batch that made it."""

    instance_key: str
    kind: ContributionKind
    entry_id: str
    batch: int
    definition: Any
    descriptor: PluginDescriptor | None
    configuration: Mapping[str, Any]

    @property
    def type_id(self) -> str:
        return str(self.definition.type_id)

    @property
    def package_name(self) -> str:
        if self.descriptor is not None:
            return self.descriptor.package_name
        return str(self.definition.package_name)

    @property
    def provides(self) -> tuple[ProvidedCapability, ...]:
        """Its node in the activation graph: the capabilities it provides.

        `source` and `source.<role>` for a Source, `strategy` for a Strategy (implicit, never
        exclusive), then those its plugin declares.
        """
        implicit: list[str] = []
        if self.kind == "source":
            implicit = ["source", f"source.{self.definition.manifest.role}"]
        elif self.kind == "strategy":
            implicit = ["strategy"]
        declared = self.descriptor.provides if self.descriptor is not None else ()
        named = {item.id for item in declared}
        return (
            *(ProvidedCapability(id=name) for name in implicit if name not in named),
            *declared,
        )

    @property
    def requires(self) -> tuple[str, ...]:
        """The capabilities its plugin requires."""
        return self.descriptor.requires if self.descriptor is not None else ()


@dataclass(frozen=True, slots=True)
class RegistryState:
    """An immutable state of the registry; generations are built from one of these."""

    revision: int
    installed: tuple[Installed, ...] = ()

    def of_kind(self, kind: ContributionKind) -> tuple[Installed, ...]:
        return tuple(item for item in self.installed if item.kind == kind)

    def snapshot(self) -> RegistrySnapshot:
        return RegistrySnapshot(
            revision=self.revision,
            contributions=tuple(
                InstalledContribution(
                    instance_key=item.instance_key,
                    kind=item.kind,
                    type_id=item.type_id,
                    entry_id=item.entry_id,
                    package_name=item.package_name,
                    provides=item.provides,
                    requires=item.requires,
                )
                for item in self.installed
            ),
        )
