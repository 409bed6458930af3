"""The retrieval rule engine: one search's state, and the exact codes an answer breaks.

Pure: no I/O and no clock. The host, the tests and a contract runner judge plugin answers with
the same `check_search_output`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._schemas import request_validator, response_validator

__all__ = [
    "RetrievalLimits",
    "RetrievalProfile",
    "RetrievalSession",
    "check_search_output",
    "check_search_request",
    "decode_answer",
    "judge_search_output",
]

# the codes an answer can earn; each names one rule
CODES = (
    "schema_violation",
    "too_many_rounds",
    "too_many_requests",
    "candidate_limit",
    "unknown_space",
    "dimension_mismatch",
    "invalid_vector",
    "filter_outside_scope",
    "plugin_dependency",
    "unserved_candidate",
    "duplicate_hit",
    "too_many_hits",
    "over_budget",
    "response_too_large",
)


@dataclass(frozen=True)
class RetrievalProfile:
    """One declared profile: its name and what one search under it may spend."""

    name: str = "default"
    max_latency_ms: int = 1000
    max_cost_cents: float = 0


@dataclass(frozen=True)
class RetrievalLimits:
    """The manifest's `limits` of a retrieval Contribution, with mnemon's defaults."""

    max_rounds: int = 3
    max_requests: int = 8
    max_candidates: int = 100
    max_response_bytes: int = 1_048_576

    @classmethod
    def from_manifest(cls, contribution: Mapping[str, Any]) -> RetrievalLimits:
        """Limits as a (valid) manifest's retrieval Contribution declares them."""
        return cls(**dict(contribution.get("limits") or {}))


@dataclass(frozen=True)
class Served:
    """One served candidate request: its round, index, request and candidates, in order."""

    round: int
    request_index: int
    request: Mapping[str, Any]
    candidates: tuple[Mapping[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """The `served[]` entry of the next round's request."""
        return {
            "round": self.round,
            "request_index": self.request_index,
            "request": dict(self.request),
            "candidates": [dict(candidate) for candidate in self.candidates],
        }


@dataclass
class RetrievalSession:
    """One search, round by round: what was offered, what was served, what was spent.

    Args:
        profile: the profile the search runs under.
        limits: the manifest's limits.
        spaces: the vector spaces offered (each with at least `id` and `dimensions`).
        scope: the search scope (`corpus_ids`, optionally `source_namespaces`).
        limit: the most hits the final ranking may hold.
        dependencies: full `plugin/profile` names the manifest's `requires` declares.
    """

    profile: RetrievalProfile
    limits: RetrievalLimits
    spaces: Sequence[Mapping[str, Any]]
    scope: Mapping[str, Any]
    limit: int
    dependencies: frozenset[str] = frozenset()
    round: int = 1
    served: list[Served] = field(default_factory=list)
    cost_cents: float = 0.0

    @classmethod
    def from_request(
        cls, request: Mapping[str, Any], manifest: Mapping[str, Any]
    ) -> RetrievalSession:
        """The session a search request (one round) and a manifest describe."""
        contribution = manifest["contributions"]["retrieval"]
        declared = contribution["profiles"][request["profile"]]
        return cls(
            profile=RetrievalProfile(
                request["profile"], declared["max_latency_ms"], declared["max_cost_cents"]
            ),
            limits=RetrievalLimits.from_manifest(contribution),
            spaces=tuple(request.get("spaces", ())),
            scope=request["scope"],
            limit=request["limit"],
            dependencies=declared_dependencies(manifest),
            round=request["round"],
            served=[
                Served(s["round"], s["request_index"], s["request"], tuple(s["candidates"]))
                for s in request.get("served", ())
            ],
        )

    @property
    def last_round(self) -> bool:
        """Whether this round must answer a ranking."""
        return self.round >= self.limits.max_rounds

    def served_segments(self) -> set[str]:
        """Every segment id served in this search so far."""
        return {c["segment_id"] for s in self.served for c in s.candidates}

    def candidate(self, segment_id: str) -> Mapping[str, Any] | None:
        """The first served candidate with this segment id, or None."""
        for served in self.served:
            for candidate in served.candidates:
                if candidate["segment_id"] == segment_id:
                    return candidate
        return None

    def serve(
        self,
        request_index: int,
        request: Mapping[str, Any],
        candidates: Iterable[Mapping[str, Any]],
    ) -> None:
        """Record the candidates served for one request of the current round."""
        self.served.append(Served(self.round, request_index, request, tuple(candidates)))

    def spend(self, answer: Mapping[str, Any]) -> None:
        """Add an (already checked) answer's reported cost to the search's total."""
        usage = answer.get("usage") or {}
        self.cost_cents += float(usage.get("cost_cents", 0))

    def next_round(self) -> None:
        """Move to the next round, after this round's requests were served."""
        self.round += 1

    def request_body(
        self,
        *,
        invocation_id: str,
        organization_id: str,
        query_text: str,
        mode: str = "hybrid",
        configuration: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The search request of the current round, as the plugin receives it."""
        return {
            "invocation_id": invocation_id,
            "contribution": "retrieval",
            "organization_id": organization_id,
            "configuration": dict(configuration or {}),
            "profile": self.profile.name,
            "round": self.round,
            "query": {"text": query_text, "mode": mode},
            "limit": self.limit,
            "scope": dict(self.scope),
            "spaces": [dict(space) for space in self.spaces],
            "served": [served.to_json() for served in self.served],
        }


def declared_dependencies(manifest: Mapping[str, Any]) -> frozenset[str]:
    """The `plugin/profile` names a manifest's `requires` declares."""
    return frozenset(
        f"{item['plugin']}/{profile}"
        for item in manifest.get("requires", ())
        for profile in item.get("profiles", ())
    )


def _reject_constant(name: str) -> float:
    # NaN and infinities decode as floats, so invalid_vector can name them
    return float(name)


def decode_answer(answer: bytes | str | Mapping[str, Any]) -> tuple[Any, int]:
    """An answer's JSON value and its size in bytes.

    Raises:
        ValueError: when the bytes are not UTF-8 JSON.
    """
    if isinstance(answer, Mapping):
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        return answer, len(text.encode("utf-8"))
    raw = answer.encode("utf-8") if isinstance(answer, str) else bytes(answer)
    return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant), len(raw)


def check_search_request(request: Mapping[str, Any]) -> frozenset[str]:
    """The codes a search request breaks: `schema_violation`, or none."""
    if any(True for _ in request_validator().iter_errors(request)):
        return frozenset({"schema_violation"})
    return frozenset()


def check_search_output(
    answer: bytes | str | Mapping[str, Any], session: RetrievalSession
) -> frozenset[str]:
    """The exact set of rule codes one round's answer breaks (empty when it is valid).

    A shape error is reported alone, as `schema_violation`: the other rules judge only
    well-formed answers.
    """
    return judge_search_output(answer, session)[0]


def judge_search_output(
    answer: bytes | str | Mapping[str, Any], session: RetrievalSession
) -> tuple[frozenset[str], Any]:
    """`check_search_output`'s codes, and the answer's JSON value (None when not JSON).

    A host that goes on with a valid answer uses this value instead of parsing it again.
    """
    try:
        value, size = decode_answer(answer)
    except (UnicodeDecodeError, ValueError):
        return frozenset({"schema_violation"}), None
    codes: set[str] = set()
    if size > session.limits.max_response_bytes:
        codes.add("response_too_large")
    if any(True for _ in response_validator().iter_errors(value)):
        return frozenset(codes | {"schema_violation"}), value
    if "requests" in value:
        codes.update(_check_requests(value["requests"], session))
    else:
        codes.update(_check_ranking(value["ranking"]["hits"], session))
    cost = (value.get("usage") or {}).get("cost_cents", 0)
    if session.cost_cents + cost > session.profile.max_cost_cents:
        codes.add("over_budget")
    return frozenset(codes), value


def _check_requests(requests: Sequence[Mapping[str, Any]], session: RetrievalSession) -> set[str]:
    codes: set[str] = set()
    limits = session.limits
    if session.last_round:
        codes.add("too_many_rounds")
    if len(requests) > limits.max_requests:
        codes.add("too_many_requests")
    spaces = {space["id"]: space for space in session.spaces}
    in_scope = session.scope.get("source_namespaces")
    for request in requests:
        primitive = request["primitive"]
        k = request["profile"]["limit"] if primitive == "profile" else request["k"]
        if k > limits.max_candidates:
            codes.add("candidate_limit")
        if "space" in request:
            space = spaces.get(request["space"])
            if space is None:
                codes.add("unknown_space")
            elif "vector" in request and len(request["vector"]) != space["dimensions"]:
                codes.add("dimension_mismatch")
        if "vector" in request and not all(math.isfinite(x) for x in request["vector"]):
            codes.add("invalid_vector")
        wanted = (request.get("filter") or {}).get("source_namespaces")
        # a filter narrows: with no namespaces in the scope, any subset narrows it
        if wanted is not None and in_scope is not None and not set(wanted) <= set(in_scope):
            codes.add("filter_outside_scope")
        if primitive == "profile" and request["profile"]["name"] not in session.dependencies:
            codes.add("plugin_dependency")
    return codes


def _check_ranking(hits: Sequence[Mapping[str, Any]], session: RetrievalSession) -> set[str]:
    codes: set[str] = set()
    if len(hits) > session.limit:
        codes.add("too_many_hits")
    served = session.served_segments()
    seen: set[str] = set()
    for hit in hits:
        segment = hit["segment_id"]
        if segment not in served:
            codes.add("unserved_candidate")
        if segment in seen:
            codes.add("duplicate_hit")
        seen.add(segment)
    return codes
