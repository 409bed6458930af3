"""The board's one client of the management plane: the catalog, reads and confirmed writes.

Pages reach a Source's management operations only through here, by the operations and forms
the Source declares (`MemoryHost.management_catalog`), in the scope the person picked. A write
is always confirmed and fenced by the revision read just before it; its result is said as the
Source reported it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon import ManagementEntry, ManagementResult, MemoryHost, Scope

__all__ = ["ManagementPlane"]


class ManagementPlane:
    """The management plane of one host, for pages."""

    __slots__ = ("_host",)

    def __init__(self, host: MemoryHost) -> None:
        self._host = host

    def catalog(self) -> dict[str, ManagementEntry]:
        """Every serving Source with a management plane, by Source key."""
        return {entry.source_key: entry for entry in self._host.management_catalog()}

    async def read(
        self, source_key: str, scope: Scope, operation: str, input: Mapping[str, Any]
    ) -> Any:
        """Run a read operation of a Source in `scope`.

        Raises:
            ManagementError: refused or failed (the message never quotes memory).
        """
        return await self._host.management_client(source_key, scope).read(operation, input)

    async def write(
        self, source_key: str, scope: Scope, operation: str, input: Mapping[str, Any]
    ) -> ManagementResult:
        """Run a mutating operation in `scope`, confirmed, at the revision read just now.

        Raises:
            ManagementError: refused or failed.
            RevisionConflict: the Source changed between the revision read and the write.
        """
        client = self._host.management_client(source_key, scope)
        revision = await client.revision()
        return await client.mutate(operation, input, confirmed=True, expected_revision=revision)
