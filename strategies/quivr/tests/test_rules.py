"""The retrieval rule engine against every retrieval row of Quivr's index.json."""

from __future__ import annotations

import json
import math

import pytest
from mnemon_strategy_quivr import (
    RetrievalLimits,
    RetrievalProfile,
    RetrievalSession,
    check_search_output,
    check_search_request,
)
from quivr_fixtures import FIXTURES, load, rows

RESPONSES = rows("responses/retrieval/")
REQUESTS = rows("requests/retrieval/")


def test_the_index_names_every_retrieval_answer_vendored():
    # every response file vendored is judged by some row, and the row count is what Quivr lists
    assert len(RESPONSES) == 19
    assert len(REQUESTS) == 6
    named = {row["file"] for row in RESPONSES}
    judged = {f"responses/retrieval/{p.name}" for p in (FIXTURES / "responses/retrieval").iterdir()}
    # profile-mode*.json postdate index.json; they are checked below by hand
    assert judged - named == {
        "responses/retrieval/profile-mode.json",
        "responses/retrieval/profile-mode-invalid.json",
    }


@pytest.mark.parametrize("row", RESPONSES, ids=lambda row: row["file"].rsplit("/", 1)[1])
def test_every_retrieval_answer_yields_exactly_its_codes(row):
    session = RetrievalSession.from_request(load(row["request"]), load(row["manifest"]))
    assert check_search_output(load(row["file"]), session) == frozenset(row["errors"])
    assert (not row["errors"]) == row["valid"]


@pytest.mark.parametrize("row", RESPONSES, ids=lambda row: row["file"].rsplit("/", 1)[1])
def test_the_raw_bytes_are_judged_the_same(row):
    session = RetrievalSession.from_request(load(row["request"]), load(row["manifest"]))
    raw = (FIXTURES / row["file"]).read_bytes()
    assert check_search_output(raw, session) == frozenset(row["errors"])


@pytest.mark.parametrize("row", REQUESTS, ids=lambda row: row["file"].rsplit("/", 1)[1])
def test_every_retrieval_request_yields_exactly_its_codes(row):
    assert check_search_request(load(row["file"])) == frozenset(row["errors"])


def _session(**changes):
    base = {
        "profile": RetrievalProfile("default", 500, 1),
        "limits": RetrievalLimits(
            max_rounds=2, max_requests=2, max_candidates=20, max_response_bytes=2048
        ),
        "spaces": [{"id": "s@1", "dimensions": 2}],
        "scope": {"corpus_ids": ["c"], "source_namespaces": ["wire"]},
        "limit": 2,
    }
    base.update(changes)
    return RetrievalSession(**base)


def test_cost_over_the_profile_budget_is_over_budget():
    session = _session()
    session.serve(0, {"primitive": "bm25", "query_text": "q", "k": 1}, [{"segment_id": "a"}])
    first = {
        "requests": [{"primitive": "bm25", "query_text": "q", "k": 1}],
        "usage": {"cost_cents": 0.75},
    }
    assert check_search_output(first, session) == frozenset()
    session.spend(first)
    session.next_round()
    ranking = {"ranking": {"hits": [{"segment_id": "a", "score": 1}]}, "usage": {"cost_cents": 0.5}}
    assert check_search_output(ranking, session) == {"over_budget"}
    assert (
        check_search_output({"ranking": {"hits": []}, "usage": {"cost_cents": 0.25}}, session)
        == frozenset()
    )


def test_an_answer_over_max_response_bytes_is_response_too_large():
    explanation = "x" * 1000
    hits = [
        {"segment_id": "a", "score": 1, "explanation": explanation},
        {"segment_id": "b", "score": 0, "explanation": explanation},
    ]
    session = _session()
    session.serve(
        0,
        {"primitive": "bm25", "query_text": "q", "k": 2},
        [{"segment_id": "a"}, {"segment_id": "b"}],
    )
    assert check_search_output({"ranking": {"hits": hits}}, session) == {"response_too_large"}
    assert check_search_output({"ranking": {"hits": hits[:1]}}, session) == frozenset()


def test_a_non_finite_vector_is_invalid_vector():
    session = _session()
    raw = b'{"requests": [{"primitive": "near_vector", "space": "s@1", "vector": [NaN, 1.0], "k": 1}]}'
    assert check_search_output(raw, session) == {"invalid_vector"}
    answer = {
        "requests": [
            {"primitive": "near_vector", "space": "s@1", "vector": [math.inf, 1.0], "k": 1}
        ]
    }
    assert check_search_output(answer, session) == {"invalid_vector"}


def test_a_filter_inside_the_scope_is_allowed():
    session = _session()
    narrow = {
        "requests": [
            {
                "primitive": "bm25",
                "query_text": "q",
                "k": 2,
                "filter": {"source_namespaces": ["wire"]},
            }
        ]
    }
    assert check_search_output(narrow, session) == frozenset()


def test_not_json_is_a_schema_violation():
    assert check_search_output(b"{not json", _session()) == {"schema_violation"}
    assert check_search_output("[]", _session()) == {"schema_violation"}


def test_profile_mode_answers_postdating_the_index():
    # profile-mode.json is valid and profile-mode-invalid.json is not, by the request schema
    session = RetrievalSession.from_request(
        load("requests/retrieval/search-profile-budget.json"),
        load("manifests/valid/profile-candidates.json"),
    )
    assert (
        check_search_output(load("responses/retrieval/profile-mode.json"), session) == frozenset()
    )
    assert check_search_output(load("responses/retrieval/profile-mode-invalid.json"), session) == {
        "schema_violation"
    }


def test_request_body_round_trips_through_the_request_schema():
    session = RetrievalSession.from_request(
        load("requests/retrieval/search-round-2.json"), load("manifests/valid/retrieval.yaml")
    )
    body = session.request_body(
        invocation_id="inv-search-2", organization_id="org_example", query_text="harbour strike"
    )
    assert check_search_request(body) == frozenset()
    assert json.loads(json.dumps(body)) == load("requests/retrieval/search-round-2.json")
