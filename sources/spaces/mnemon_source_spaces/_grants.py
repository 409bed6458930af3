"""Namespaces, revisions, grants and memory handles: what a View may read and name.

- A *partition* (`mnemon.sdk.scope_partition`) is the scope ids named by `scope_keys`
  (required), plus the tenant and the space's `partition_by` ids whenever the scope carries
  them; a *parent* is a digest of partition and space name, so a Provider never sees scope
  ids and two scopes never share a parent.
- The *revision* names the namespace set (Provider type, visible spaces, their parents and
  writability), not the contents: reads inside the pinned namespaces are live.
- A *handle* is the id a View hands the model for a memory: `<memory id>~<mac>`, where mac is
  an HMAC over the View id, the grant's nonce, the parent and the memory id with a key made
  when the Source instance was created. Only this instance can mint one, and every
  projection draws a fresh nonce (two turns composing identical Views still differ), so a
  handle that verifies was returned by this very View; no per-View state is kept.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mnemon.sdk import ReadGrant, Scope, ScopePartition, SourceError, scope_partition

from ._config import SpacesSettings

__all__ = [
    "HANDLE_SEPARATOR",
    "Handles",
    "Namespaces",
    "PinnedSpace",
    "grant_value",
    "handle_binding",
    "memory_id_of",
    "namespace_revision",
    "parent_of",
    "pinned_from_grant",
]

HANDLE_SEPARATOR = "~"
MAC_CHARACTERS = 20
GRANT_VERSION = 1
# namespace sets kept per Source instance, by scope ids
_KEPT = 16_384


@dataclass(frozen=True, slots=True)
class PinnedSpace:
    """One space a View may see: its name, its parent namespace and whether it may write."""

    name: str
    parent: str
    writable: bool


def _canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def parent_of(partition: ScopePartition, space: str) -> str:
    """The parent namespace of one space in one partition.

    It digests the partition's canonical JSON (sorted keys, the ids present), so a scope
    without a tenant keeps the parent it had before tenants were part of every partition.
    """
    canonical = _canonical(dict(partition.values))
    digest = hashlib.sha256(b"mnemon-spaces/parent/v1\x00" + canonical + b"\x00" + space.encode())
    return "s1-" + digest.hexdigest()[:40]


def namespace_revision(provider_type: str, spaces: Sequence[PinnedSpace]) -> str:
    """The revision of a namespace set; equal sets give equal revisions."""
    body = _canonical(
        {
            "provider": provider_type,
            "spaces": [[space.name, space.parent, space.writable] for space in spaces],
        }
    )
    return "spaces:" + hashlib.sha256(body).hexdigest()


class _Nonces:
    """Random nonces from the OS, drawn 4 KB at a time rather than one call per View.

    Every projection draws one on the event loop's thread, and reading the OS's randomness
    lets go of the GIL: with worker threads busy, the loop then waits for it to come back,
    once per View. A buffer makes that once per 256 Views. A forked child drops the
    buffer it inherited, so two processes never hand out the same bytes.
    """

    SIZE = 16
    BUFFER = 4_096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._at = 0

    def draw(self) -> str:
        """A fresh nonce: 16 random bytes in hex."""
        with self._lock:
            if self._at + self.SIZE > len(self._buffer):
                self._buffer, self._at = os.urandom(self.BUFFER), 0
            start, self._at = self._at, self._at + self.SIZE
            return self._buffer[start : self._at].hex()

    def forget(self) -> None:
        """In a forked child: drop the parent's bytes, and a lock another thread may hold."""
        self._lock = threading.Lock()
        self._buffer, self._at = b"", 0


_NONCES = _Nonces()
os.register_at_fork(after_in_child=_NONCES.forget)


def grant_value(revision: str, spaces: Sequence[PinnedSpace]) -> dict[str, Any]:
    """The opaque, host-side grant value pinning a View's spaces, with a fresh nonce."""
    return {
        "v": GRANT_VERSION,
        "nonce": _NONCES.draw(),
        "revision": revision,
        "spaces": [
            {"name": space.name, "parent": space.parent, "writable": space.writable}
            for space in spaces
        ],
    }


def handle_binding(view_id: str, grant: ReadGrant | None) -> str:
    """What a handle is bound to: the View id and the nonce its grant drew."""
    nonce = (
        grant.value.get("nonce") if grant is not None and isinstance(grant.value, Mapping) else None
    )
    return f"{view_id}\x00{nonce if isinstance(nonce, str) else ''}"


def pinned_from_grant(value: Any) -> tuple[PinnedSpace, ...] | None:
    """The spaces a grant pins, or None when it is not a grant this Source issued."""
    if not isinstance(value, Mapping) or value.get("v") != GRANT_VERSION:
        return None
    spaces = value.get("spaces")
    if not isinstance(spaces, list | tuple):
        return None
    pinned = []
    for item in spaces:
        if not isinstance(item, Mapping):
            return None
        name, parent, writable = item.get("name"), item.get("parent"), item.get("writable")
        if not isinstance(name, str) or not isinstance(parent, str):
            return None
        if not isinstance(writable, bool):
            return None
        pinned.append(PinnedSpace(name, parent, writable))
    return tuple(pinned)


class Namespaces:
    """The namespace sets of one Source instance, derived from each request's own scope.

    A set is a function of the scope's ids and the instance's settings only, so the sets of
    the scopes in use are kept (by those ids, up to `_KEPT`) instead of digested every turn.
    """

    __slots__ = ("_known", "_provider_type", "_settings")

    def __init__(self, settings: SpacesSettings, provider_type: str) -> None:
        self._settings = settings
        self._provider_type = provider_type
        self._known: dict[tuple[str | None, ...], tuple[PinnedSpace, ...] | None] = {}

    def pinned(self, scope: Scope) -> tuple[PinnedSpace, ...] | None:
        """The spaces `scope` sees, or None when it lacks an id of `scope_keys`."""
        ids = (scope.tenant_id, scope.user_id, scope.agent_id, scope.session_id, scope.workspace)
        try:
            return self._known[ids]
        except KeyError:
            pass
        pinned = self._derive(scope)
        if len(self._known) >= _KEPT:
            self._known.clear()  # more scopes in use than this: derived again, never wrongly
        self._known[ids] = pinned
        return pinned

    def _derive(self, scope: Scope) -> tuple[PinnedSpace, ...] | None:
        pinned = []
        for space in self._settings.spaces:
            partition = scope_partition(
                scope, self._settings.scope_keys, when_present=space.partition_by
            )
            if partition is None:
                return None
            pinned.append(PinnedSpace(space.name, parent_of(partition, space.name), space.writable))
        return tuple(pinned)

    def required(self, scope: Scope) -> tuple[PinnedSpace, ...]:
        """The spaces `scope` sees.

        Raises:
            SourceError: `forbidden` when the scope lacks an id of `scope_keys`.
        """
        pinned = self.pinned(scope)
        if pinned is None:
            raise SourceError(
                "forbidden", "the scope lacks an id this Source partitions memories by"
            )
        return pinned

    def revision(self, pinned: Sequence[PinnedSpace]) -> str:
        """The revision naming this namespace set."""
        return namespace_revision(self._provider_type, pinned)

    def granted(self, scope: Scope, grant: ReadGrant | None) -> tuple[PinnedSpace, ...]:
        """The spaces of `scope`, which `grant` (when given) must pin exactly.

        Raises:
            SourceError: `forbidden` for a missing scope id or a grant of other spaces.
        """
        pinned = self.required(scope)
        if grant is not None and pinned_from_grant(grant.value) != pinned:
            # a grant only narrows: it must pin exactly this scope's namespaces
            raise SourceError("forbidden", "the grant does not pin this View's spaces")
        return pinned


class Handles:
    """Mint and verify View-bound memory handles with one instance's secret key."""

    __slots__ = ("_keyed",)

    def __init__(self, key: bytes) -> None:
        # HMAC-SHA256 keyed once; each MAC continues a copy. Not `hmac.digest`: that one-shot
        # lets go of the GIL whatever the message's size, and on the event loop's thread,
        # with worker threads busy, getting it back cost about 0.2 ms a handle under load
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return "Handles()"

    def _mac(self, binding: str, parent: str, memory_id: str) -> str:
        mac = self._keyed.copy()
        mac.update("\x00".join((binding, parent, memory_id)).encode())
        return mac.hexdigest()[:MAC_CHARACTERS]

    def issue(self, binding: str, parent: str, memory_id: str) -> str:
        """The handle naming `memory_id` of `parent` in the View `binding` names."""
        return f"{memory_id}{HANDLE_SEPARATOR}{self._mac(binding, parent, memory_id)}"

    def verify(
        self, binding: str, handle: str, spaces: Sequence[PinnedSpace]
    ) -> tuple[PinnedSpace, str] | None:
        """The space and memory id a handle of this View (`handle_binding`) names, or None."""
        memory_id, separator, mac = handle.rpartition(HANDLE_SEPARATOR)
        if not separator or not memory_id or len(mac) != MAC_CHARACTERS:
            return None
        for space in spaces:
            if hmac.compare_digest(mac, self._mac(binding, space.parent, memory_id)):
                return space, memory_id
        return None


def memory_id_of(handle: str) -> str:
    """The memory id a handle (or a bare id) names, without verifying anything."""
    memory_id, separator, _ = handle.rpartition(HANDLE_SEPARATOR)
    return memory_id if separator else handle
