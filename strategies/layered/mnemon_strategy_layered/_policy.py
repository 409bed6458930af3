"""The layered turn policy: one documents search, a two-attempt recall envelope, related.

When several long-term memory Sources serve, one recall reads them all and fuses their
results by rank (their scores are on different scales and are never compared).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import orjson

from mnemon.sdk import (
    Evidence,
    EvidenceItem,
    PolicyRequest,
    RouteError,
    RouteReader,
    View,
    ViewRoute,
)

WORKING = "working-context"
NARRATIVE = "narrative"
EVIDENCE = "durable-evidence"
# a long-term memory Source's read by query: its `recall` route, else its `search`
RECALL_ROUTES = ("recall", "search")
SEARCH = {"max_results": 4, "max_characters": 6_000}
RECALL_ATTEMPTS = 2
# the first recall reads up to 8 results: the result count is a ceiling against noise, the
# characters are the budget (recall@k flattens by k = 6 to 8 where measured, and 8 of a
# typical memory's ~100 characters take under a quarter of the 3,600)
RECALL_FIRST = {"max_results": 8, "max_characters": 3_600}
RECALL_RESULTS = 12
RECALL_ITEM_CHARACTERS = 1_200
RECALL_CHARACTERS = 4_800
# reciprocal-rank fusion's constant: a result ranked r by one Source adds 1 / (60 + r)
FUSION_K = 60
_PUNCTUATION = re.compile(r"[\W_]+")


def normalized_query(text: object) -> str:
    """A query as the envelope compares it: case and punctuation ignored."""
    return _PUNCTUATION.sub(" ", str(text).casefold()).strip()


def recall_route(route_ids: Iterable[str]) -> str | None:
    """The route a long-term memory Source is recalled through: `recall`, else `search`."""
    offered = set(route_ids)
    return next((route for route in RECALL_ROUTES if route in offered), None)


def _text_key(text: str) -> str:
    """Two memories are the same when their texts match ignoring case and punctuation."""
    normalized = normalized_query(text) or text
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def not_run(request: PolicyRequest, reason: str) -> Evidence:
    """A result for a read the policy refused: no Source call, no items."""
    return Evidence(
        view_id=request.view.id,
        route_id=request.route.id,
        source_key=request.route.source_key,
        output={"status": "not-run", "reason": reason},
    )


def _within(route: ViewRoute, limits: dict[str, int]) -> dict[str, int]:
    # a policy may only narrow: never ask for more than the route allows
    return {name: min(value, getattr(route, name)) for name, value in limits.items()}


def fuse(answers: Sequence[tuple[str, Sequence[EvidenceItem]]]) -> list[EvidenceItem]:
    """One ranking of several Sources' results: reciprocal-rank fusion, deduplicated.

    `answers` are (Source key, items best first), in the group's order. A result scores
    the sum of 1 / (60 + its rank) over the Sources that returned it; results whose texts
    match ignoring case and punctuation are one result. Ties go to the better single rank,
    then the earlier Source, then the id. Each result keeps the text and provenance of its
    best-ranked copy, plus `source_key` (where that copy came from), `sources` (every Source
    that returned it: key, id, rank, and its own score with that score's `score_scale`) and
    `fusion` (`reciprocal-rank`, `k`, the fused score).
    """
    found: dict[str, dict[str, Any]] = {}
    for position, (source_key, items) in enumerate(answers):
        for rank, item in enumerate(items, 1):
            key = _text_key(item.text)
            entry = found.setdefault(key, {"best": None, "ranks": {}, "sources": []})
            if source_key in entry["ranks"]:
                continue  # a Source's own duplicate counts once, at its better rank
            entry["ranks"][source_key] = rank
            scale = item.provenance.get("score_scale")
            contributor: dict[str, Any] = {"source_key": source_key, "id": item.id, "rank": rank}
            score = item.provenance.get("score")
            if isinstance(score, int | float) and not isinstance(score, bool):
                contributor["score"] = score
            contributor["score_scale"] = scale if isinstance(scale, str) else "unstated"
            entry["sources"].append(contributor)
            if entry["best"] is None or (rank, position) < entry["best"][:2]:
                entry["best"] = (rank, position, source_key, item)
    ranked = []
    for entry in found.values():
        # summed smallest first: equal sets of ranks give bit-equal scores, so ties are exact
        score = sum(1 / (FUSION_K + rank) for rank in sorted(entry["ranks"].values()))
        rank, position, source_key, item = entry["best"]
        ranked.append(((-score, rank, position, item.id), score, source_key, item, entry))
    ranked.sort(key=lambda row: row[0])
    return [
        EvidenceItem(
            id=item.id,
            text=item.text,
            provenance={
                **item.provenance,
                "source_key": source_key,
                "sources": entry["sources"],
                "fusion": {"method": "reciprocal-rank", "k": FUSION_K, "score": round(score, 6)},
            },
            metadata=item.metadata,
        )
        for _, score, source_key, item, entry in ranked
    ]


class LayeredTurn:
    """One turn's read policy; made by `create_turn(view)` once per turn."""

    def __init__(self, view: View) -> None:
        # taken without a checkpoint when free: the route read inside is the cancellation point
        self._lock = anyio.Lock(fast_acquire=True)
        self._roles = {item.source_key: item.role for item in view.consistency}
        # the other long-term memory Sources one recall reads (pinned for this policy alone)
        self._siblings = tuple(
            route
            for route in view.policy_routes
            if self._roles.get(route.source_key) == EVIDENCE and route.route_id in RECALL_ROUTES
        )
        self._searched: set[str] = set()
        self._recalls: dict[str, Evidence] = {}
        self._recall_digests: set[str] = set()
        self._recall_ids: set[tuple[str, str]] = set()
        self._recall_results = 0
        self._recall_characters = 0
        self._related: dict[bytes, Evidence] = {}

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        """Apply the layered rules to one route read."""
        async with self._lock:  # concurrent reads of one turn see one consistent envelope
            route = request.route.route_id
            role = self._roles.get(request.route.source_key)
            # a View that names no role (an older host's) is read by route id alone
            recalled = route == "recall" if role is None else role == EVIDENCE
            if recalled and route in RECALL_ROUTES:
                return await self._recall(request, read)
            if route == "search":
                return await self._search(request, read)
            if route == "related":
                return await self._related_to(request, read)
            return await read()

    async def _search(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        if request.route.id in self._searched:
            return not_run(request, "documents were already searched this turn")
        self._searched.add(request.route.id)
        return await read(limits=_within(request.route, SEARCH))

    async def _recall(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        query = normalized_query(request.input.get("query", ""))
        if query in self._recalls:
            replayed = self._recalls[query]
            return replayed.model_copy(update={"output": {"status": "replayed"}})
        if len(self._recalls) >= RECALL_ATTEMPTS:
            return not_run(request, f"recall allows {RECALL_ATTEMPTS} attempts per turn")
        results = RECALL_RESULTS - self._recall_results
        characters = RECALL_CHARACTERS - self._recall_characters
        if results <= 0 or characters <= 0:
            return not_run(request, "this turn's recall envelope is spent")
        if not self._recalls:
            limits = dict(RECALL_FIRST)
        else:
            limits = {"max_results": results, "max_characters": characters}
        # the Source excerpts a long memory within this ceiling instead of losing it
        limits["max_item_characters"] = RECALL_ITEM_CHARACTERS
        limits = _within(request.route, limits)
        if self._siblings:
            evidence = await self._fused(request, read, limits)
        else:
            evidence = await read(limits=limits)
        admitted: list[EvidenceItem] = []
        used = 0
        for item in evidence.items:
            digest = _text_key(item.text)
            if digest in self._recall_digests:
                continue
            size = len(item.text)
            if len(admitted) >= limits["max_results"] or used + size > limits["max_characters"]:
                continue  # several Sources together may find more than this attempt holds
            self._recall_digests.add(digest)
            admitted.append(item)
            used += size
        dropped = len(admitted) != len(evidence.items)
        admitted_evidence = evidence.model_copy(
            update={"items": tuple(admitted), "truncated": evidence.truncated or dropped}
        )
        self._recalls[query] = admitted_evidence
        self._recall_results += len(admitted)
        self._recall_characters += used
        for item in admitted:
            if self._siblings:
                self._recall_ids.update(_copies(item))
            else:
                self._recall_ids.add((request.route.source_key, item.id))
        return admitted_evidence

    async def _fused(
        self, request: PolicyRequest, read: RouteReader, limits: dict[str, int]
    ) -> Evidence:
        """Recall from the front route and every sibling at once, fused; a failure is noted."""
        members: list[tuple[ViewRoute, RouteReader]] = [(request.route, read)]
        members += [(route, read.sibling(route.id)) for route in self._siblings]
        # siblings get the query alone: the other inputs are the front route's own schema
        question = {"query": str(request.input.get("query", ""))}
        answers: list[Evidence | RouteError | None] = [None] * len(members)

        async def recall_one(index: int, route: ViewRoute, reader: RouteReader) -> None:
            try:
                answers[index] = await reader(
                    None if index == 0 else question, limits=_within(route, limits)
                )
            except RouteError as error:  # one Source's outage costs only its results
                answers[index] = error

        async with anyio.create_task_group() as group:
            for index, (route, reader) in enumerate(members):
                group.start_soon(recall_one, index, route, reader)
        answered = [
            (route.source_key, answer)
            for (route, _), answer in zip(members, answers, strict=True)
            if isinstance(answer, Evidence)
        ]
        failed = [
            (route.source_key, answer)
            for (route, _), answer in zip(members, answers, strict=True)
            if isinstance(answer, RouteError)
        ]
        if not answered:
            raise failed[0][1]
        output: dict[str, Any] = {"status": "fused", "sources": [key for key, _ in answered]}
        if failed:
            output["failed"] = [{"source_key": key, "code": error.code} for key, error in failed]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=request.route.source_key,
            items=tuple(fuse([(key, answer.items) for key, answer in answered])),
            truncated=any(answer.truncated for _, answer in answered),
            output=output,
        )

    async def _related_to(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        key = orjson.dumps(request.input, option=orjson.OPT_SORT_KEYS)
        if key in self._related:
            return self._related[key].model_copy(update={"output": {"status": "replayed"}})
        wanted = _memory_id(request.input)
        if (request.route.source_key, wanted) not in self._recall_ids:
            return not_run(request, "related accepts only ids this turn's recall returned")
        evidence = await read()
        self._related[key] = evidence
        return evidence


def _copies(item: EvidenceItem) -> list[tuple[str, str]]:
    """(Source, id) of every copy of a fused result: each Source's own id for it."""
    return [(str(entry["source_key"]), str(entry["id"])) for entry in item.provenance["sources"]]


def _memory_id(payload: Any) -> str | None:
    for name in ("id", "memory_id"):
        value = payload.get(name)
        if isinstance(value, str):
            return value
    return None


def create_turn(view: View) -> LayeredTurn:
    """Make the policy for one turn (never shared with another turn)."""
    return LayeredTurn(view)
