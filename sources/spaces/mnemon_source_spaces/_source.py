"""The `spaces` Source runtime: facts, a pinned namespace set, live reads, scoped writes.

Every request derives the visible spaces from its own scope; a grant pins them for the
View, and reads run live inside those namespaces through the Provider (see `_calls` for
how a Provider is called, `_grants` for namespaces and handles).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import anyio

from mnemon.sdk import (
    Evidence,
    EvidenceItem,
    FactsRequest,
    Fragment,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    SourceError,
    SourceFacts,
    ViewContribution,
    create_mutation_receipt,
    truncate_text,
)

from ._calls import ProviderCalls, check_parents
from ._config import SpacesSettings
from ._evidence import directory_item, fit_texts, read_directory, tier
from ._grants import (
    HANDLE_SEPARATOR,
    Handles,
    Namespaces,
    PinnedSpace,
    grant_value,
    handle_binding,
)
from ._inputs import checked_labels, checked_text, is_memory_id, keyed_memory_id
from ._management import SpacesManagement
from ._manifest import MAX_RECALL_LIMIT, ROLE, TYPE_ID
from ._provider import (
    ForgetRequest,
    ForgetResult,
    GetRequest,
    GetResult,
    LinkRequest,
    LinkResult,
    Memory,
    ProviderStatus,
    RelatedRequest,
    RelatedResult,
    RememberRequest,
    RememberResult,
    SearchRequest,
    SearchResult,
)
from ._semantic import MEANING_OFF, MEANING_WEIGHT, FusedHit, Semantic, fuse
from ._text import query_terms

__all__ = ["SpacesSource"]

DEFAULT_RECALL_LIMIT = 8
# recall scores lie in [0, 1] (a Provider's score, or the fused one): a Strategy that ranks
# several Sources together reads the scale here instead of comparing raw numbers
SCORE_SCALE = "normalized"
#: candidates each ranking gives fusion (a Provider search returns at most 100)
MAX_CANDIDATES = 100
# namespace sets whose last facts and contributions are kept: one per turn a host admits at
# once by default (`max_concurrent_compositions`)
_GIVEN_KEPT = 1_024
# (Source capability, route or action id, the Provider capability it needs)
READS = (("recall", "recall", "search"), ("related", "related", "related"))
WRITES = (
    ("write", "remember", "remember"),
    ("link", "link", "link"),
    ("forget", "forget", "forget"),
)


_A = TypeVar("_A")
_B = TypeVar("_B")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _conflict() -> SourceError:
    return SourceError(
        "idempotency-conflict",
        "this idempotency key was already used for a different memory: nothing was written",
        kind="terminal",
        nothing_written=True,
    )


def _explained(hit: FusedHit, by_words: bool) -> dict[str, Any]:
    """A fused hit's provenance: its tier and score, and why it ranked (`explain`).

    `explain` names only what was searched: no `keywords` rank when recall was by meaning
    alone, so a null rank always means "searched, and not found that way".
    """
    why: dict[str, Any] = {"keywords": hit.keyword_rank} if by_words else {}
    why["meaning"] = hit.meaning_rank
    if hit.similarity is not None:
        why["similarity"] = round(hit.similarity, 4)
    return {
        "tier": hit.tier,
        "score": round(hit.score, 4),
        "score_scale": SCORE_SCALE,
        "explain": why,
    }


def _recall_mode(given: Mapping[str, Any]) -> tuple[str, float | None]:
    """The recall's `mode` and `meaning_weight` (None: the Source's own).

    Raises:
        SourceError: `invalid_payload` when a weight comes with a mode that fuses nothing.
    """
    mode = str(given.get("mode", "both"))
    weight = given.get("meaning_weight")
    if weight is not None and mode != "both":
        raise SourceError("invalid_payload", "meaning_weight weighs meaning in mode both only")
    return mode, None if weight is None else float(weight)


async def _together(
    first: Callable[[], Awaitable[_A]], second: Callable[[], Awaitable[_B]]
) -> tuple[_A, _B]:
    """Both awaited at once; the first to fail cancels the other and is raised as it is."""
    results: dict[int, Any] = {}
    failures: list[Exception] = []

    async def run(index: int, call: Callable[[], Awaitable[Any]]) -> None:
        try:
            results[index] = await call()
        except Exception as exc:
            failures.append(exc)
            group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, 0, first)
        group.start_soon(run, 1, second)
    if failures:
        raise failures[0]
    return results[0], results[1]


def _candidates(limit: int) -> int:
    """How many candidates each ranking gives fusion for a recall of `limit` results."""
    return min(MAX_CANDIDATES, max(2 * limit, 20))


def _keep(kept: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _GIVEN_KEPT:
        kept.popitem(last=False)


class SpacesSource:
    """One mounted `spaces` Source with its private Provider adapter."""

    def __init__(
        self,
        key: str,
        settings: SpacesSettings,
        calls: ProviderCalls,
        handles: Handles,
        semantic: Semantic,
    ) -> None:
        self._key = key
        self._settings = settings
        #: the scope ids every space needs: its `scope_keys`, which tools name to the user
        self.partition_keys = settings.scope_keys
        self._calls = calls
        self._handles = handles
        self._semantic = semantic
        self._namespaces = Namespaces(settings, calls.type_id)
        # namespace set -> the status and the facts given for it: the same frozen facts while
        # the Provider says the same, so the core need not check them again
        self._given: OrderedDict[tuple[PinnedSpace, ...], tuple[object, SourceFacts]] = (
            OrderedDict()
        )
        # (namespace set, mode, characters) -> the revision and fragments project() gives
        self._projected: OrderedDict[
            tuple[tuple[PinnedSpace, ...], str, int], tuple[str, tuple[Fragment, ...]]
        ] = OrderedDict()
        self._management = SpacesManagement(
            key, settings, self._namespaces, calls, semantic, self.ranked
        )

    def __repr__(self) -> str:
        return f"SpacesSource({self._key!r}, provider={self._calls.type_id!r})"

    # ------------------------------------------------------------------ facts and projection

    def _facts(self, availability: str, **values: Any) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role=ROLE,
            availability=availability,  # type: ignore[arg-type]
            **values,
        )

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Availability from the Provider; routes and actions from its live capabilities."""
        pinned = self._namespaces.pinned(request.scope)
        if pinned is None:
            return self._facts("unavailable", reason="missing-scope")
        status = await self._calls.status(pinned, count=False)
        given = self._given.get(pinned)
        if given is not None and (given[0] is status or given[0] == status):
            self._given.move_to_end(pinned)
            return given[1]
        facts = self._status_facts(pinned, status)
        _keep(self._given, pinned, (status, facts))
        return facts

    def _status_facts(self, pinned: tuple[PinnedSpace, ...], status: ProviderStatus) -> SourceFacts:
        # a function of the namespace set and the Provider's status only: facts() keeps it
        if status.availability == "unavailable":
            return self._facts("unavailable", reason=status.reason or "provider-unavailable")
        live = self._calls.live(status)
        capabilities = ["status", "project"]
        routes = ["inspect"]
        actions = []
        for capability, route, needed in READS:
            if needed in live:
                capabilities.append(capability)
                routes.append(route)
        if any(space.writable for space in pinned):
            for capability, action, needed in WRITES:
                if needed in live:
                    capabilities.append(capability)
                    actions.append(action)
        return self._facts(
            status.availability,
            reason=status.reason if status.availability == "degraded" else None,
            revision=self._namespaces.revision(pinned),
            capabilities=tuple(capabilities),
            route_ids=tuple(routes),
            action_ids=tuple(actions),
            hints={
                "provider": self._calls.type_id,
                "spaces": len(pinned),
                "writable_spaces": sum(space.writable for space in pinned),
            },
        )

    def _cover(self, pinned: Sequence[PinnedSpace]) -> str:
        parts = []
        for space in pinned:
            configured = self._settings.space(space.name)
            access = "writable" if space.writable else "read-only"
            described = (
                f": {configured.description}" if configured and configured.description else ""
            )
            parts.append(f"- {space.name} ({access}){described}")
        return "Long-term memory, recalled by query when it may help, in spaces:\n" + "\n".join(
            parts
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Pin this scope's namespaces in the grant; project a short cover of the spaces."""
        pinned = self._namespaces.required(request.scope)
        key = (pinned, request.mode, request.max_characters)
        known = self._projected.get(key)
        if known is None:
            revision = self._namespaces.revision(pinned)
            fragments: tuple[Fragment, ...] = ()
            text = truncate_text(self._cover(pinned), request.max_characters)
            if text:
                fragments = (Fragment(source_key=self._key, mode=request.mode, text=text),)
            known = (revision, fragments)
        _keep(self._projected, key, known)
        revision, fragments = known
        # the grant is new every time: its nonce binds the handles it mints to this View only
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(source_key=self._key, value=grant_value(revision, pinned)),
            revision=revision,
        )

    # ------------------------------------------------------------------ reads

    async def query(self, request: QueryRequest) -> Evidence:
        """Serve `inspect`, `recall` or `related` inside the pinned namespaces."""
        pinned = self._namespaces.granted(request.view.scope, request.grant)
        route = request.route.route_id
        if route == "inspect":
            directory = await read_directory(
                self._calls, self._settings, pinned, self._semantic.active
            )
            item = directory_item(directory, request.route.max_characters)
            return self._evidence(request, [item] if item else [], item is None)
        if route == "recall":
            return await self._recall(request, pinned)
        if route == "related":
            return await self._related(request, pinned)
        raise SourceError("invalid_payload", "the spaces Source has no such route")

    def _evidence(
        self, request: QueryRequest, items: Sequence[EvidenceItem], truncated: bool
    ) -> Evidence:
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(items),
            truncated=truncated,
        )

    def _item(
        self,
        binding: str,
        names: Mapping[str, str],
        memory: Memory,
        text: str,
        provenance: dict[str, Any],
    ) -> EvidenceItem:
        handle = self._handles.issue(binding, memory.parent, memory.id)
        excerpted = text != memory.text
        if excerpted:
            # the whole memory is longer than this read allows: say so, and how long it is
            provenance = {**provenance, "excerpt": {"characters": len(memory.text)}}
        return EvidenceItem(
            id=handle,
            text=text,
            provenance={
                "space": names[memory.parent],
                "memory": handle,
                "tags": list(memory.tags),
                "created_at": memory.created_at,
                **provenance,
            },
            metadata={"entities": list(memory.entities), "excerpt": excerpted},
        )

    def _limit(self, request: QueryRequest) -> int:
        wanted = int(request.input.get("limit", DEFAULT_RECALL_LIMIT))
        return min(wanted, request.route.max_results, MAX_RECALL_LIMIT)

    async def _recall(self, request: QueryRequest, pinned: Sequence[PinnedSpace]) -> Evidence:
        self._calls.require("search")
        chosen = list(pinned)
        names = request.input.get("spaces")
        if names is not None:
            by_name = {space.name: space for space in pinned}
            if any(name not in by_name for name in names):
                raise SourceError("invalid_payload", "recall names a space this View cannot see")
            chosen = [by_name[name] for name in names]
        limit = self._limit(request)
        query = str(request.input["query"])
        parents = tuple(space.parent for space in chosen)
        spaces = {space.parent: space.name for space in pinned}
        found = await self.ranked(parents, query, limit, request.input)
        return self._recalled(request, spaces, query, found)

    async def ranked(
        self,
        parents: tuple[str, ...],
        query: str,
        limit: int,
        given: Mapping[str, Any],
        *,
        always_explain: bool = False,
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """The memories of `parents` a recall finds, best first, each with its provenance.

        `given` holds the recall's `mode` and `meaning_weight`. With `always_explain`, a
        recall by words says each result's keyword rank even when recall by meaning is off
        (people read it; the model's evidence keeps it only when it tells something).

        Raises:
            SourceError: `unsupported` for recall by meaning alone while it is off, or
                `invalid_payload` for a weight with a mode that fuses nothing.
        """
        mode, weight = _recall_mode(given)
        if mode == "words" or not self._semantic.active:
            if mode == "meaning":
                # never answered by keywords instead: the caller asked for meaning alone
                raise SourceError("unsupported", MEANING_OFF)
            return await self._recall_words(parents, query, limit, always_explain)
        if mode == "meaning":
            return await self._recall_meaning(parents, query, limit)
        return await self._recall_both(
            parents, query, limit, MEANING_WEIGHT if weight is None else weight
        )

    async def _recall_words(
        self, parents: tuple[str, ...], query: str, limit: int, always_explain: bool
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """Recall by keywords alone; with recall by meaning on, `explain` says so."""
        result = await self._calls.call(
            "search", SearchRequest(parents=parents, query=query, limit=limit), SearchResult
        )
        hits = result.hits[:limit]
        check_parents((hit.memory for hit in hits), parents)
        found = []
        for rank, hit in enumerate(hits, 1):
            provenance: dict[str, Any] = {
                "tier": tier(hit.score),
                "score": hit.score,
                "score_scale": SCORE_SCALE,
            }
            if self._semantic.active or always_explain:
                provenance["explain"] = {"keywords": rank}
            found.append((hit.memory, provenance))
        return found

    async def _recall_meaning(
        self, parents: tuple[str, ...], query: str, limit: int
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """Recall by meaning alone: the vector ranking, failing rather than falling back."""
        await self._semantic.catch_up(parents)
        meaning = await self._semantic.search(parents, query, _candidates(limit), required=True)
        fused = fuse((), meaning, limit, meaning_weight=1.0)
        return [(hit.memory, _explained(hit, False)) for hit in fused]

    async def _recall_both(
        self, parents: tuple[str, ...], query: str, limit: int, weight: float
    ) -> list[tuple[Memory, dict[str, Any]]]:
        """Recall by keywords and by meaning, fused into one ranking that says why each ranked."""
        await self._semantic.catch_up(parents)
        candidates = _candidates(limit)
        keyword_search = partial(
            self._calls.call,
            "search",
            SearchRequest(parents=parents, query=query, limit=candidates),
            SearchResult,
        )
        meaning_search = partial(self._semantic.search, parents, query, candidates)
        # the query's encoding (the embedder's thread) overlaps the keyword search (the store's)
        keyword, meaning = await _together(keyword_search, meaning_search)
        check_parents((hit.memory for hit in keyword.hits), parents)
        fused = fuse(keyword.hits, meaning, limit, meaning_weight=weight)
        return [(hit.memory, _explained(hit, True)) for hit in fused]

    def _recalled(
        self,
        request: QueryRequest,
        spaces: Mapping[str, str],
        query: str,
        found: Sequence[tuple[Memory, dict[str, Any]]],
    ) -> Evidence:
        route = request.route
        texts = fit_texts(
            [memory.text for memory, _ in found],
            query_terms(query),
            route.max_characters,
            route.max_item_characters,
        )
        binding = handle_binding(request.view.id, request.grant)
        items = [
            self._item(binding, spaces, memory, text, provenance)
            for (memory, provenance), text in zip(found, texts, strict=True)
            if text is not None
        ]
        return self._evidence(request, items, len(items) < len(found))

    async def _related(self, request: QueryRequest, pinned: Sequence[PinnedSpace]) -> Evidence:
        self._calls.require("related")
        space, memory_id = await self._resolve(
            handle_binding(request.view.id, request.grant),
            str(request.input["id"]),
            pinned,
            bare_ids=True,
        )
        limit = self._limit(request)
        result = await self._calls.call(
            "related",
            RelatedRequest(parent=space.parent, id=memory_id, limit=limit),
            RelatedResult,
        )
        related = result.related[:limit]
        check_parents((item.memory for item in related), (space.parent,))
        route = request.route
        texts = fit_texts(
            [item.memory.text for item in related],
            (),
            route.max_characters,
            route.max_item_characters,
        )
        items = [
            self._item(
                handle_binding(request.view.id, request.grant),
                {space.parent: space.name},
                item.memory,
                text,
                {"relation": item.relation, "direction": item.direction},
            )
            for item, text in zip(related, texts, strict=True)
            if text is not None
        ]
        return self._evidence(request, items, len(items) < len(related))

    async def _resolve(
        self,
        binding: str,
        handle: str,
        pinned: Sequence[PinnedSpace],
        *,
        bare_ids: bool = False,
    ) -> tuple[PinnedSpace, str]:
        """The space and memory an id names: a handle minted for this View, or via `get`.

        A handle (`<memory id>~<mac>`) must verify for this View and one of its spaces. A
        bare memory id is looked up with `get` only where `bare_ids` allows it (`related`),
        and only when exactly one visible space holds it; writes need a handle.

        Raises:
            SourceError: `not_found` (a foreign, stale or tampered handle, a bare id where a
                handle is needed, or no visible memory), `forbidden` (a bare id and the
                Provider has no `get`), or `invalid_payload` (several visible spaces hold it).
        """
        if HANDLE_SEPARATOR in handle:
            verified = self._handles.verify(binding, handle, pinned)
            if verified is None:
                # another View's, another instance's or an altered handle names nothing here
                raise SourceError("not_found", "no memory of this View has this id")
            return verified
        if not bare_ids:
            raise SourceError("not_found", "use an id this View returned for this memory")
        if not self._calls.supports("get"):
            raise SourceError("forbidden", "only ids this View returned as evidence are accepted")
        memory_id = handle
        if not is_memory_id(memory_id):
            raise SourceError("not_found", "no visible memory has this id")
        holders = []
        for space in pinned:
            found = await self._calls.call(
                "get", GetRequest(parent=space.parent, id=memory_id), GetResult
            )
            if found.memory is not None:
                check_parents((found.memory,), (space.parent,))
                holders.append(space)
        if len(holders) == 1:
            return holders[0], memory_id
        if holders:
            raise SourceError(
                "invalid_payload", "several spaces hold this id: use an id recall returned"
            )
        raise SourceError("not_found", "no visible memory has this id")

    # ------------------------------------------------------------------ writes

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Run `remember`, `link` or `forget` inside this View's writable spaces."""
        pinned = self._namespaces.granted(request.view.scope, request.grant)
        action = request.offer.action_id
        if action == "remember":
            return await self._remember(request, pinned)
        if action == "link":
            return await self._link(request, pinned)
        if action == "forget":
            return await self._forget(request, pinned)
        raise SourceError("invalid_payload", "the spaces Source has no such action")

    def _writable(self, space: PinnedSpace) -> None:
        # the write scope check: a View writes only where its pinned spaces allow
        if not space.writable:
            raise SourceError("forbidden", f"space {space.name!r} is read-only for this View")

    def _receipt(
        self,
        request: MutationRequest,
        pinned: Sequence[PinnedSpace],
        detail: dict[str, Any],
        *,
        durable: bool,
        committed_at: str | None = None,
    ) -> MutationReceipt:
        # called only once the Provider returned; committed only when it says it is durable
        if not durable:
            return create_mutation_receipt(
                request,
                completion="accepted",
                revision=self._namespaces.revision(pinned),
                detail=detail,
            )
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=committed_at or _now(),
            revision=self._namespaces.revision(pinned),
            detail=detail,
        )

    async def _remember(
        self, request: MutationRequest, pinned: Sequence[PinnedSpace]
    ) -> MutationReceipt:
        self._calls.require("remember")
        payload = request.input
        name = payload.get("space", self._settings.write_space)
        if name is None:
            raise SourceError("forbidden", "no space is writable for this View")
        space = next((space for space in pinned if space.name == name), None)
        if space is None:
            raise SourceError("invalid_payload", "remember names a space that does not exist")
        self._writable(space)
        text = checked_text(payload["text"])
        tags = checked_labels(payload.get("tags", ()), "tags")
        entities = checked_labels(payload.get("entities", ()), "entities")
        given = payload.get("idempotency_key")
        if given is not None and request.idempotency_key not in (None, given):
            raise SourceError(
                "invalid_payload", "the input and the call carry different idempotency keys"
            )
        key = given or request.idempotency_key
        memory_id = None if key is None else keyed_memory_id(key)
        # a key another visible space already stored a memory under is not reused
        if memory_id is not None and await self._calls.held_elsewhere((memory_id,), space, pinned):
            raise _conflict()
        stored = await self._calls.call(
            "remember",
            RememberRequest(
                parent=space.parent,
                text=text,
                tags=tags,
                entities=entities,
                idempotency_key=key,
                memory_id=memory_id,
            ),
            RememberResult,
        )
        check_parents((stored.memory,), (space.parent,))
        memory = stored.memory
        if not stored.created and (memory.text, memory.tags, memory.entities) != (
            text,
            tags,
            entities,
        ):
            raise _conflict()
        replayed = not stored.created
        if stored.created and self._semantic.active:
            # durable and found by keyword already; its vectors follow (or a catch-up does)
            await self._semantic.embed_soon(space.parent, (memory,))
        return self._receipt(
            request,
            pinned,
            {
                "memory": self._handles.issue(
                    handle_binding(request.view.id, request.grant), space.parent, memory.id
                ),
                "space": space.name,
                "replayed": replayed,
                "duplicate": replayed,
            },
            durable=stored.durable,
            # a replay was committed when the memory it points at was
            committed_at=memory.created_at if replayed else None,
        )

    async def _link(
        self, request: MutationRequest, pinned: Sequence[PinnedSpace]
    ) -> MutationReceipt:
        self._calls.require("link")
        binding = handle_binding(request.view.id, request.grant)
        source, source_id = await self._resolve(binding, str(request.input["from"]), pinned)
        target, target_id = await self._resolve(binding, str(request.input["to"]), pinned)
        if source != target:
            raise SourceError("invalid_payload", "only memories of one space can be linked")
        self._writable(source)
        if source_id == target_id:
            raise SourceError("invalid_payload", "a memory cannot be linked to itself")
        linked = await self._calls.call(
            "link",
            LinkRequest(
                parent=source.parent,
                source_id=source_id,
                target_id=target_id,
                relation=str(request.input.get("relation", "related")),
            ),
            LinkResult,
        )
        return self._receipt(
            request,
            pinned,
            {
                "space": source.name,
                "from": request.input["from"],
                "to": request.input["to"],
                "created": linked.created,
            },
            durable=linked.durable,
        )

    async def _forget(
        self, request: MutationRequest, pinned: Sequence[PinnedSpace]
    ) -> MutationReceipt:
        self._calls.require("forget")
        space, memory_id = await self._resolve(
            handle_binding(request.view.id, request.grant), str(request.input["id"]), pinned
        )
        self._writable(space)
        result = await self._calls.call(
            "forget", ForgetRequest(parent=space.parent, id=memory_id), ForgetResult
        )
        return self._receipt(
            request,
            pinned,
            {"space": space.name, "memory": request.input["id"], "forgotten": result.forgotten},
            durable=result.durable,
        )

    # ------------------------------------------------------------------ management, lifetime

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """Inspect, list, remember or forget for a person, inside the request's scope."""
        return await self._management.manage(request)

    async def dispose(self) -> None:
        """Dispose the Provider adapter (once)."""
        await self._calls.dispose()
