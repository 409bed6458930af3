"""The invoke check of Quivr-compat certification: the reference ranker on newsroom.json."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from mnemon_strategy_quivr import QuivrPlugin, inspect_manifest, invoke_fixture, serve_fixture
from quivr_fixtures import load

sys.path.insert(0, str(Path(__file__).parent / "rankers"))
import quivr_ranker

MANIFEST = Path(__file__).parent / "rankers" / "quivr-plugin.yaml"
NEWSROOM = load("retrieval/newsroom.json")


@pytest.fixture
def endpoint():
    servers = []

    def start(mode="correct"):
        server = quivr_ranker.serve("127.0.0.1", 0, mode)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


async def _invoke(endpoint, fixture, mode="correct"):
    report = inspect_manifest(MANIFEST)
    plugin = QuivrPlugin(endpoint(mode), report)
    try:
        return await invoke_fixture(plugin, report, fixture, "default")
    finally:
        await plugin.aclose()


async def test_the_reference_ranker_is_certified_on_newsroom(endpoint):
    fixture = copy.deepcopy(NEWSROOM)
    # both query words: the harbour strike segment must rank first
    fixture["retrieval"]["expect"] = {"top": ["seg_harbour"]}
    outcome = await _invoke(endpoint, fixture)
    assert outcome.passed, outcome.issues
    assert outcome.rounds == 2
    assert outcome.ranking[0] == "seg_harbour"
    assert set(outcome.ranking) <= {"seg_harbour", "seg_rail", "seg_ferry"}
    assert len(outcome.ranking) == NEWSROOM["retrieval"]["limit"]


async def test_a_wrong_expectation_is_unexpected_ranking(endpoint):
    fixture = copy.deepcopy(NEWSROOM)
    fixture["retrieval"]["expect"] = {"top": ["seg_market"]}
    outcome = await _invoke(endpoint, fixture)
    assert [issue.code for issue in outcome.issues] == ["unexpected_ranking"]


@pytest.mark.parametrize(
    "mode",
    [
        "unserved_candidate",
        "duplicate_hit",
        "too_many_rounds",
        "candidate_limit",
        "over_budget",
        "response_too_large",
    ],
)
async def test_a_broken_ranker_is_not_certified(endpoint, mode):
    outcome = await _invoke(endpoint, NEWSROOM, mode)
    assert [issue.code for issue in outcome.issues] == [mode]


async def test_the_fixture_space_is_offered_so_vectors_are_checked(endpoint):
    # the default space fixture.served@1 has 8 dimensions; unknown spaces are still refused
    outcome = await _invoke(endpoint, NEWSROOM, "unknown_space")
    assert [issue.code for issue in outcome.issues] == ["unknown_space"]


def test_catalogue_serving_follows_quivr_rules():
    retrieval = NEWSROOM["retrieval"]
    ask = {"primitive": "bm25", "query_text": "harbour strike", "k": 10}
    # most shared words first, ties in catalogue order, nothing without a shared word
    assert [c["segment_id"] for c in serve_fixture(retrieval, ask)] == [
        "seg_harbour",
        "seg_rail",
        "seg_ferry",
    ]
    narrowed = {**ask, "filter": {"source_namespaces": ["local"]}}
    assert [c["segment_id"] for c in serve_fixture(retrieval, narrowed)] == ["seg_ferry"]
    assert [c["segment_id"] for c in serve_fixture(retrieval, {**ask, "k": 1})] == ["seg_harbour"]
    ordered = {**retrieval, "order": {"bm25": ["seg_market", "seg_rail"]}}
    assert [c["segment_id"] for c in serve_fixture(ordered, ask)] == ["seg_market", "seg_rail"]
    grouped = {
        **retrieval,
        "candidates": [
            *retrieval["candidates"],
            {
                "segment_id": "seg_harbour_2",
                "record_id": "rec_harbour",
                "text": "harbour strike strike",
            },
        ],
    }
    assert [c["segment_id"] for c in serve_fixture(grouped, {**ask, "group_by": "record"})] == [
        "seg_harbour",
        "seg_rail",
        "seg_ferry",
    ]
    first = serve_fixture(retrieval, ask)[0]
    assert first["end"] == len(first["text"])
