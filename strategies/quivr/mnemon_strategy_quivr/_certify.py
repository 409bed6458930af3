"""The `invoke` check of Quivr-compat certification: a retrieval fixture driven offline.

A contract runner (`mnemon plugin test`) calls `invoke_fixture` once per fixture and profile:
the rounds run against the plugin, candidates are served from the fixture's catalogue the way
Quivr's runner serves them, and every answer passes through the rule engine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from mnemon_remote import AnswerTooLarge

from ._manifest import ManifestReport
from ._plugin import SEARCH, PluginRefused, PluginUnavailable, QuivrPlugin, judge_round
from ._rules import (
    RetrievalLimits,
    RetrievalProfile,
    RetrievalSession,
    declared_dependencies,
)

__all__ = [
    "FIXTURE_SPACE",
    "FixtureIssue",
    "FixtureOutcome",
    "fixture_request",
    "fixture_session",
    "invoke_fixture",
    "serve_fixture",
]

FIXTURE_SPACE = "fixture.served@1"
FIXTURE_DIMENSIONS = 8
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class FixtureIssue:
    """One failed expectation: a rule code or a certification code, and what it means.

    `path` is a JSON Pointer into the answer or the manifest, or the protocol route.
    """

    code: str
    message: str
    path: str = ""


@dataclass
class FixtureOutcome:
    """One fixture under one profile: the ranking and every issue (none means it passed)."""

    profile: str
    ranking: list[str] = field(default_factory=list)
    hits: list[dict[str, Any]] = field(default_factory=list)
    issues: list[FixtureIssue] = field(default_factory=list)
    rounds: int = 0

    @property
    def passed(self) -> bool:
        """Whether the plugin met every expectation."""
        return not self.issues


def _words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def _space(space_id: str, size: int) -> dict[str, Any]:
    return {
        "id": space_id,
        "owner": {"kind": "engine"},
        "model": "fixture",
        "dimensions": FIXTURE_DIMENSIONS,
        "metric": "cosine",
        "indexes": ["text"],
        "query_modalities": ["text"],
        "role": "served",
        "coverage": {"segments": size, "total": size},
    }


def serve_fixture(retrieval: Mapping[str, Any], request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The candidates a fixture's catalogue serves for one (valid) candidate request.

    The fixture's `order[primitive]` if given, else the segments sharing words with the query
    (most shared first, ties in catalogue order); then the filter, `group_by` and `k`.
    """
    catalogue: Sequence[Mapping[str, Any]] = retrieval["candidates"]
    primitive = request["primitive"]
    order = (retrieval.get("order") or {}).get(primitive)
    if order is not None:
        by_id = {c["segment_id"]: c for c in catalogue}
        ranked = [(by_id[s], 1.0 / rank) for rank, s in enumerate(order, 1) if s in by_id]
    else:
        query = _words(str(request.get("query_text") or retrieval["query"]))
        shared = [(len(query & _words(c["text"])), i, c) for i, c in enumerate(catalogue)]
        ranked = [(c, float(n)) for n, _, c in sorted(shared, key=lambda t: (-t[0], t[1])) if n]
    namespaces = (request.get("filter") or {}).get("source_namespaces")
    if namespaces is not None:
        ranked = [(c, s) for c, s in ranked if c.get("source_namespace") in namespaces]
    if request.get("group_by") == "record":
        seen: set[str] = set()
        kept = []
        for candidate, score in ranked:
            if candidate["record_id"] not in seen:
                seen.add(candidate["record_id"])
                kept.append((candidate, score))
        ranked = kept
    k = request["profile"]["limit"] if primitive == "profile" else request["k"]
    return [
        {
            "segment_id": c["segment_id"],
            "record_id": c["record_id"],
            "version_id": f"{c['record_id']}@1",
            "part_key": "body",
            "text": c["text"],
            "start": 0,
            "end": len(c["text"]),
            "score": score,
        }
        for c, score in ranked[:k]
    ]


def fixture_session(
    report: ManifestReport, fixture: Mapping[str, Any], profile: str
) -> RetrievalSession:
    """The search a retrieval fixture describes, under one declared profile, at round 1.

    The scope is the corpus `fixture` (with the catalogue's namespaces); the spaces offered are
    the fixture's, `fixture.served@1` by default, each of 8 dimensions.
    """
    manifest = report.manifest or {}
    contribution = manifest["contributions"]["retrieval"]
    declared = contribution["profiles"][profile]
    retrieval = fixture["retrieval"]
    catalogue = retrieval["candidates"]
    namespaces = sorted({c["source_namespace"] for c in catalogue if "source_namespace" in c})
    scope: dict[str, Any] = {"corpus_ids": ["fixture"]}
    if namespaces:
        scope["source_namespaces"] = namespaces
    return RetrievalSession(
        profile=RetrievalProfile(profile, declared["max_latency_ms"], declared["max_cost_cents"]),
        limits=RetrievalLimits.from_manifest(contribution),
        spaces=[_space(s, len(catalogue)) for s in retrieval.get("spaces", [FIXTURE_SPACE])],
        scope=scope,
        limit=retrieval.get("limit", 10),
        dependencies=declared_dependencies(manifest),
    )


def fixture_request(
    session: RetrievalSession, fixture: Mapping[str, Any], suffix: str = ""
) -> dict[str, Any]:
    """The request of the session's current round, with the fixture's query and configuration."""
    retrieval = fixture["retrieval"]
    return session.request_body(
        invocation_id=f"fixture-{session.profile.name}{suffix}-{session.round}",
        organization_id="fixture",
        query_text=retrieval["query"],
        mode=retrieval.get("mode", "hybrid"),
        configuration=retrieval.get("configuration"),
    )


async def invoke_fixture(
    plugin: QuivrPlugin,
    report: ManifestReport,
    fixture: Mapping[str, Any],
    profile: str,
    *,
    suffix: str = "",
) -> FixtureOutcome:
    """Drive one retrieval fixture through `plugin` under `profile`.

    Issue codes: every rule code `check_search_output` reports, `deadline_exceeded` (no
    ranking within the profile's `max_latency_ms`), `unexpected_ranking` (the ranking does not
    start with `expect.top`), `plugin_unavailable` and `plugin_refused`. `suffix` tells the
    invocation ids of a repeated search apart.
    """
    retrieval = fixture["retrieval"]
    session = fixture_session(report, fixture, profile)
    outcome = FixtureOutcome(profile)
    latency = session.profile.max_latency_ms
    started = time.monotonic()
    with anyio.move_on_after(latency / 1000) as deadline:
        await _rounds(plugin, session, fixture, outcome, suffix)
    outcome.rounds = session.round
    if deadline.cancelled_caught:
        elapsed = int((time.monotonic() - started) * 1000)
        outcome.issues.append(
            FixtureIssue(
                "deadline_exceeded",
                f"the search did not end within profile {profile!r}'s max_latency_ms {latency} "
                f"(stopped after {elapsed} ms)",
                f"/contributions/retrieval/profiles/{profile}/max_latency_ms",
            )
        )
    top = (retrieval.get("expect") or {}).get("top")
    if top and not outcome.issues and outcome.ranking[: len(top)] != list(top):
        outcome.issues.append(
            FixtureIssue(
                "unexpected_ranking",
                f"the ranking starts {outcome.ranking[: len(top)]}; the fixture expects {top}",
                "/ranking/hits",
            )
        )
    return outcome


# where in an answer each rule looks, for the report's issue paths
_RULE_PATHS = {
    "too_many_rounds": "/requests",
    "too_many_requests": "/requests",
    "candidate_limit": "/requests",
    "unknown_space": "/requests",
    "dimension_mismatch": "/requests",
    "invalid_vector": "/requests",
    "filter_outside_scope": "/requests",
    "plugin_dependency": "/requests",
    "unserved_candidate": "/ranking/hits",
    "duplicate_hit": "/ranking/hits",
    "too_many_hits": "/ranking/hits",
    "over_budget": "/usage/cost_cents",
}


async def _rounds(
    plugin: QuivrPlugin,
    session: RetrievalSession,
    fixture: Mapping[str, Any],
    outcome: FixtureOutcome,
    suffix: str,
) -> None:
    retrieval = fixture["retrieval"]
    while True:
        body = fixture_request(session, fixture, suffix)
        try:
            raw = await plugin.search(body, max_response_bytes=session.limits.max_response_bytes)
        except AnswerTooLarge:
            outcome.issues.append(
                FixtureIssue(
                    "response_too_large",
                    f"round {session.round} answered more than max_response_bytes "
                    f"({session.limits.max_response_bytes})",
                )
            )
            return
        except PluginRefused as refused:
            # the plugin's own message is not repeated: it is the plugin's text, not a rule
            outcome.issues.append(
                FixtureIssue(
                    "plugin_refused",
                    f"round {session.round}, a valid search, was refused with error code "
                    f"{refused.code} (retryable: {str(refused.retryable).lower()})",
                    SEARCH,
                )
            )
            return
        except PluginUnavailable:
            outcome.issues.append(
                FixtureIssue(
                    "plugin_unavailable",
                    f"round {session.round} got no answer, or a non-2xx answer without a valid "
                    "error envelope",
                    SEARCH,
                )
            )
            return
        codes, answer = await judge_round(raw, session)
        if codes:
            outcome.issues.extend(
                FixtureIssue(
                    code, f"round {session.round} broke the rule {code}", _RULE_PATHS.get(code, "")
                )
                for code in sorted(codes)
            )
            return
        session.spend(answer)
        if "ranking" in answer:
            outcome.hits = list(answer["ranking"]["hits"])
            outcome.ranking = [hit["segment_id"] for hit in outcome.hits]
            return
        for index, wanted in enumerate(answer["requests"]):
            session.serve(index, wanted, serve_fixture(retrieval, wanted))
        session.next_round()
