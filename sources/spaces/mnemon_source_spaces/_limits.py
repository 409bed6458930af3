"""Long-term capacity: each space's configured limits, planned and applied only when asked.

Nothing here runs by itself. `maintenance-plan` lists, per space with `limits`, how many
memories it holds and which ones are past its limits (beyond `max_memories`, the oldest;
older than `max_age_days`), with what happens to each (`archive` into `archive_to`, or
`forget`) and the plan's digest. `maintenance-apply` is given that digest, plans again and
applies the plan only when it is the same. An archived memory is copied first (with an
idempotency key from its space and id, so a second run replays the copy), then forgotten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from mnemon.sdk import SourceError

from ._calls import ProviderCalls, check_parents
from ._config import SpacesSettings
from ._grants import PinnedSpace
from ._inputs import keyed_memory_id
from ._provider import (
    ForgetRequest,
    ForgetResult,
    GetRequest,
    GetResult,
    ListRequest,
    ListResult,
    Memory,
    RememberRequest,
    RememberResult,
)

__all__ = ["SpaceLimitsPlanner", "plan_digest"]

# the most memories of one space a plan reads; a space holding more is planned in parts
MAX_SCANNED = 10_000
_PAGE = 100


def plan_digest(plan: Sequence[dict[str, Any]]) -> str:
    """The SHA-256 of a plan's canonical JSON."""
    return hashlib.sha256(orjson.dumps(list(plan), option=orjson.OPT_SORT_KEYS)).hexdigest()


def archive_key(space: PinnedSpace, memory_id: str) -> str:
    """The idempotency key of a memory's archive copy: one per memory, whatever the run."""
    digest = hashlib.sha256(f"{space.parent}\x00{memory_id}".encode()).hexdigest()
    return f"mnemon-space-archive:{digest[:48]}"


def _created(memory: Memory) -> datetime | None:
    try:
        moment = datetime.fromisoformat(memory.created_at)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class SpaceLimitsPlanner:
    """The limits of one Source instance's spaces, in one scope's partitions."""

    def __init__(self, settings: SpacesSettings, calls: ProviderCalls) -> None:
        self._settings = settings
        self._calls = calls

    async def _memories(self, space: PinnedSpace) -> tuple[list[Memory], bool]:
        """The space's memories, newest first (at most `MAX_SCANNED`), and whether that is all."""
        memories: list[Memory] = []
        cursor = None
        while len(memories) < MAX_SCANNED:
            page = await self._calls.call(
                "list", ListRequest(parent=space.parent, limit=_PAGE, cursor=cursor), ListResult
            )
            check_parents(page.memories, (space.parent,))
            memories += page.memories
            cursor = page.next_cursor
            if not cursor or not page.memories:
                return memories, True
        return memories[:MAX_SCANNED], False

    async def plan(
        self, pinned: Sequence[PinnedSpace], now: datetime | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(usage per limited space, the plan): what is past each space's limits, oldest first."""
        self._calls.require("list")
        now = now or datetime.now(UTC)
        usage: list[dict[str, Any]] = []
        plan: list[dict[str, Any]] = []
        for space in pinned:
            limits = self._settings_of(space.name)
            if limits is None:
                continue
            memories, whole = await self._memories(space)
            over: dict[str, Memory] = {}
            if limits.max_memories is not None:
                for memory in memories[limits.max_memories :]:
                    over[memory.id] = memory
            if limits.max_age_days is not None:
                oldest = now - timedelta(days=limits.max_age_days)
                for memory in memories:
                    created = _created(memory)
                    if created is not None and created < oldest:
                        over[memory.id] = memory
            usage.append(
                {
                    "group": space.name,
                    "used": len(memories),
                    "limit": limits.max_memories,
                    "unit": "records",
                    "max_age_days": limits.max_age_days,
                    "then": limits.then,
                    "archive_to": limits.archive_to,
                    "counted_all": whole,
                }
            )
            # oldest first: what has waited longest goes first
            for memory in reversed([m for m in memories if m.id in over]):
                step: dict[str, Any] = {"id": memory.id, "group": space.name, "action": limits.then}
                if limits.then == "archive":
                    step["to_group"] = limits.archive_to
                plan.append(step)
        return usage, plan

    def _settings_of(self, name: str) -> Any:
        configured = self._settings.space(name)
        return None if configured is None else configured.limits

    async def apply(
        self, pinned: Sequence[PinnedSpace], plan: Sequence[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Apply `plan` step by step: the outcome of each, never more than happened."""
        named = {space.name: space for space in pinned}
        results = []
        for step in plan:
            space = named[step["group"]]
            result = {"id": step["id"], "group": step["group"], "action": step["action"]}
            try:
                if step["action"] == "archive":
                    result |= await self._archive(space, named[step["to_group"]], step["id"])
                else:
                    result |= await self._forget(space, step["id"])
            except SourceError as exc:
                # a refusal wrote nothing; anything else may have: say unknown, never more
                nothing = exc.kind == "terminal"
                result |= {"outcome": "kept" if nothing else "unknown", "code": exc.code}
            results.append(result)
        return results

    async def _forget(self, space: PinnedSpace, memory_id: str) -> dict[str, Any]:
        self._calls.require("forget")
        done = await self._calls.call(
            "forget", ForgetRequest(parent=space.parent, id=memory_id), ForgetResult
        )
        if not done.forgotten:
            return {"outcome": "gone"}
        return {"outcome": "forgotten" if done.durable else "unknown"}

    async def _archive(
        self, space: PinnedSpace, target: PinnedSpace, memory_id: str
    ) -> dict[str, Any]:
        self._calls.require("remember")
        self._calls.require("get")
        found = await self._calls.call(
            "get", GetRequest(parent=space.parent, id=memory_id), GetResult
        )
        if found.memory is None:
            return {"outcome": "gone"}
        memory = found.memory
        copy = await self._calls.call(
            "remember",
            RememberRequest(
                parent=target.parent,
                text=memory.text,
                tags=memory.tags,
                entities=memory.entities,
                idempotency_key=archive_key(space, memory_id),
                memory_id=keyed_memory_id(archive_key(space, memory_id)),
            ),
            RememberResult,
        )
        check_parents((copy.memory,), (target.parent,))
        if not copy.durable:
            # the copy is not confirmed durable: the original stays
            return {"outcome": "kept", "code": "copy-unconfirmed", "to_id": copy.memory.id}
        forgotten = await self._forget(space, memory_id)
        outcome = "archived" if forgotten["outcome"] in ("forgotten", "gone") else "unknown"
        return {"outcome": outcome, "to_id": copy.memory.id, "replayed": not copy.created}
