"""A hosted Quivr ranker asks for candidates by meaning: `near_vector` and `hybrid` over recall.

The ranker (`meaning/quivr_meaning.py`, written from the protocol's text) is served on
127.0.0.1 and asks, in round 1, for the requests a test names, in the space the search offers;
it ranks what was served in served order. The host has an in-process embedder (the reference
ingestion plugin's word hashing, with a few synonyms folded: chai means tea) beside the spaces
Source, so what meaning finds is known.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mnemon_source_spaces as spaces
import mnemon_strategy_quivr as quivr
import pytest
from launched import EMBEDDERS, MEANING

from mnemon.sdk import (
    EmbedQueryRequest,
    PluginContext,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    VectorSpace,
    define_embedder,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner

sys.path.insert(0, str(EMBEDDERS))
sys.path.insert(0, str(MEANING))
import quivr_embedder
import quivr_meaning

MANIFEST = MEANING / "quivr-plugin.yaml"
RECALL = "source:spaces/recall"
ADA = {"scope": {"user_id": "ada"}}
CHAI = "Ada drinks chai every morning."
# holds the word "tea", but means it less than the chai does
TIN = "The tea tin fell off the shelf in the kitchen."
MEMORIES = [
    CHAI,
    "The quarterly report is due on Friday.",
    "Ada fixed her bicycle on Sunday.",
    TIN,
]
# shares no word with the chai memory: only meaning finds it
PARAPHRASE = "tea habits"
SPACE = {"id": "test.words", "version": "1", "model": "word-hashing-64", "dimensions": 64}


class Hashing:
    """The reference ingestion plugin's vectors, in process: one segment per text."""

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        return SegmentAnswer(
            segments=tuple(
                Segment(
                    part_key=part.key,
                    start=0,
                    end=len(part.text),
                    vectors={
                        space: tuple(quivr_embedder.vector(part.text)) for space in request.spaces
                    },
                )
                for part in request.parts
            )
        )

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        return QueryVector(vector=tuple(quivr_embedder.vector(request.text)))


class HashingPlugin:
    def apply(self, ctx: PluginContext) -> None:
        definition = define_embedder(
            {
                "type_id": "hashing",
                "package_name": "mnemon-test-hashing",
                "spaces": [{**SPACE, "metric": "cosine"}],
            },
            lambda configuration: Hashing(),
        )
        install_memory(ctx, embedders=[definition])


def allow(offer: Any) -> bool:
    return True


@pytest.fixture
def ranker():
    """Serve the asking ranker on 127.0.0.1: its endpoint and the searches it received."""
    started = []

    def start(*asks: str, alpha: float = 0.5) -> tuple[str, list[dict[str, Any]]]:
        server = quivr_meaning.serve("127.0.0.1", 0, asks, alpha)
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server.RequestHandlerClass.seen

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


async def _recall(
    tmp_path: Path,
    endpoint: str,
    query: str = PARAPHRASE,
    *,
    embedder: bool = True,
    **spaces_config: Any,
) -> Any:
    """One ranked recall of `query` over MEMORIES, the ranker at `endpoint`."""
    runner = MemoryCompositionRunner()
    try:
        if embedder:
            await runner.mount(HashingPlugin(), instance_id="hashing")
        await runner.mount(
            spaces,
            instance_id="spaces",
            config={"data_dir": str(tmp_path / "spaces"), **spaces_config},
        )
        await runner.mount(
            quivr, instance_id="quivr", config={"manifest": str(MANIFEST), "endpoint": endpoint}
        )
        turn = await runner.begin_turn(ADA)
        for text in MEMORIES:
            await turn.execute_action("source:spaces/remember", {"text": text}, allow)
        await turn.release()
        turn = await runner.begin_turn(ADA)
        try:
            return await turn.execute_route(RECALL, {"query": query, "limit": 3})
        finally:
            await turn.release()
    finally:
        await runner.dispose()


def _served(seen: list[dict[str, Any]]) -> list[list[str]]:
    """The texts served for each request of round 1, as round 2 received them."""
    [second] = [search for search in seen if search["round"] == 2]
    return [[c["text"] for c in served["candidates"]] for served in second["served"]]


async def test_the_search_offers_the_hosts_space(tmp_path: Path, ranker) -> None:
    endpoint, seen = ranker("bm25")
    await _recall(tmp_path, endpoint)
    first = seen[0]
    assert first["spaces"] == [
        {
            "id": "test.words@1",
            "owner": {"kind": "engine"},
            "model": "word-hashing-64",
            "dimensions": 64,
            "metric": "cosine",
            "indexes": ["text"],
            "query_modalities": ["text"],
            "role": "served",
            "coverage": {"segments": 0, "total": 0},
        }
    ]
    assert first["query"] == {"text": PARAPHRASE, "mode": "hybrid"}
    assert quivr.check_search_request(first) == frozenset()


async def test_near_vector_candidates_are_found_by_meaning(tmp_path: Path, ranker) -> None:
    endpoint, seen = ranker("near_vector")
    evidence = await _recall(tmp_path, endpoint)
    assert evidence.output["status"] == "ranked"
    assert evidence.items[0].text == CHAI
    # served by meaning alone: the route said so, and the score is the cosine similarity
    why = evidence.items[0].provenance["explain"]
    assert set(why) == {"meaning", "similarity"}
    [second] = [search for search in seen if search["round"] == 2]
    top = second["served"][0]["candidates"][0]
    assert top["text"] == CHAI
    assert top["score"] == why["similarity"]


async def test_bm25_candidates_are_lexical(tmp_path: Path, ranker) -> None:
    endpoint, seen = ranker("bm25")
    evidence = await _recall(tmp_path, endpoint)
    # only the memory holding the word "tea": the chai means tea but does not say it
    assert _served(seen) == [[TIN]]
    assert [item.text for item in evidence.items] == [TIN]
    assert evidence.items[0].provenance["explain"] == {"keywords": 1}


@pytest.mark.parametrize(("alpha", "first"), [(0.0, TIN), (1.0, CHAI)])
async def test_hybrid_weighs_meaning_by_alpha(
    tmp_path: Path, ranker, alpha: float, first: str
) -> None:
    endpoint, seen = ranker("hybrid", alpha=alpha)
    evidence = await _recall(tmp_path, endpoint)
    assert evidence.output["status"] == "ranked"
    [served] = _served(seen)
    assert served[0] == first
    # both were searched: the fused candidates say which side found each
    assert set(evidence.items[0].provenance["explain"]) == {"keywords", "meaning", "similarity"}


async def test_a_search_holding_every_primitive_is_served_each_as_asked(
    tmp_path: Path, ranker
) -> None:
    endpoint, seen = ranker("bm25", "near_vector", "hybrid")
    evidence = await _recall(tmp_path, endpoint)
    assert evidence.output["status"] == "ranked"
    by_words, by_meaning, by_both = _served(seen)
    assert by_words == [TIN]
    assert by_meaning[0] == CHAI
    assert set(by_both) >= {CHAI, TIN}


async def _own_order(tmp_path: Path, **spaces_config: Any) -> list[str]:
    from mnemon_testing import SelectAll

    runner = MemoryCompositionRunner()
    try:
        await runner.mount(HashingPlugin(), instance_id="hashing")
        await runner.mount(
            spaces,
            instance_id="spaces",
            config={"data_dir": str(tmp_path / "spaces"), **spaces_config},
        )
        await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
        turn = await runner.begin_turn(ADA)
        try:
            found = await turn.execute_route(RECALL, {"query": PARAPHRASE, "limit": 3})
        finally:
            await turn.release()
    finally:
        await runner.dispose()
    return [item.text for item in found.items]


@pytest.mark.parametrize(
    ("ask", "diagnostic"),
    [
        ("unknown_space", {"code": "retrieval_plugin_invalid", "rules": ("unknown_space",)}),
        (
            "wrong_dimensions",
            {"code": "retrieval_plugin_invalid", "rules": ("dimension_mismatch",)},
        ),
        ("vector", {"code": "unsupported_candidate_request", "reason": "vector_query"}),
        ("ranked_fusion", {"code": "unsupported_candidate_request", "reason": "ranked_fusion"}),
    ],
)
async def test_what_cannot_be_served_as_asked_falls_back_to_the_sources_order(
    tmp_path: Path, ranker, ask: str, diagnostic: dict[str, Any]
) -> None:
    endpoint, _ = ranker(ask)
    evidence = await _recall(tmp_path, endpoint)
    assert evidence.output["status"] == "fallback"
    got = {key: evidence.output["diagnostic"][key] for key in diagnostic}
    assert got == diagnostic
    assert [item.text for item in evidence.items] == await _own_order(tmp_path)


async def test_without_an_embedder_no_space_is_offered(tmp_path: Path, ranker) -> None:
    endpoint, seen = ranker("near_vector")
    evidence = await _recall(tmp_path, endpoint, embedder=False)
    assert seen[0]["spaces"] == []
    # the ranker names the space it was not offered: refused by the rule, as always
    assert evidence.output["status"] == "fallback"
    assert list(evidence.output["diagnostic"]["rules"]) == ["unknown_space"]


async def test_a_source_with_recall_by_meaning_off_fails_the_meaning_read_with_its_code(
    tmp_path: Path, ranker
) -> None:
    endpoint, _ = ranker("near_vector")
    evidence = await _recall(tmp_path, endpoint, vectors="off")
    # the host offers its space, but this Source does not search it: never served by words
    assert evidence.output["status"] == "fallback"
    assert evidence.output["diagnostic"]["code"] == "search_read_failed"
    assert evidence.output["diagnostic"]["read_code"] == "unsupported"
    assert [item.text for item in evidence.items] == [TIN]


async def test_document_search_is_offered_no_space(tmp_path: Path, ranker) -> None:
    import mnemon_source_documents as documents

    endpoint, seen = ranker("bm25")
    scope = {"scope": {"user_id": "ada", "workspace": "w1"}}
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(HashingPlugin(), instance_id="hashing")
        await runner.mount(
            documents, instance_id="docs", config={"data_dir": str(tmp_path / "docs")}
        )
        await runner.mount(
            quivr, instance_id="quivr", config={"manifest": str(MANIFEST), "endpoint": endpoint}
        )
        turn = await runner.begin_turn(scope)
        await turn.execute_action(
            "source:docs/create", {"title": "Tea", "body": "Green tea, steeped."}, allow
        )
        await turn.release()
        turn = await runner.begin_turn(scope)
        try:
            evidence = await turn.execute_route("source:docs/search", {"query": "tea"})
        finally:
            await turn.release()
    finally:
        await runner.dispose()
    # its route cannot be asked to search by meaning: read as it is, lexical
    assert evidence.output["status"] == "ranked"
    assert seen[0]["spaces"] == []
    assert seen[0]["query"]["mode"] == "lexical"


def test_a_space_the_plugin_declares_itself_is_owned_by_it() -> None:
    manifest = {
        "id": "mnemon.hashing",
        "version": "0.1.0",
        "contributions": {"ingestion": {"spaces": {"test.words": {"version": "1"}}}},
    }
    space = VectorSpace.model_validate({**SPACE, "metric": "cosine"})
    [offered] = quivr.offered_spaces([space], manifest)
    assert offered["owner"] == {
        "kind": "plugin",
        "plugin_id": "mnemon.hashing",
        "plugin_version": "0.1.0",
    }
    # another version of the space is another space: not the plugin's
    other = space.model_copy(update={"version": "2"})
    assert quivr.offered_spaces([other], manifest)[0]["owner"] == {"kind": "engine"}
    # with two spaces the route's own is unknown: none is offered
    assert quivr.offered_spaces([space, other], manifest) == []
