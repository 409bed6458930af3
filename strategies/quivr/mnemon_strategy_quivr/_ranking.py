"""The `quivr-ranking` turn policy: a Quivr retrieval plugin ranks `recall` and `search`.

Round by round the plugin asks for candidates and the policy serves each request by reading
the same route: `bm25` by words, and on a route that can be asked how to search (see
`_spaces`), `near_vector` by meaning and `hybrid` by both, in the host's vector space. The
plugin's final ranking, checked by the rule engine, becomes the route's evidence. The user's
own read happens first and is never lost: when the plugin is unavailable, answers invalid
output, asks for what the route cannot serve or overruns, the Source's own order is returned
with a coded diagnostic in the evidence's `output`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio
from mnemon_remote import AnswerTooLarge

from mnemon.sdk import Evidence, EvidenceItem, PolicyRequest, RouteError, RouteReader, View

from ._link import PluginLink
from ._plugin import PluginRefused, PluginUnavailable, QuivrPlugin, judge_round
from ._rules import RetrievalLimits, RetrievalProfile, RetrievalSession
from ._spaces import offered_spaces, query_mode, searches_by_meaning

__all__ = ["QuivrRanker", "QuivrRankingTurn", "candidate_from_item"]

MAX_LIMIT = 50  # a Quivr search's `limit` is 1 to 50
_log = logging.getLogger("mnemon.quivr")
#: the inputs by which a route by meaning is told how to search
_HOW_INPUTS = ("mode", "meaning_weight")
#: how one read searched: those inputs, sorted (empty: the route read as it is)
_How: TypeAlias = tuple[tuple[str, Any], ...]
#: one read: its query text and how it searched
_ReadKey: TypeAlias = tuple[str, _How]


def _how_of(value: Mapping[str, Any]) -> _How:
    """How a read with this input searches, as a key of the reads already made."""
    return tuple(sorted((key, value[key]) for key in _HOW_INPUTS if key in value))


class _Fallback(Exception):
    """Stop the search and return the Source's own order with this diagnostic.

    `detail` adds short codes to the diagnostic (what could not be served, the failed read's
    own code), never text of the plugin's.
    """

    def __init__(
        self,
        code: str,
        message: str,
        rules: Iterable[str] = (),
        detail: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(code)
        self.code = code
        self.message = message
        self.rules = tuple(sorted(rules))
        self.detail = dict(detail or {})


def _unsupported(reason: str) -> _Fallback:
    """A valid request the route cannot serve as asked: answering another would mislead."""
    return _Fallback(
        "unsupported_candidate_request",
        "the ranker asked for candidates the route cannot serve as asked",
        detail={"reason": reason},
    )


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def candidate_from_item(item: EvidenceItem, rank: int, primitive: str = "bm25") -> dict[str, Any]:
    """A served Quivr candidate made from one evidence item (rank starts at 1).

    `segment_id` is the item id, `record_id` the stored body it comes from (the memory or
    document in its provenance), offsets are code points of the item's text, and `score` is
    the Source's own score when it gives one, else `1 / rank`. A `near_vector` candidate's
    score is the similarity the item's `explain` gives when it gives one, the protocol's
    "1 minus the distance" under cosine.
    """
    provenance = item.provenance
    record = provenance.get("memory") or provenance.get("document") or item.id
    version = provenance.get("revision") or provenance.get("created_at") or "1"
    explain = provenance.get("explain")
    score = None
    if primitive == "near_vector" and isinstance(explain, Mapping):
        score = _number(explain.get("similarity"))
    if score is None:
        score = _number(provenance.get("score"))
    if score is None:
        score = 1 / rank
    return {
        "segment_id": item.id,
        "record_id": str(record)[:200],
        "version_id": str(version)[:200],
        "part_key": "body",
        "text": item.text,
        "start": 0,
        "end": len(item.text),
        "score": score,
    }


def _namespace(item: EvidenceItem) -> str | None:
    space = item.provenance.get("space")
    return space if isinstance(space, str) else None


@dataclass
class QuivrRanker:
    """One hosted retrieval plugin and how it ranks, shared by the turns of one entry.

    Args:
        link: the plugin (an endpoint, or launched on first use), shared with its other
            Contributions.
        profile: the profile searches run under.
        routes: the route ids (`recall`, `search`) the plugin ranks.
    """

    link: PluginLink
    profile: RetrievalProfile
    routes: frozenset[str]

    def __post_init__(self) -> None:
        self.report = self.link.report
        manifest = self.report.manifest or {}
        self.plugin_id = self.link.plugin_id
        self.limits = RetrievalLimits.from_manifest(manifest["contributions"]["retrieval"])
        self._searches = 0

    async def plugin(self) -> QuivrPlugin:
        """The plugin's client; a launched plugin is started on first use.

        Raises:
            PluginUnavailable: when the plugin cannot be launched.
        """
        return await self.link.plugin()

    @property
    def serving_endpoint(self) -> str | None:
        """The base URL in use: the endpoint, or the launched plugin's; None before first use."""
        return self.link.serving_endpoint

    def next_search(self) -> int:
        """A number for the next search, for its invocation ids."""
        self._searches += 1
        return self._searches

    async def aclose(self) -> None:
        """Close connections and stop a launched plugin with every process it started."""
        await self.link.aclose()

    def create_turn(self, view: View) -> QuivrRankingTurn:
        """The read policy of one turn."""
        return QuivrRankingTurn(self, view)


class QuivrRankingTurn:
    """One turn's policy: ranked `recall`/`search`, every other route read as asked."""

    def __init__(self, ranker: QuivrRanker, view: View) -> None:
        self._ranker = ranker
        self._view = view

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        """Rank one `recall` or `search` read through the plugin; pass other reads through."""
        query = request.input.get("query")
        if request.route.route_id not in self._ranker.routes or not isinstance(query, str):
            return await read()
        # the user's own read first: whatever the plugin does, these results are kept
        own = await read()
        search = _Search(self._ranker, request, read, own, query)
        try:
            return await search.run()
        except _Fallback as fallback:
            _log.info(
                "quivr ranker %s: the Source's own order is used (%s)",
                self._ranker.plugin_id,
                fallback.code,
            )
            diagnostic: dict[str, Any] = {
                "code": fallback.code,
                "message": fallback.message,
                **fallback.detail,
            }
            if fallback.rules:
                diagnostic["rules"] = list(fallback.rules)
            output: dict[str, Any] = {"status": "fallback", "ranker": self._ranker.plugin_id}
            if isinstance(fallback, _Refused):
                # the plugin's decision: no ranking for this search, the Source's order stays
                output = {**output, "status": "refused", "plugin_code": fallback.plugin_code}
            return own.model_copy(update={"output": {**output, "diagnostic": diagnostic}})


class _Search:
    """One search: rounds, serving, checking; raises `_Fallback` on any plugin failure."""

    def __init__(
        self,
        ranker: QuivrRanker,
        request: PolicyRequest,
        read: RouteReader,
        own: Evidence,
        query: str,
    ) -> None:
        self.ranker = ranker
        self.request = request
        self.read = read
        self.query = query
        wanted = request.input.get("limit")
        limit = wanted if isinstance(wanted, int) else request.route.max_results
        self.by_meaning = searches_by_meaning(request.route)
        spaces = (
            offered_spaces(request.vector_spaces, ranker.report.manifest or {})
            if self.by_meaning
            else []
        )
        self.session = RetrievalSession(
            profile=ranker.profile,
            limits=ranker.limits,
            spaces=spaces,
            scope={"corpus_ids": [request.route.source_key]},
            limit=max(1, min(MAX_LIMIT, limit)),
        )
        self.items: dict[str, EvidenceItem] = {}
        # each read (its text and how it searched) with the most results it asked for: a
        # larger k reads again
        own_how = _how_of(request.input) if self.by_meaning else ()
        self.reads: dict[_ReadKey, tuple[Evidence, int]] = {
            (query, own_how): (own, self.session.limit)
        }
        self.number = ranker.next_search()

    async def run(self) -> Evidence:
        try:
            plugin = await self.ranker.plugin()
        except PluginUnavailable:
            raise _Fallback("retrieval_plugin_unavailable", "the ranker could not start") from None
        seconds = self.ranker.profile.max_latency_ms / 1000
        with anyio.move_on_after(seconds) as deadline:
            return await self._rounds(plugin)
        assert deadline.cancelled_caught
        raise _Fallback("search_deadline_exceeded", "the ranker overran the profile's latency")

    async def _rounds(self, plugin: QuivrPlugin) -> Evidence:
        session = self.session
        while True:
            body = session.request_body(
                invocation_id=f"mnemon-{self.request.view.id[5:21]}-{self.number}-{session.round}",
                organization_id="mnemon",
                query_text=self.query,
                mode=query_mode(self.request.input, self.by_meaning),
            )
            raw = await self._call(plugin, body)
            codes, answer = await judge_round(raw, session)
            if codes:
                raise _Fallback(
                    "retrieval_plugin_invalid", "the ranker's answer broke a rule", codes
                )
            session.spend(answer)
            if "ranking" in answer:
                return self._ranked(answer["ranking"]["hits"])
            for index, wanted in enumerate(answer["requests"]):
                session.serve(index, wanted, await self._serve(wanted))
            session.next_round()

    async def _call(self, plugin: QuivrPlugin, body: dict[str, Any]) -> bytes:
        try:
            return await plugin.search(
                body, max_response_bytes=self.session.limits.max_response_bytes
            )
        except AnswerTooLarge:
            raise _Fallback(
                "retrieval_plugin_invalid",
                "the ranker's answer broke a rule",
                ["response_too_large"],
            ) from None
        except PluginRefused as refused:
            if refused.retryable:
                raise _Fallback(
                    "retrieval_plugin_unavailable", "the ranker asked to retry later"
                ) from None
            raise _Refused(refused.code) from None
        except PluginUnavailable:
            raise _Fallback("retrieval_plugin_unavailable", "the ranker is unavailable") from None

    def _how(self, wanted: Mapping[str, Any]) -> _How:
        """The route input that serves `wanted` as it asks (empty: read the route as it is).

        The rule engine has admitted the request: a space is named only when one was
        offered, so only on a route by meaning, and no `profile` request gets this far.

        Raises:
            _Fallback: `unsupported_candidate_request` for a query vector (a route reads
                text) or rank fusion (the convention's fusion is by relative score).
        """
        if not self.by_meaning:
            return ()
        primitive = wanted["primitive"]
        if primitive == "near_vector":
            if "vector" in wanted:
                raise _unsupported("vector_query")
            return (("mode", "meaning"),)
        if primitive == "hybrid":
            if wanted.get("fusion", "relative_score") != "relative_score":
                raise _unsupported("ranked_fusion")
            return (("meaning_weight", float(wanted.get("alpha", 0.5))), ("mode", "both"))
        return (("mode", "words"),)

    async def _serve(self, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
        how = self._how(wanted)
        text = str(wanted["query_text"])
        k = int(wanted["k"])
        evidence, asked = self.reads.get((text, how), (None, 0))
        if evidence is None or k > asked:
            evidence = await self._read(text, k, how)
            self.reads[text, how] = (evidence, k)
        items = list(evidence.items)
        namespaces = (wanted.get("filter") or {}).get("source_namespaces")
        if namespaces is not None:
            items = [item for item in items if _namespace(item) in namespaces]
        candidates = []
        records: set[str] = set()
        for rank, item in enumerate(items, start=1):
            candidate = candidate_from_item(item, rank, wanted["primitive"])
            if wanted.get("group_by") == "record":
                if candidate["record_id"] in records:
                    continue
                records.add(candidate["record_id"])
            self.items.setdefault(item.id, item)
            candidates.append(candidate)
            if len(candidates) == k:
                break
        return candidates

    async def _read(self, text: str, k: int, how: _How) -> Evidence:
        route = self.request.route
        value = {**self.request.input, "query": text}
        if self.by_meaning:
            # the plugin's primitive decides how the route searches, not the user's input
            value = {key: v for key, v in value.items() if key not in _HOW_INPUTS}
            value.update(how)
        properties = route.input_schema.get("properties") or {}
        if "limit" in properties:
            value["limit"] = min(k, int(properties["limit"].get("maximum", k)))
        try:
            return await self.read(input=value, limits={"max_results": min(k, route.max_results)})
        except RouteError as error:
            if error.code == "call-budget-exhausted":
                raise _Fallback(
                    "search_call_budget_exhausted", "the route's max_calls ran out mid-search"
                ) from None
            # the read's own code (`unsupported`: this Source cannot search by meaning now)
            raise _Fallback(
                "search_read_failed", "serving candidates failed", detail={"read_code": error.code}
            ) from None

    def _ranked(self, hits: Sequence[Mapping[str, Any]]) -> Evidence:
        items = []
        for hit in hits:
            item = self.items[hit["segment_id"]]
            metadata = {**item.metadata, "ranker_score": hit["score"]}
            items.append(item.model_copy(update={"metadata": metadata}))
        route = self.request.route
        return Evidence(
            view_id=self.request.view.id,
            route_id=route.id,
            source_key=route.source_key,
            items=tuple(items),
            output={
                "status": "ranked",
                "ranker": self.ranker.plugin_id,
                "profile": self.ranker.profile.name,
                "rounds": self.session.round,
            },
        )


class _Refused(_Fallback):
    """A terminal error envelope: the plugin's decision not to rank this search."""

    def __init__(self, plugin_code: str) -> None:
        super().__init__("unsupported_search", "the ranker does not support this search")
        self.plugin_code = plugin_code
