"""The layered turn policy: one documents search, a two-attempt recall envelope, related."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import anyio
import orjson

from mnemon import Evidence, EvidenceItem, PolicyRequest, RouteReader, View

SEARCH = {"max_results": 4, "max_characters": 6_000}
RECALL_ATTEMPTS = 2
# the first recall reads up to 8 results: the result count is a ceiling against noise, the
# characters are the budget (recall@k flattens by k = 6 to 8 where measured, and 8 of a
# typical memory's ~100 characters take under a quarter of the 3,600)
RECALL_FIRST = {"max_results": 8, "max_characters": 3_600}
RECALL_RESULTS = 12
RECALL_ITEM_CHARACTERS = 1_200
RECALL_CHARACTERS = 4_800
_PUNCTUATION = re.compile(r"[\W_]+")


def normalized_query(text: object) -> str:
    """A query as the envelope compares it: case and punctuation ignored."""
    return _PUNCTUATION.sub(" ", str(text).casefold()).strip()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def not_run(request: PolicyRequest, reason: str) -> Evidence:
    """A result for a read the policy refused: no Source call, no items."""
    return Evidence(
        view_id=request.view.id,
        route_id=request.route.id,
        source_key=request.route.source_key,
        output={"status": "not-run", "reason": reason},
    )


def _within(request: PolicyRequest, limits: dict[str, int]) -> dict[str, int]:
    # a policy may only narrow: never ask for more than the route allows
    route = request.route
    return {name: min(value, getattr(route, name)) for name, value in limits.items()}


class LayeredTurn:
    """One turn's read policy; made by `create_turn(view)` once per turn."""

    def __init__(self, view: View) -> None:
        # taken without a checkpoint when free: the route read inside is the cancellation point
        self._lock = anyio.Lock(fast_acquire=True)
        self._searched = False
        self._recalls: dict[str, Evidence] = {}
        self._recall_digests: set[str] = set()
        self._recall_ids: set[str] = set()
        self._recall_results = 0
        self._recall_characters = 0
        self._related: dict[bytes, Evidence] = {}

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        """Apply the layered rules to one route read."""
        async with self._lock:  # concurrent reads of one turn see one consistent envelope
            route = request.route.route_id
            if route == "search":
                return await self._search(request, read)
            if route == "recall":
                return await self._recall(request, read)
            if route == "related":
                return await self._related_to(request, read)
            return await read()

    async def _search(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        if self._searched:
            return not_run(request, "documents were already searched this turn")
        self._searched = True
        return await read(limits=_within(request, SEARCH))

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
        evidence = await read(limits=_within(request, limits))
        admitted: list[EvidenceItem] = []
        for item in evidence.items:
            digest = _digest(item.text)
            if digest in self._recall_digests:
                continue
            self._recall_digests.add(digest)
            admitted.append(item)
        dropped = len(admitted) != len(evidence.items)
        admitted_evidence = evidence.model_copy(
            update={"items": tuple(admitted), "truncated": evidence.truncated or dropped}
        )
        self._recalls[query] = admitted_evidence
        self._recall_results += len(admitted)
        self._recall_characters += sum(len(item.text) for item in admitted)
        self._recall_ids.update(item.id for item in admitted)
        return admitted_evidence

    async def _related_to(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        key = orjson.dumps(request.input, option=orjson.OPT_SORT_KEYS)
        if key in self._related:
            return self._related[key].model_copy(update={"output": {"status": "replayed"}})
        wanted = _memory_id(request.input)
        if wanted not in self._recall_ids:
            return not_run(request, "related accepts only ids this turn's recall returned")
        evidence = await read()
        self._related[key] = evidence
        return evidence


def _memory_id(payload: Any) -> str | None:
    for name in ("id", "memory_id"):
        value = payload.get(name)
        if isinstance(value, str):
            return value
    return None


def create_turn(view: View) -> LayeredTurn:
    """Make the policy for one turn (never shared with another turn)."""
    return LayeredTurn(view)
