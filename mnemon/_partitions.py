"""Scope partitions: which slice of a Source's data one scope may see, and its stable key."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

from ._errors import DefinitionError
from ._json import FrozenDict
from ._models import Scope

__all__ = ["SCOPE_IDS", "ScopePartition", "scope_partition"]

SCOPE_IDS = ("tenant_id", "user_id", "agent_id", "session_id", "workspace")
# partitions already derived, by (keys, when_present, the scope's ids): every Source derives
# its partitions on every turn, and a partition is a pure, immutable function of these
_KNOWN: dict[tuple[object, ...], ScopePartition | None] = {}
_KNOWN_LIMIT = 16_384  # about 10 MB at most


@dataclass(frozen=True, slots=True)
class ScopePartition:
    """The scope ids that select one partition of a Source's data, and keys naming it.

    `key` is `sha256` hex of the canonical JSON of `values` (which ids are present counts,
    not only their values), so two different partitions never share a key; use it, or a
    prefix of it long enough for your data, to name files, folders or rows.
    """

    values: Mapping[str, str]
    key: str

    def folder_name(self, prefix: str = "p-", length: int = 32) -> str:
        """A file-system-safe name for the partition: `prefix` and `length` hex digits."""
        return f"{prefix}{self.key[:length]}"


def scope_partition(
    scope: Scope, keys: Iterable[str], *, when_present: Iterable[str] = ()
) -> ScopePartition | None:
    """The partition of `scope` for a Source that partitions by `keys`, or None.

    Every id named in `keys` is required: a scope missing one has no partition (None), and
    the Source must then say `unavailable` (reason `missing-scope`), never fall back to a
    wider partition. The tenant is always part of the partition when the scope carries one,
    listed or not, so the same user in two tenants, or with and without a tenant, is never
    one partition. Ids in `when_present` join the partition only when the scope has them
    (an agent's own notes by `agent_id`, a project space by `workspace`).

    Raises:
        DefinitionError: `keys` or `when_present` names something that is not a scope id.
    """
    required = tuple(keys)
    optional = ("tenant_id", *when_present)
    known = (
        required,
        optional,
        scope.tenant_id,
        scope.user_id,
        scope.agent_id,
        scope.session_id,
        scope.workspace,
    )
    try:
        return _KNOWN[known]
    except KeyError:
        pass
    partition = _derive(scope, required, optional)
    if len(_KNOWN) >= _KNOWN_LIMIT:
        _KNOWN.clear()  # hosts with more scopes than this in use derive again, never wrongly
    _KNOWN[known] = partition
    return partition


def _derive(
    scope: Scope, required: tuple[str, ...], optional: tuple[str, ...]
) -> ScopePartition | None:
    unknown = sorted(set(required + optional) - set(SCOPE_IDS))
    if unknown:
        raise DefinitionError(f"scope partition: {unknown[0]!r} is not one of {SCOPE_IDS}")
    values: dict[str, str] = {}
    for name in required:
        value = getattr(scope, name)
        if value is None:
            return None
        values[name] = value
    for name in optional:
        value = getattr(scope, name)
        if value is not None:
            values[name] = value
    canonical = orjson.dumps(values, option=orjson.OPT_SORT_KEYS)
    ordered = FrozenDict(sorted(values.items()))
    return ScopePartition(values=ordered, key=hashlib.sha256(canonical).hexdigest())
