"""An in-memory (JSON file backed) Provider for tests, with switches for misbehaviour."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mnemon_source_spaces import (
    EntityCount,
    EntityIndexRequest,
    EntityIndexResult,
    ForgetRequest,
    ForgetResult,
    GetRequest,
    GetResult,
    LinkRequest,
    LinkResult,
    ListRequest,
    ListResult,
    Memory,
    ProviderError,
    ProviderInit,
    ProviderStatus,
    RelatedMemory,
    RelatedRequest,
    RelatedResult,
    RememberRequest,
    RememberResult,
    SearchHit,
    SearchRequest,
    SearchResult,
    SpaceProviderDefinition,
    StatusRequest,
    define_space_provider,
)

from mnemon import DefinitionError

ALL = ("search", "list", "remember", "get", "forget", "link", "related", "entity_index")
KEYS = ("path", "token", "delay", "availability", "live", "leak", "fabricate", "explode")


class MemoryProvider:
    """Keeps memories in a JSON file; every method honours the declared capabilities."""

    def __init__(self, capabilities: Iterable[str], init: ProviderInit) -> None:
        config = init.configuration
        unknown = sorted(set(config) - set(KEYS))
        if unknown:
            raise DefinitionError(f"{unknown[0]}: unknown key")
        self.capabilities = set(capabilities)
        self.path = Path(config.get("path") or Path(init.data_directory) / "memory.json")
        self.delay = float(config.get("delay", 0))
        self.availability = config.get("availability", "ready")
        self.live = config.get("live")
        self.leak = bool(config.get("leak", False))
        self.fabricate = bool(config.get("fabricate", False))
        self.explode = config.get("explode")
        self._token = init.token
        self.disposed = False

    def __repr__(self) -> str:
        return "MemoryProvider()"

    # ------------------------------------------------------------------ storage

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"memories": {}, "links": []}
        return json.loads(self.path.read_text())

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data))

    def _memories(self, data: dict[str, Any], parent: str) -> list[Memory]:
        rows = data["memories"].get(parent, [])
        return [Memory.model_validate(_public(row)) for row in rows]

    async def _enter(self, capability: str | None) -> None:
        if self.delay:
            await anyio.sleep(self.delay)
        if self.explode:
            raise RuntimeError(f"upstream exploded with credential {self._token}")
        if capability is not None and capability not in self.capabilities:
            raise ProviderError("unsupported", f"{capability} is not offered")

    # ------------------------------------------------------------------ methods

    async def status(self, request: StatusRequest) -> ProviderStatus:
        await self._enter(None)
        data = self._load()
        namespaces = []
        if request.count:
            namespaces = [
                {"parent": parent, "memories": len(data["memories"].get(parent, []))}
                for parent in request.parents
            ]
        return ProviderStatus.model_validate(
            {
                "availability": self.availability,
                "reason": None if self.availability == "ready" else "upstream-maintenance",
                "capabilities": self.live,
                "namespaces": namespaces,
            }
        )

    async def search(self, request: SearchRequest) -> SearchResult:
        await self._enter("search")
        data = self._load()
        terms = [word.lower() for word in request.query.split()]
        parents = list(data["memories"]) if self.leak else list(request.parents)
        hits = []
        for parent in parents:
            for memory in self._memories(data, parent):
                text = memory.text.lower()
                matched = sum(1 for term in terms if term in text)
                if matched:
                    hits.append(SearchHit(memory=memory, score=matched / len(terms)))
        hits.sort(key=lambda hit: hit.score, reverse=True)
        return SearchResult(hits=tuple(hits[: request.limit]))

    async def list(self, request: ListRequest) -> ListResult:
        if self.fabricate and "list" not in self.capabilities:
            # a lying query-only Provider: a "browse" list made from search
            found = await self.search(SearchRequest(parents=(request.parent,), query="a"))
            return ListResult(memories=tuple(hit.memory for hit in found.hits))
        await self._enter("list")
        memories = sorted(
            self._memories(self._load(), request.parent), key=lambda m: m.created_at, reverse=True
        )
        start = int(request.cursor) if request.cursor else 0
        page = memories[start : start + request.limit]
        more = start + request.limit < len(memories)
        return ListResult(
            memories=tuple(page), next_cursor=str(start + request.limit) if more else None
        )

    async def remember(self, request: RememberRequest) -> RememberResult:
        await self._enter("remember")
        data = self._load()
        rows = data["memories"].setdefault(request.parent, [])
        for row in rows:
            if (request.idempotency_key and row.get("key") == request.idempotency_key) or (
                request.memory_id and row["id"] == request.memory_id
            ):
                return RememberResult(memory=Memory.model_validate(_public(row)), created=False)
        memory = Memory(
            parent=request.parent,
            id=request.memory_id or f"mem-{uuid.uuid4().hex[:12]}",
            text=request.text,
            tags=request.tags,
            entities=request.entities,
            created_at=datetime.now(UTC).isoformat(),
        )
        rows.append({**memory.model_dump(), "key": request.idempotency_key})
        self._save(data)
        return RememberResult(memory=memory, created=True)

    async def get(self, request: GetRequest) -> GetResult:
        await self._enter("get")
        for memory in self._memories(self._load(), request.parent):
            if memory.id == request.id:
                return GetResult(memory=memory)
        return GetResult()

    async def forget(self, request: ForgetRequest) -> ForgetResult:
        await self._enter("forget")
        data = self._load()
        rows = data["memories"].get(request.parent, [])
        kept = [row for row in rows if row["id"] != request.id]
        data["memories"][request.parent] = kept
        data["links"] = [
            link
            for link in data["links"]
            if not (link[0] == request.parent and request.id in (link[1], link[2]))
        ]
        self._save(data)
        return ForgetResult(forgotten=len(kept) != len(rows))

    async def link(self, request: LinkRequest) -> LinkResult:
        await self._enter("link")
        data = self._load()
        ids = {memory.id for memory in self._memories(data, request.parent)}
        if request.source_id == request.target_id:
            raise ProviderError("invalid_payload", "self link")
        if not {request.source_id, request.target_id} <= ids:
            raise ProviderError("not_found", "missing memory")
        link = [request.parent, request.source_id, request.target_id, request.relation]
        if link in data["links"]:
            return LinkResult(created=False)
        data["links"].append(link)
        self._save(data)
        return LinkResult(created=True)

    async def related(self, request: RelatedRequest) -> RelatedResult:
        await self._enter("related")
        data = self._load()
        memories = {memory.id: memory for memory in self._memories(data, request.parent)}
        if request.id not in memories:
            raise ProviderError("not_found", "missing memory")
        if self.fabricate:
            # a lying Provider: "related" is simply every other memory
            others = [m for m in memories.values() if m.id != request.id]
            return RelatedResult(
                related=tuple(
                    RelatedMemory(memory=m, relation="related", direction="outgoing")
                    for m in others
                )
            )
        found = []
        for parent, source, target, relation in reversed(data["links"]):
            if parent != request.parent:
                continue
            if source == request.id:
                found.append(
                    RelatedMemory(memory=memories[target], relation=relation, direction="outgoing")
                )
            elif target == request.id:
                found.append(
                    RelatedMemory(memory=memories[source], relation=relation, direction="incoming")
                )
        return RelatedResult(related=tuple(found[: request.limit]))

    async def entity_index(self, request: EntityIndexRequest) -> EntityIndexResult:
        await self._enter("entity_index")
        counts: dict[str, int] = {}
        for memory in self._memories(self._load(), request.parent):
            for name in dict.fromkeys(memory.entities):
                if name.casefold().startswith((request.prefix or "").casefold()):
                    counts[name] = counts.get(name, 0) + 1
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return EntityIndexResult(
            entities=tuple(EntityCount(name=n, memories=c) for n, c in ranked[: request.limit])
        )

    async def dispose(self) -> None:
        self.disposed = True


class LeakyRepr(MemoryProvider):
    def __repr__(self) -> str:
        return f"MemoryProvider(token={self._token!r})"


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "key"}


def memory_provider(
    capabilities: Iterable[str] = ALL,
    *,
    type_id: str = "memory",
    kind: type[MemoryProvider] = MemoryProvider,
) -> SpaceProviderDefinition:
    """A Provider definition declaring `capabilities`, made of `kind` adapters."""
    declared = list(capabilities)
    return define_space_provider(
        {
            "type_id": type_id,
            "package_name": "spaces-tests",
            "label": "In-memory test Provider",
            "description": "Keeps memories in a JSON file, for tests.",
            "capabilities": declared,
        },
        lambda init: kind(declared, init),
    )
