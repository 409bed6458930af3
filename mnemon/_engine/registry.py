"""The registry: what each entry installed, validated as a whole before anything changes."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._definitions import PluginDescriptor
from .._errors import InstallError
from .._install import Disposer, MemoryContributions
from .._models import ENTRY_ID_PATTERN, RegistrySnapshot
from .extensions import check_slot_ownership
from .installed import Installed, RegistryState

__all__ = ["Registry"]

_log = logging.getLogger("mnemon.registry")
_ENTRY_ID = re.compile(ENTRY_ID_PATTERN)


@dataclass(slots=True)
class Registry:
    """Entries' contributions; each change is one atomic, revisioned step.

    While an entry is being mounted its installs are staged: they join a candidate state that
    is committed only once a generation built from it has been accepted.
    """

    state: RegistryState = field(default_factory=lambda: RegistryState(revision=0))
    _next_batch: int = 1
    _listeners: list[Callable[[RegistrySnapshot], None]] = field(default_factory=list)
    _staging: tuple[frozenset[str], tuple[Installed, ...]] | None = None

    def begin_staging(self, entry_ids: frozenset[str]) -> None:
        """Stage installs of `entry_ids` until `candidate()` is committed or discarded."""
        self._staging = (entry_ids, self.state.installed)

    def candidate(self) -> RegistryState:
        """The state committing the staged installs would produce."""
        assert self._staging is not None
        return RegistryState(self.state.revision + 1, self._staging[1])

    def stage_removal(self, batches: set[int]) -> None:
        """Leave `batches` out of the staged candidate; committed only with the candidate."""
        assert self._staging is not None
        entry_ids, staged = self._staging
        self._staging = (entry_ids, tuple(item for item in staged if item.batch not in batches))

    def end_staging(self, *, commit: bool) -> None:
        """Commit the staged installs as one change, or discard them."""
        staging, self._staging = self._staging, None
        if commit and staging is not None and staging[1] != self.state.installed:
            self._commit(staging[1])

    def subscribe(self, listener: Callable[[RegistrySnapshot], None]) -> Callable[[], None]:
        """Call `listener` with a frozen snapshot after every change; returns unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def install(
        self,
        entry_id: str,
        configuration: Mapping[str, Any],
        batch: MemoryContributions,
        default_descriptor: PluginDescriptor | None,
    ) -> tuple[int, Disposer]:
        """Validate and commit one install batch; return its batch id and disposer.

        Raises:
            InstallError: the batch is empty, its keys collide, or its descriptor forbids it.
        """
        if not (batch.sources or batch.strategies or batch.view_extensions or batch.embedders):
            raise InstallError(f"entry {entry_id!r}: an empty contribution installs nothing")
        base = batch.instance_id if batch.instance_id is not None else entry_id
        if not isinstance(base, str) or not _ENTRY_ID.match(base):
            raise InstallError(f"entry {entry_id!r}: instance id {base!r} is not a valid id")
        descriptor = batch.plugin or default_descriptor
        number = self._next_batch
        items: list[Installed] = []
        for kind, definitions in (
            ("source", batch.sources),
            ("strategy", batch.strategies),
            ("strategy-extension", batch.view_extensions),
            ("embedder", batch.embedders),
        ):
            if definitions and descriptor is not None and kind not in descriptor.roles:
                raise InstallError(
                    f"entry {entry_id!r}: plugin {descriptor.package_name} does not declare "
                    f"role {kind!r}"
                )
            for definition in definitions:
                key = f"{kind}:{base}"  # the instance key names its kind
                if len(definitions) > 1:
                    key += f"/{definition.type_id}"
                items.append(
                    Installed(key, kind, entry_id, number, definition, descriptor, configuration)  # type: ignore[arg-type]
                )
        keys = [item.instance_key for item in items]
        # a staged candidate always holds everything committed plus the staged installs
        pool = self._staging[1] if self._staging is not None else self.state.installed
        existing = {item.instance_key for item in pool}
        for key in keys:
            if keys.count(key) > 1:
                raise InstallError(f"{key} is installed twice in one batch")
            if key in existing:
                raise InstallError(f"{key} is already installed")
        self._check_batch(pool, items)
        self._next_batch += 1
        if self._staging is not None:
            self._staging = (self._staging[0], tuple(sorted((*pool, *items), key=_by_key)))
        if self._staging is None or entry_id not in self._staging[0]:
            self._commit(tuple(sorted((*self.state.installed, *items), key=_by_key)))
        removed = False

        def dispose() -> None:
            nonlocal removed
            if not removed:
                removed = True
                self.remove_batches({number})

        return number, dispose

    def remove_batches(self, batches: set[int]) -> bool:
        """Remove every contribution of `batches`; whether the committed state changed."""
        if self._staging is not None:
            entry_ids, staged = self._staging
            self._staging = (entry_ids, tuple(i for i in staged if i.batch not in batches))
        kept = tuple(item for item in self.state.installed if item.batch not in batches)
        if len(kept) == len(self.state.installed):
            return False
        self._commit(kept)
        return True

    def _check_batch(self, current: tuple[Installed, ...], items: list[Installed]) -> None:
        check_slot_ownership(
            [item for item in current if item.kind == "strategy-extension"],
            [item for item in items if item.kind == "strategy-extension"],
        )
        _check_space_ownership(
            [item for item in current if item.kind == "embedder"],
            [item for item in items if item.kind == "embedder"],
        )

    def _commit(self, installed: tuple[Installed, ...]) -> None:
        self.state = RegistryState(self.state.revision + 1, installed)
        snapshot = self.state.snapshot()
        for listener in tuple(self._listeners):
            try:
                listener(snapshot)
            except Exception:
                # a listener's failure must not undo or block a committed change
                _log.warning("a registry listener failed", exc_info=False)
                _log.debug("registry listener failure", exc_info=True)


def _check_space_ownership(current: list[Installed], new: list[Installed]) -> None:
    """One owner per vector space: a second embedder declaring a space id is refused.

    Raises:
        InstallError: `space_owner_conflict`, naming the space and both packages.
    """
    owners: dict[str, Installed] = {}
    for item in [*current, *new]:
        for space in item.definition.manifest.spaces:
            first = owners.setdefault(space.id, item)
            if first is not item:
                raise InstallError(
                    f"space_owner_conflict: vector space {space.id!r} is declared by "
                    f"{first.instance_key} ({first.package_name}) and {item.instance_key} "
                    f"({item.package_name})"
                )


def _by_key(item: Installed) -> str:
    return item.instance_key
