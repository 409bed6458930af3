"""The board's one client of the management plane: the catalog, reads and fenced writes.

Pages reach a Source's memory only through here, by what the Source declares in the
management catalog (`MemoryHost.management_catalog`): its operations with their input
schemas, and the kinds of record it holds (the core's records contract: `records-read`,
`records-write`, `records-delete`), always in the scope the person picked. No Source is
known by name: a third-party Source gets the same pages as a first-party one.

A write is always confirmed and fenced by the revision the page was drawn at, so a change
made since (by the model, another page, another process) refuses it instead of being
overwritten. Its result is said as the Source reported it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mnemon import (
    ManagementEntry,
    ManagementOperation,
    ManagementResult,
    MemoryHost,
    RecordKind,
    Scope,
)

from ._forms import plain

__all__ = [
    "CORE_OPERATIONS",
    "ManagementPlane",
    "RecordsPage",
    "identifiers",
    "operation_of",
    "own_operations",
    "row_operations",
]

# the operations the core derives for every Source (records, the maintenance preflight):
# pages drive them through their own views, never as a plain form
CORE_OPERATIONS = frozenset({"records-read", "records-write", "records-delete", "write-scope"})


@dataclass(frozen=True, slots=True)
class RecordsPage:
    """One page of records of one kind, as `records-read` answered, and the revision before."""

    records: tuple[dict[str, Any], ...]
    next_cursor: str | None
    groups: tuple[str, ...] | None
    """A grouped kind's groups in this scope (None for a kind without groups)."""
    revision: str | None
    """The Source's revision read just before the page: what a write from it is fenced by."""


class ManagementPlane:
    """The management plane of one host, for pages."""

    __slots__ = ("_host",)

    def __init__(self, host: MemoryHost) -> None:
        self._host = host

    def catalog(self) -> dict[str, ManagementEntry]:
        """Every serving Source with a management plane, by Source key."""
        return {entry.source_key: entry for entry in self._host.management_catalog()}

    def entry(self, source_key: str) -> ManagementEntry | None:
        """The catalog entry of one Source, or None when it has no management plane now."""
        return self.catalog().get(source_key)

    async def revision(self, source_key: str, scope: Scope) -> str | None:
        """The Source's current revision in `scope` (what a write from the page is fenced by).

        Raises:
            ManagementError: the Source is unknown or its facts() failed.
        """
        return await self._host.management_client(source_key, scope).revision()

    async def read(
        self, source_key: str, scope: Scope, operation: str, input: Mapping[str, Any]
    ) -> Any:
        """Run a read operation of a Source in `scope`; its output as plain JSON data.

        Raises:
            ManagementError: refused or failed (the message never quotes memory).
        """
        client = self._host.management_client(source_key, scope)
        return plain(await client.read(operation, input))

    async def records(
        self,
        source_key: str,
        scope: Scope,
        kind: RecordKind,
        *,
        limit: int,
        group: str | None = None,
        cursor: str | None = None,
    ) -> RecordsPage:
        """One page of a kind's records (of one group), with the revision read before it.

        The revision is read first: a write made between the two reads makes the page newer
        than its revision, so a change from it is refused, never one that overwrites.

        Raises:
            ManagementError: refused or failed.
        """
        client = self._host.management_client(source_key, scope)
        revision = await client.revision()
        payload: dict[str, Any] = {"kind": kind.id, "limit": limit}
        if group is not None:
            payload["group"] = group
        if cursor is not None:
            payload["cursor"] = cursor
        page = plain(await client.read("records-read", payload))
        groups = page.get("groups")
        if kind.group_field is not None and groups is None:
            # a later page does not name the groups: the first page of one record does
            first = plain(await client.read("records-read", {"kind": kind.id, "limit": 1}))
            groups = first.get("groups")
        return RecordsPage(
            records=tuple(page["records"]),
            next_cursor=page.get("next_cursor"),
            groups=tuple(groups) if kind.group_field is not None and groups else None,
            revision=revision,
        )

    async def write(
        self,
        source_key: str,
        scope: Scope,
        operation: str,
        input: Mapping[str, Any],
        expected_revision: str | None,
    ) -> ManagementResult:
        """Run a mutating operation in `scope`, confirmed, fenced by `expected_revision`.

        Raises:
            ManagementError: refused or failed.
            RevisionConflict: the Source is no longer at `expected_revision`.
        """
        client = self._host.management_client(source_key, scope)
        return await client.mutate(
            operation, input, confirmed=True, expected_revision=expected_revision
        )


def own_operations(entry: ManagementEntry) -> tuple[ManagementOperation, ...]:
    """The operations a Source declared itself (the core's record operations left out)."""
    return tuple(op for op in entry.operations if op.id not in CORE_OPERATIONS)


def operation_of(entry: ManagementEntry, operation_id: str) -> ManagementOperation | None:
    """One of the operations a Source declared itself, by id, or None."""
    return next((op for op in own_operations(entry) if op.id == operation_id), None)


def identifiers(entry: ManagementEntry) -> frozenset[str]:
    """The input names that take a record's id: `id`, and each record kind's own name."""
    return frozenset({"id", *(kind.id for kind in entry.records)})


def _properties(operation: ManagementOperation) -> Mapping[str, Any]:
    properties = operation.input_schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _prefill(value: Any) -> str | None:
    """A row's value as a form field holds it, or None when no field could hold it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    return None


def row_operations(
    entry: ManagementEntry, row: Mapping[str, Any], kind: str | None = None
) -> list[tuple[ManagementOperation, dict[str, str]]]:
    """The operations a row of a table can open, each with the fields the row fills in.

    An operation is offered when one of its inputs takes an identifier the row carries: `id`,
    or a record kind's own name (the `document` input of a Source holding `document`
    records). Every input named like one of the row's fields is filled in from it; a row of
    `kind` records fills the kind-named input from its `id`.
    """
    names = identifiers(entry)
    offered = []
    for operation in own_operations(entry):
        properties = _properties(operation)
        fields: dict[str, str] = {}
        for name in properties:
            value = row.get(name)
            if value is None and name == kind:
                value = row.get("id")
            shown = _prefill(value) if value is not None else None
            if shown is not None:
                fields[name] = shown
        if any(name in fields for name in names & set(properties)):
            offered.append((operation, fields))
    return offered
