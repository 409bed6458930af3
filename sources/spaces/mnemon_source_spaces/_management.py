"""The management plane of the `spaces` Source: people inspect, page, add and delete.

Read-only binds the model, not people: management may write to every configured space. It
is scope-bound like everything else, and a mutation re-checks its fenced revision under
the instance's lock before it writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from mnemon.sdk import ManagementResult, ManageRequest, RevisionConflict, SourceError

from ._calls import ProviderCalls, check_parents
from ._config import SpacesSettings
from ._evidence import read_directory
from ._grants import Namespaces, PinnedSpace, memory_id_of, pinned_from_grant
from ._inputs import checked_labels, checked_text, is_memory_id, keyed_memory_id
from ._limits import SpaceLimitsPlanner, plan_digest
from ._manifest import MAX_ENTITIES, MAX_RECALL_LIMIT, MAX_TAGS, MAX_TEXT_CHARACTERS
from ._provider import (
    EntityIndexRequest,
    EntityIndexResult,
    ForgetRequest,
    ForgetResult,
    LinkRequest,
    LinkResult,
    ListRequest,
    ListResult,
    Memory,
    RelatedRequest,
    RelatedResult,
    RememberRequest,
    RememberResult,
)
from ._semantic import Semantic, bulk_seconds
from ._wire import built

__all__ = ["SpacesManagement"]

DEFAULT_PAGE = 20
DEFAULT_RECALL = 8
DEFAULT_ENTITIES = 50
MAX_KEY_CHARACTERS = 200
MAX_LIST_PAGE = 100  # the most memories one Provider list call returns
#: the most memories an entity count reads through list() when the Provider has no index
MAX_ENTITY_LISTING = 2_000

#: how the Source ranks a recall: (parents, query, limit, input, always_explain=)
Ranker = Callable[..., Awaitable[list[tuple[Memory, dict[str, Any]]]]]


class SpacesManagement:
    """`manage()` of one Source instance."""

    def __init__(
        self,
        key: str,
        settings: SpacesSettings,
        namespaces: Namespaces,
        calls: ProviderCalls,
        semantic: Semantic,
        ranked: Ranker,
    ) -> None:
        self._key = key
        self._ranked = ranked
        self._settings = settings
        self._namespaces = namespaces
        self._calls = calls
        self._semantic = semantic
        self._limits = SpaceLimitsPlanner(settings, calls)
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
            output: Any = await self._inspect(pinned)
        elif operation == "list":
            output = await self._list(pinned, payload)
        elif operation == "records-read":
            output = await self._read_records(pinned, payload)
        elif operation == "recall":
            output = await self._recall(pinned, payload)
        elif operation == "related":
            output = await self._related(pinned, payload)
        elif operation == "entities":
            output = await self._entities(pinned, payload)
        elif operation == "reindex":
            output = await self._reindex(pinned)
        elif operation == "write-scope":
            output = self._write_scope(pinned, payload["write_scope"])
        elif operation == "maintenance-plan":
            usage, plan = await self._limits.plan(pinned)
            output = {"usage": usage, "plan": plan, "plan_digest": plan_digest(plan)}
        else:
            fresh: list[tuple[str, list[Memory]]] = []  # stored memories awaiting vectors
            async with self._lock:
                current = self._namespaces.revision(self._namespaces.required(request.scope))
                if current != request.expected_revision:
                    raise RevisionConflict(
                        f"revision conflict: the spaces are at {current}, "
                        f"not {request.expected_revision}"
                    )
                output = await self._write(operation, pinned, payload, fresh)
            # the memories are durable and found by keyword; their vectors follow within what
            # is left of this call's deadline, outside the lock (a catch-up does the rest)
            for parent, memories in fresh:
                await self._semantic.embed_soon(parent, memories, bulk_seconds())
        return ManagementResult(
            source_key=self._key, operation=operation, output=output, revision=revision
        )

    def _named(self, pinned: Sequence[PinnedSpace], name: Any) -> PinnedSpace:
        space = next((space for space in pinned if space.name == name), None)
        if space is None:
            raise SourceError("invalid_payload", "no configured space has that name")
        return space

    async def _inspect(self, pinned: Sequence[PinnedSpace]) -> dict[str, Any]:
        """The directory, with per space what recall by meaning stands on.

        How many memories still wait for vectors, and in which vector space recall searches
        them now (a previous one while the configured one is being filled).
        """
        semantic = self._semantic
        directory = await read_directory(self._calls, self._settings, pinned, semantic.active)
        if semantic.active:
            for space, entry in zip(pinned, directory["spaces"], strict=True):
                entry["waiting_for_vectors"] = await semantic.pending((space.parent,))
                serving = await semantic.serving((space.parent,))
                entry["meaning_space"] = None if serving is None else serving.key
        return directory

    def _write_scope(
        self, pinned: Sequence[PinnedSpace], asked: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Where the View holding `asked["grant"]` may write: the spaces it pins writable.

        The same authority as the `remember` action: only a grant this instance issued for
        this scope's spaces (at this revision) counts, and it names the writable spaces.

        Raises:
            SourceError: `forbidden` for any other grant (or none).
        """
        grant = asked["grant"]
        granted = pinned_from_grant(grant)
        revision = grant.get("revision") if isinstance(grant, Mapping) else None
        if granted != tuple(pinned) or revision != self._namespaces.revision(pinned):
            raise SourceError("forbidden", "the grant does not pin this scope's spaces")
        return {
            "write_scope": {
                "view_id": asked["view_id"],
                "source_key": self._key,
                "groups": [space.name for space in granted if space.writable],
            }
        }

    async def _apply_limits(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Apply the spaces' limits, if the plan is still the one `plan_digest` names.

        Raises:
            SourceError: `plan-changed` (nothing written) when the memories moved on since.
        """
        _, plan = await self._limits.plan(pinned)
        if plan_digest(plan) != payload["plan_digest"]:
            raise SourceError(
                "plan-changed", "the spaces changed since the plan was made; nothing was written"
            )
        return {"results": await self._limits.apply(pinned, plan)}

    async def _reindex(self, pinned: Sequence[PinnedSpace]) -> dict[str, Any]:
        """Give this scope's memories the vectors they lack, within this call's deadline."""
        done, remaining = await self._semantic.fill(
            [space.parent for space in pinned], bulk_seconds()
        )
        space = self._semantic.space
        assert space is not None  # fill() refuses when recall by meaning is off
        return {"space": space.key, "done": done, "remaining": remaining}

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

    async def _recall(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Recall for a person: whole memories by their ids, each saying why it ranked."""
        self._calls.require("search")
        names = payload.get("spaces")
        chosen = list(pinned) if names is None else [self._named(pinned, n) for n in names]
        spaces = {space.parent: space.name for space in pinned}
        limit = min(int(payload.get("limit", DEFAULT_RECALL)), MAX_RECALL_LIMIT)
        found = await self._ranked(
            tuple(space.parent for space in chosen),
            str(payload["query"]),
            limit,
            payload,
            always_explain=True,
        )
        results = []
        for memory, provenance in found:
            result = _record(spaces[memory.parent], memory)
            for key in ("tier", "score", "explain"):
                if key in provenance:
                    result[key] = provenance[key]
            results.append(result)
        return {"mode": str(payload.get("mode", "both")), "results": results}

    async def _related(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The memories linked to one memory of a space, most recently linked first."""
        self._calls.require("related")
        space = self._named(pinned, payload["space"])
        memory_id = memory_id_of(str(payload["id"]))
        if not is_memory_id(memory_id):
            raise SourceError("invalid_payload", "that is not a memory id")
        limit = min(int(payload.get("limit", DEFAULT_RECALL)), MAX_RECALL_LIMIT)
        result = await self._calls.call(
            "related",
            RelatedRequest(parent=space.parent, id=memory_id, limit=limit),
            RelatedResult,
        )
        related = result.related[:limit]
        check_parents((item.memory for item in related), (space.parent,))
        return {
            "space": space.name,
            "id": memory_id,
            "related": [
                {
                    **_record(space.name, item.memory),
                    "relation": item.relation,
                    "direction": item.direction,
                }
                for item in related
            ],
        }

    async def _entities(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The entities of a space's memories, most mentioned first, and whether that is all.

        From the Provider's entity index when it has one (its `complete` said as it is),
        else counted over the first memories `list()` gives: complete only when that was
        every memory of the space.

        Raises:
            SourceError: `unsupported` when the Provider can neither index nor list.
        """
        space = self._named(pinned, payload["space"])
        limit = int(payload.get("limit", DEFAULT_ENTITIES))
        prefix = str(payload.get("prefix") or "")
        if self._calls.supports("entity_index"):
            index = await self._calls.call(
                "entity_index",
                EntityIndexRequest(parent=space.parent, prefix=prefix or None, limit=limit),
                EntityIndexResult,
            )
            entities = [{"name": e.name, "memories": e.memories} for e in index.entities]
            return {
                "space": space.name,
                "entities": entities,
                "complete": index.complete,
                "counted": "index",
            }
        if not self._calls.supports("list"):
            raise SourceError("unsupported", "this Provider can neither index nor list entities")
        counts: Counter[str] = Counter()
        cursor: str | None = None
        read = 0
        while read < MAX_ENTITY_LISTING:
            page = await self._calls.call(
                "list",
                ListRequest(parent=space.parent, limit=MAX_LIST_PAGE, cursor=cursor),
                ListResult,
            )
            check_parents(page.memories, (space.parent,))
            read += len(page.memories)
            for memory in page.memories:
                counts.update(
                    {
                        name
                        for name in memory.entities
                        if name.casefold().startswith(prefix.casefold())
                    }
                )
            cursor = page.next_cursor
            if not cursor or not page.memories:
                break
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0].casefold()))
        return {
            "space": space.name,
            "entities": [{"name": name, "memories": n} for name, n in ranked[:limit]],
            "complete": not cursor,
            "counted": "listed",
        }

    async def _read_records(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One page of memories (`records-read`): space by space, each newest first.

        The cursor names the space reached and the Provider's cursor within it.
        """
        self._calls.require("list")
        group = payload.get("group")
        spaces = [space for space in pinned if group is None or space.name == group]
        first = "cursor" not in payload
        at, inner = (0, None) if first else _cursor_of(payload["cursor"], len(spaces))
        records: list[dict[str, Any]] = []
        next_cursor = None
        left = int(payload["limit"])
        while at < len(spaces) and left > 0:
            space = spaces[at]
            page = await self._calls.call(
                "list",
                ListRequest(parent=space.parent, limit=min(left, MAX_LIST_PAGE), cursor=inner),
                ListResult,
            )
            check_parents(page.memories, (space.parent,))
            memories = page.memories[:left]  # a Provider may return more than asked
            records += [_record(space.name, memory) for memory in memories]
            left -= len(memories)
            if page.next_cursor and memories:
                at, inner = at, page.next_cursor
            else:
                at, inner = at + 1, None
            next_cursor = _cursor(at, inner) if at < len(spaces) else None
        output: dict[str, Any] = {"records": records, "next_cursor": next_cursor}
        if first:
            output["groups"] = [space.name for space in pinned]
        return output

    async def _write_records(
        self,
        pinned: Sequence[PinnedSpace],
        items: Sequence[Mapping[str, Any]],
        fresh: list[tuple[str, list[Memory]]],
    ) -> dict[str, Any]:
        """Store memory records (`records-write`), a run of one space per Provider batch.

        A record naming a space this scope lacks is refused alone (`unknown-space`), as the
        import of each run refuses an invalid or oversized memory alone.
        """
        results: list[dict[str, Any]] = []
        named = {space.name: space for space in pinned}
        index = 0
        while index < len(items):
            name = items[index]["record"].get("space")
            space = named.get(name) if isinstance(name, str) else None
            if space is None:
                # the space's name is the record's: not quoted back
                results.append(
                    {
                        "index": index,
                        "completion": "refused",
                        "code": "unknown-space",
                        "message": "its space is not one of the spaces of this scope "
                        f"({', '.join(named) or 'none'})"[:500],
                    }
                )
                index += 1
                continue
            end = index
            while end < len(items) and items[end]["record"].get("space") == name:
                end += 1
            batch = [_import_item(item) for item in items[index:end]]
            done = await self._import(space, pinned, batch, fresh)
            for result in done["results"]:
                results.append({**result, "index": index + result["index"]})
            index = end
        return {"results": results}

    async def _delete_record(
        self, pinned: Sequence[PinnedSpace], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Delete one memory by its id or handle (`records-delete`), in whichever space has it."""
        self._calls.require("forget")
        memory_id = memory_id_of(str(payload["id"]))  # a handle names its memory id too
        group = payload.get("group")
        spaces = [self._named(pinned, group)] if group is not None else list(pinned)
        if is_memory_id(memory_id):
            for space in spaces:
                result = await self._calls.call(
                    "forget", ForgetRequest(parent=space.parent, id=memory_id), ForgetResult
                )
                if result.forgotten:
                    return {"id": memory_id, "deleted": True, "group": space.name}
        return {"id": str(payload["id"]), "deleted": False}

    async def _write(
        self,
        operation: str,
        pinned: Sequence[PinnedSpace],
        payload: Mapping[str, Any],
        fresh: list[tuple[str, list[Memory]]],
    ) -> Any:
        """One mutation; the memories it newly stores go into `fresh`, for their vectors."""
        if operation == "records-write":
            return await self._write_records(pinned, payload["records"], fresh)
        if operation == "maintenance-apply":
            return await self._apply_limits(pinned, payload)
        if operation == "records-delete":
            return await self._delete_record(pinned, payload)
        space = self._named(pinned, payload["space"])
        if operation == "import":
            return await self._import(space, pinned, payload["memories"], fresh)
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
            if stored.created and self._semantic.active:
                fresh.append((space.parent, [stored.memory]))
            return {
                "space": space.name,
                "id": stored.memory.id,
                "duplicate": not stored.created,
                "durable": stored.durable,
                "completion": _completion(stored.durable),
            }
        if operation == "link":
            return await self._link(space, payload)
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
            "completion": _completion(result.durable),
        }

    async def _link(self, space: PinnedSpace, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Link two memories of one space, by their ids (both must be there)."""
        self._calls.require("link")
        ends = [memory_id_of(str(payload[end])) for end in ("from", "to")]
        if not all(is_memory_id(end) for end in ends):
            raise SourceError("invalid_payload", "from, to: must be memory ids")
        relation = str(payload.get("relation", "related"))
        linked = await self._calls.call(
            "link",
            LinkRequest(
                parent=space.parent, source_id=ends[0], target_id=ends[1], relation=relation
            ),
            LinkResult,
        )
        return {
            "space": space.name,
            "from": ends[0],
            "to": ends[1],
            "relation": relation,
            "created": linked.created,
            "durable": linked.durable,
            "completion": _completion(linked.durable),
        }

    async def _import(
        self,
        space: PinnedSpace,
        pinned: Sequence[PinnedSpace],
        items: Sequence[Any],
        fresh: list[tuple[str, list[Memory]]],
    ) -> Any:
        """Store many memories in one Provider batch; one result per item, in order.

        An item that is not a valid memory is refused alone (`invalid-item`, or `too-large`
        for text over the limit) and the others are written. Every result of the batch is
        given only after the Provider's batch returned, so `committed` means the whole batch
        is durable; with a Provider that syncs less, each says `accepted`.
        """
        self._calls.require("remember")
        results: list[dict[str, Any] | None] = [None] * len(items)
        requests: list[RememberRequest] = []
        positions: list[int] = []
        checked: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
        for index, item in enumerate(items):
            try:
                request, content = _import_request(space.parent, item)
            except SourceError as exc:
                results[index] = _refused(index, exc)
                continue
            requests.append(request)
            positions.append(index)
            checked.append(content)
        # as the remember action: a key another visible space stored under is not reused
        keyed = (request.memory_id for request in requests if request.memory_id is not None)
        held = await self._calls.held_elsewhere(keyed, space, pinned)
        if held:
            kept = []
            for n, request in enumerate(requests):
                if request.memory_id in held:
                    results[positions[n]] = _refused(positions[n], _key_conflict())
                else:
                    kept.append(n)
            requests = [requests[n] for n in kept]
            positions = [positions[n] for n in kept]
            checked = [checked[n] for n in kept]
        if requests:
            # one result per request: the Provider SDK's remember_many refuses any other count
            stored = await self._calls.remember_many(requests)
            check_parents((result.memory for result in stored), (space.parent,))
            if self._semantic.active:
                fresh.append((space.parent, [r.memory for r in stored if r.created]))
            for index, content, result in zip(positions, checked, stored, strict=True):
                memory = result.memory
                if not result.created and (memory.text, memory.tags, memory.entities) != content:
                    results[index] = _refused(index, _key_conflict())
                    continue
                results[index] = {
                    "index": index,
                    "completion": "committed" if result.durable else "accepted",
                    "id": memory.id,
                    "replayed": not result.created,
                }
        done = [result for result in results if result is not None]
        return {
            "space": space.name,
            "results": done,
            "stored": sum(1 for r in done if r["completion"] != "refused" and not r["replayed"]),
            "replayed": sum(1 for r in done if r.get("replayed") is True),
            "refused": sum(1 for r in done if r["completion"] == "refused"),
        }


_ITEM_KEYS = frozenset({"text", "tags", "entities", "idempotency_key"})


def _import_request(
    parent: str, item: Any
) -> tuple[RememberRequest, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """The Provider request for one imported item, and the content a replay must match.

    Raises:
        SourceError: `too-large` or `invalid-item`, with a message naming the field.
    """
    if not isinstance(item, Mapping):
        raise SourceError("invalid-item", "a memory must be a JSON object")
    if not _ITEM_KEYS.issuperset(item):
        unknown = sorted(set(item) - _ITEM_KEYS)
        raise SourceError("invalid-item", f"{unknown[0]}: unknown key")
    text = item.get("text")
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARACTERS:
        raise SourceError("too-large", f"text: at most {MAX_TEXT_CHARACTERS} characters")
    try:
        checked_text_value = checked_text(text)
        tags = _labels(item, "tags", MAX_TAGS)
        entities = _labels(item, "entities", MAX_ENTITIES)
    except SourceError as exc:
        raise SourceError("invalid-item", str(exc)) from None
    key = item.get("idempotency_key")
    if key is not None and not (isinstance(key, str) and 1 <= len(key) <= MAX_KEY_CHARACTERS):
        raise SourceError(
            "invalid-item", f"idempotency_key: must be 1 to {MAX_KEY_CHARACTERS} characters"
        )
    request = built(
        RememberRequest,
        {
            "parent": parent,
            "text": checked_text_value,
            "tags": tags,
            "entities": entities,
            "idempotency_key": key,
            "memory_id": None if key is None else keyed_memory_id(key),
        },
    )
    return request, (checked_text_value, tags, entities)


def _labels(item: Mapping[str, Any], what: str, most: int) -> tuple[str, ...]:
    values = item.get(what, ())
    if not values and isinstance(values, list | tuple):
        return ()
    if not isinstance(values, list | tuple):
        raise SourceError("invalid_payload", f"{what}: must be a list of strings")
    if len(values) > most:
        raise SourceError("invalid_payload", f"{what}: at most {most} items")
    return checked_labels(values, what)


def _completion(durable: bool) -> str:
    """What a write's output says of it: committed once durable, else only accepted."""
    return "committed" if durable else "accepted"


def _refused(index: int, exc: SourceError) -> dict[str, Any]:
    return {"index": index, "completion": "refused", "code": exc.code, "message": str(exc)}


def _key_conflict() -> SourceError:
    return SourceError(
        "idempotency-conflict",
        "this idempotency key was already used for a different memory: nothing was written",
    )


def _record(space: str, memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "space": space,
        "text": memory.text,
        "tags": list(memory.tags),
        "entities": list(memory.entities),
        "created_at": memory.created_at,
    }


def _import_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A memory record as the batch import takes it: its content and idempotency key."""
    record = item["record"]
    return {
        "text": record.get("text"),
        "tags": record.get("tags") or [],
        "entities": record.get("entities") or [],
        "idempotency_key": item["idempotency_key"],
    }


def _cursor(space: int, inner: str | None) -> str:
    return f"{space}:{inner or ''}"


def _cursor_of(cursor: str, spaces: int) -> tuple[int, str | None]:
    """The space index and Provider cursor a `records-read` cursor names.

    Raises:
        SourceError: `invalid_payload`, a cursor this Source did not give.
    """
    head, separator, inner = cursor.partition(":")
    if not separator or not head.isdigit() or int(head) >= spaces:
        raise SourceError("invalid_payload", "cursor: not a cursor this Source gave")
    return int(head), inner or None
