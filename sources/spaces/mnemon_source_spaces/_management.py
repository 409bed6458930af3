"""The management plane of the `spaces` Source: people inspect, page, add and delete.

Read-only binds the model, not people: management may write to every configured space. It
is scope-bound like everything else, and a mutation re-checks its fenced revision under
the instance's lock before it writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from mnemon import ManagementResult, ManageRequest, RevisionConflict, SourceError

from ._calls import ProviderCalls, check_parents
from ._config import SpacesSettings
from ._evidence import read_directory
from ._grants import Namespaces, PinnedSpace, memory_id_of
from ._inputs import checked_labels, checked_text, is_memory_id
from ._provider import (
    ForgetRequest,
    ForgetResult,
    ListRequest,
    ListResult,
    RememberRequest,
    RememberResult,
)

__all__ = ["SpacesManagement"]

DEFAULT_PAGE = 20


class SpacesManagement:
    """`manage()` of one Source instance."""

    def __init__(
        self, key: str, settings: SpacesSettings, namespaces: Namespaces, calls: ProviderCalls
    ) -> None:
        self._key = key
        self._settings = settings
        self._namespaces = namespaces
        self._calls = calls
        # mutations of this instance check the revision and write as one step
        self._lock = anyio.Lock()

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """Run one operation inside the request's scope.

        Raises:
            SourceError: a missing scope id (`forbidden`), an unknown space
                (`invalid_payload`) or a Provider failure.
            RevisionConflict: the namespace set is not the one the mutation expects.
        """
        pinned = self._namespaces.required(request.scope)
        revision = self._namespaces.revision(pinned)
        operation = request.operation.id
        payload = request.input
        if operation == "inspect":
            output: Any = await read_directory(self._calls, self._settings, pinned)
        elif operation == "list":
            output = await self._list(pinned, payload)
        else:
            async with self._lock:
                current = self._namespaces.revision(self._namespaces.required(request.scope))
                if current != request.expected_revision:
                    raise RevisionConflict(
                        f"revision conflict: the spaces are at {current}, "
                        f"not {request.expected_revision}"
                    )
                output = await self._write(operation, pinned, payload)
        return ManagementResult(
            source_key=self._key, operation=operation, output=output, revision=revision
        )

    def _named(self, pinned: Sequence[PinnedSpace], name: Any) -> PinnedSpace:
        space = next((space for space in pinned if space.name == name), None)
        if space is None:
            raise SourceError("invalid_payload", "no configured space has that name")
        return space

    async def _list(self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]) -> Any:
        self._calls.require("list")
        space = self._named(pinned, payload["space"])
        page = await self._calls.call(
            "list",
            ListRequest(
                parent=space.parent,
                limit=int(payload.get("limit", DEFAULT_PAGE)),
                cursor=payload.get("cursor"),
            ),
            ListResult,
        )
        check_parents(page.memories, (space.parent,))
        return {
            "space": space.name,
            "memories": [
                {
                    "id": memory.id,
                    "text": memory.text,
                    "tags": list(memory.tags),
                    "entities": list(memory.entities),
                    "created_at": memory.created_at,
                }
                for memory in page.memories
            ],
            "next_cursor": page.next_cursor,
        }

    async def _write(
        self, operation: str, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> Any:
        space = self._named(pinned, payload["space"])
        if operation == "remember":
            self._calls.require("remember")
            stored = await self._calls.call(
                "remember",
                RememberRequest(
                    parent=space.parent,
                    text=checked_text(payload["text"]),
                    tags=checked_labels(payload.get("tags", ()), "tags"),
                    entities=checked_labels(payload.get("entities", ()), "entities"),
                ),
                RememberResult,
            )
            check_parents((stored.memory,), (space.parent,))
            return {
                "space": space.name,
                "id": stored.memory.id,
                "duplicate": not stored.created,
                "durable": stored.durable,
            }
        self._calls.require("forget")
        memory_id = memory_id_of(str(payload["id"]))  # a handle names its memory id too
        if not is_memory_id(memory_id):
            raise SourceError("invalid_payload", "that is not a memory id")
        result = await self._calls.call(
            "forget", ForgetRequest(parent=space.parent, id=memory_id), ForgetResult
        )
        return {
            "space": space.name,
            "id": memory_id,
            "forgotten": result.forgotten,
            "durable": result.durable,
        }
