"""The activation graph: who provides and who requires which capability."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .._errors import CompositionRejected
from .installed import RegistryState

__all__ = ["check_activation_graph"]


@dataclass(frozen=True, slots=True)
class _Provider:
    batch: int
    package_name: str
    exclusive: bool


def check_activation_graph(state: RegistryState) -> None:
    """Check requirements and exclusive capabilities before any factory runs.

    Implicitly provided: `source` and `source.<role>` by each Source, `strategy` by each
    Strategy.

    Raises:
        CompositionRejected: `dependency unavailable: <pkg> requires <id>` or
            `capability conflict: <id> (<pkg>, <pkg>)`.
    """
    providers: dict[str, dict[int, _Provider]] = defaultdict(dict)
    requirements: dict[int, tuple[str, tuple[str, ...]]] = {}

    def provide(capability: str, provider: _Provider) -> None:
        known = providers[capability].get(provider.batch)
        if known is None or (provider.exclusive and not known.exclusive):
            providers[capability][provider.batch] = provider

    for item in state.installed:
        for provided in item.provides:
            provide(provided.id, _Provider(item.batch, item.package_name, provided.exclusive))
        if item.descriptor is not None:
            requirements[item.batch] = (item.package_name, item.requires)

    for _, (package, required) in sorted(requirements.items(), key=lambda pair: pair[1][0]):
        for capability in required:
            if not providers.get(capability):
                raise CompositionRejected(
                    f"dependency unavailable: {package} requires {capability}"
                )

    for capability in sorted(providers):
        active = list(providers[capability].values())
        if len(active) > 1 and any(provider.exclusive for provider in active):
            packages = sorted(provider.package_name for provider in active)
            raise CompositionRejected(f"capability conflict: {capability} ({', '.join(packages)})")
