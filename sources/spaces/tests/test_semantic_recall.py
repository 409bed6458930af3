"""Recall by meaning: with an embedder installed, memories get vectors and recall fuses both.

The embedder here is a toy with a fixed vocabulary of concepts (tea and chai mean the same,
so do cat and feline), so what "meaning" finds is known exactly.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    ProviderError,
    ProviderInit,
    SearchRequest,
    SearchResult,
    define_space_provider,
)
from spaces_kit import ADA, BOB, INSPECT, open_spaces, recall, remember, scope_turn, texts
from test_spaces import WithProviders

from mnemon import ManagementError, RouteError, SourceError
from mnemon.sdk import (
    EmbedQueryRequest,
    PluginContext,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    define_embedder,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner

CONCEPTS = {
    "tea": 0,
    "chai": 0,
    "drink": 0,
    "cat": 1,
    "feline": 1,
    "pet": 1,
    "berlin": 2,
    "city": 2,
    "lives": 2,
    "deadline": 3,
    "friday": 3,
}
SPACE_ID = "test.concepts"


def concept_vector(text: str) -> tuple[float, ...]:
    vector = [0.0] * 5
    for word in text.lower().replace(".", " ").replace("?", " ").split():
        vector[CONCEPTS.get(word, 4)] += 1.0 if word in CONCEPTS else 0.05
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return tuple(x / norm for x in vector)


class Concepts:
    """The toy embedder; `down` makes every call fail as an unreachable service would."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0
        self.queries = 0

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        self.calls += 1
        if self.down:
            raise SourceError("unavailable", "the embedding service is down")
        return SegmentAnswer(
            segments=tuple(
                Segment(
                    part_key=part.key,
                    start=0,
                    end=len(part.text),
                    vectors={space: concept_vector(part.text) for space in request.spaces},
                )
                for part in request.parts
                if part.text
            )
        )

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        self.queries += 1
        if self.down:
            raise SourceError("unavailable", "the embedding service is down")
        return QueryVector(vector=concept_vector(request.text))


class ConceptsPlugin:
    def __init__(
        self, runtime: Concepts, dimensions: int = 5, space_id: str = SPACE_ID, name: str = ""
    ) -> None:
        self.runtime = runtime
        self.definition = define_embedder(
            {
                "type_id": f"concepts{name}",
                "package_name": f"mnemon-test-concepts{name}",
                "spaces": [
                    {
                        "id": space_id,
                        "version": "1",
                        "model": "concepts",
                        "dimensions": dimensions,
                        "metric": "cosine",
                    }
                ],
            },
            lambda configuration: runtime,
        )

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, embedders=[self.definition])


async def inspect(turn: Any) -> Any:
    [item] = (await turn.execute_route(INSPECT, {})).items
    return orjson.loads(item.text)


async def open_with_meaning(
    directory: Path, runtime: Concepts | None = None, **extra: Any
) -> tuple[MemoryCompositionRunner, Concepts]:
    runtime = runtime or Concepts()
    runner = MemoryCompositionRunner()
    await runner.mount(ConceptsPlugin(runtime), instance_id="concepts")
    return await open_spaces(directory, runner=runner, **extra), runtime


MEMORIES = [
    "Ada's first cup every morning is chai.",
    "The quarterly report is due on Friday.",
    "Ada adopted a feline named Turing.",
    "Ada lives in Berlin since 2019.",
]


async def test_recall_finds_a_memory_by_its_meaning_and_says_why(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        found = await recall(turn, "What does she drink? tea", limit=2)
        await turn.release()
    assert texts(found)[0] == "Ada's first cup every morning is chai."
    why = found.items[0].provenance["explain"]
    assert why["meaning"] == 1  # no keyword of the question is in it: meaning found it
    assert why["keywords"] is None
    assert why["similarity"] > 0.9
    assert found.items[0].provenance["tier"] == "strong"


async def test_without_an_embedder_recall_is_by_keywords_as_before(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        found = await recall(turn, "What does Ada drink? tea", limit=2)
        directory = await inspect(turn)
        await turn.release()
        managed = await runner.management_client("source:spaces", ADA).read("inspect", {})
    assert "Ada's first cup every morning is chai." not in texts(found)
    assert all("explain" not in item.provenance for item in found.items)
    assert directory["recall"] == ["words"]  # the model is told recall matches words only
    assert "waiting_for_vectors" not in managed["spaces"][0]


async def test_the_model_is_told_that_recall_matches_meaning(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        directory = await inspect(turn)
        await turn.release()
    assert directory["recall"] == ["words", "meaning"]
    route = next(r for r in turn.view.routes if r.id == "source:spaces/recall")
    assert "meaning when inspect lists meaning" in route.description


async def test_recall_by_meaning_can_be_switched_off(tmp_path: Path) -> None:
    runner, runtime = await open_with_meaning(tmp_path, vectors="off")
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, MEMORIES[0])
        found = await recall(turn, "tea", limit=2)
        await turn.release()
    assert texts(found) == []
    assert runtime.calls == 0


async def test_a_keyword_match_and_a_meaning_match_are_fused_into_one_ranking(
    tmp_path: Path,
) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        found = await recall(turn, "report deadline", limit=4)
        await turn.release()
    top = found.items[0]
    assert top.text == "The quarterly report is due on Friday."
    # found both ways: by the word "report" and by its meaning (a deadline on Friday)
    assert top.provenance["explain"]["keywords"] == 1
    assert top.provenance["explain"]["meaning"] == 1


async def test_memories_written_while_the_embedder_is_down_are_caught_up(tmp_path: Path) -> None:
    """Nothing is lost: stored and found by keyword at once, their vectors follow later."""
    runner, runtime = await open_with_meaning(tmp_path)
    async with runner:
        runtime.down = True
        turn = await scope_turn(runner, ADA)
        receipt = await remember(turn, MEMORIES[2])
        assert receipt.completion == "committed"  # the memory is durable at once
        assert texts(await recall(turn, "Turing", limit=3)) == [MEMORIES[2]]  # by keyword
        assert texts(await recall(turn, "pet cat", limit=3)) == []  # no vector yet
        client = runner.management_client("source:spaces", ADA)
        [space] = (await client.read("inspect", {}))["spaces"]
        assert space["waiting_for_vectors"] == 1  # an operator sees what is behind
        runtime.down = False
        assert texts(await recall(turn, "pet cat", limit=3)) == [MEMORIES[2]]  # caught up
        await turn.release()
        [space] = (await client.read("inspect", {}))["spaces"]
        assert space["waiting_for_vectors"] == 0


async def test_imported_memories_get_their_vectors(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        client = runner.management_client("source:spaces", ADA)
        await client.mutate(
            "import",
            {"space": "memories", "memories": [{"text": text} for text in MEMORIES]},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        turn = await scope_turn(runner, ADA)
        found = await recall(turn, "which city", limit=1)
        await turn.release()
    assert texts(found) == ["Ada lives in Berlin since 2019."]
    assert found.items[0].provenance["explain"]["meaning"] == 1


async def test_meaning_never_crosses_scopes(tmp_path: Path) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, MEMORIES[0])
        await turn.release()
        turn = await scope_turn(runner, BOB)
        found = await recall(turn, "tea drink chai", limit=5)
        await turn.release()
    assert texts(found) == []


async def test_a_store_whose_space_changed_keeps_recall_by_keywords(tmp_path: Path) -> None:
    """The same space identity with other dimensions is refused: vectors are never mixed."""
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, MEMORIES[0])
        await turn.release()
    runner = MemoryCompositionRunner()
    await runner.mount(ConceptsPlugin(Concepts(), dimensions=6), instance_id="concepts")
    async with await open_spaces(tmp_path, runner=runner) as runner:
        turn = await scope_turn(runner, ADA)
        by_keyword = await recall(turn, "chai", limit=3)
        by_meaning = await recall(turn, "tea", limit=3)
        await turn.release()
    assert texts(by_keyword) == [MEMORIES[0]]
    assert texts(by_meaning) == []


async def test_a_hanging_embedder_delays_a_write_by_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mnemon_source_spaces._semantic.INLINE_SECONDS", 0.05)

    class Hanging(Concepts):
        async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
            await anyio.sleep_forever()
            raise AssertionError

    runner, _ = await open_with_meaning(tmp_path, Hanging())
    async with runner:
        turn = await scope_turn(runner, ADA)
        with anyio.fail_after(5):
            receipt = await remember(turn, MEMORIES[1])
        await turn.release()
    assert receipt.completion == "committed"


async def test_a_vectors_setting_naming_no_installed_space_refuses_the_mount(
    tmp_path: Path,
) -> None:
    runner = MemoryCompositionRunner()
    await runner.mount(ConceptsPlugin(Concepts()), instance_id="concepts")
    with pytest.raises(Exception, match=r"configuration\.vectors"):
        await open_spaces(tmp_path, runner=runner, vectors="other.space")
    await runner.dispose()
    with pytest.raises(Exception, match=r"configuration\.vectors"):
        await open_spaces(tmp_path, vectors="Not A Space")


def keyword_search_broken(init: ProviderInit) -> Any:
    """The SQLite Provider whose keyword search fails, as a damaged index would."""
    adapter = SQLITE_PROVIDER.create(init)

    async def search(request: SearchRequest) -> SearchResult:
        raise ProviderError("unavailable", "the full-text index is damaged")

    adapter.search = search  # type: ignore[method-assign]
    return adapter


async def test_a_failed_keyword_search_fails_the_recall_as_itself(tmp_path: Path) -> None:
    broken = define_space_provider(
        {**SQLITE_PROVIDER.manifest.model_dump(), "type_id": "broken"},
        keyword_search_broken,
    )
    runner, _ = await open_with_meaning(
        tmp_path, plugin=WithProviders(broken), provider={"type": "broken"}
    )
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, MEMORIES[0])
        # the meaning half runs beside the keyword half; its failure is reported as the
        # Provider's, not as a group of concurrent errors
        with pytest.raises(RouteError) as failed:
            await recall(turn, "tea")
        assert failed.value.code == "unavailable"
        await turn.release()


async def waiting(runner: MemoryCompositionRunner) -> int:
    client = runner.management_client("source:spaces", ADA)
    return sum(space["waiting_for_vectors"] for space in (await client.read("inspect"))["spaces"])


async def reindex(runner: MemoryCompositionRunner) -> Any:
    client = runner.management_client("source:spaces", ADA)
    result = await client.mutate(
        "reindex", {}, confirmed=True, expected_revision=await client.revision()
    )
    return result.output


async def test_management_writes_give_their_memories_vectors_before_answering(
    tmp_path: Path,
) -> None:
    runner, _ = await open_with_meaning(tmp_path)
    async with runner:
        client = runner.management_client("source:spaces", ADA)
        await client.mutate(
            "import",
            {"space": "memories", "memories": [{"text": text} for text in MEMORIES[:3]]},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        await client.mutate(
            "remember",
            {"space": "memories", "text": MEMORIES[3]},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        assert await waiting(runner) == 0  # no recall ran: the writes embedded them


async def test_reindex_embeds_what_an_outage_left_without_any_recall(tmp_path: Path) -> None:
    runner, runtime = await open_with_meaning(tmp_path)
    async with runner:
        runtime.down = True
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        await turn.release()
        assert await reindex(runner) == {
            "space": f"{SPACE_ID}@1",
            "done": 0,
            "remaining": 4,
        }  # still down: nothing done, nothing lost
        runtime.down = False
        assert await reindex(runner) == {"space": f"{SPACE_ID}@1", "done": 4, "remaining": 0}
        assert await waiting(runner) == 0
        assert await reindex(runner) == {"space": f"{SPACE_ID}@1", "done": 0, "remaining": 0}


async def test_reindex_without_an_embedder_says_there_is_nothing_to_do(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        with pytest.raises(ManagementError) as refused:
            await reindex(runner)
    assert refused.value.code == "unsupported"


NEXT_ID = "test.concepts-next"


async def test_a_previous_space_serves_recall_until_the_new_one_is_complete(
    tmp_path: Path,
) -> None:
    runner, old = await open_with_meaning(tmp_path)
    async with runner:
        turn = await scope_turn(runner, ADA)
        for text in MEMORIES:
            await remember(turn, text)
        await turn.release()
    # a new model is installed beside the old one, and the Source is told to use it
    new = Concepts()
    new.down = True  # it cannot embed yet: the new space stays empty
    runner = MemoryCompositionRunner()
    await runner.mount(ConceptsPlugin(old), instance_id="concepts")
    await runner.mount(ConceptsPlugin(new, space_id=NEXT_ID, name="-next"), instance_id="next")
    await open_spaces(tmp_path, runner=runner, vectors=NEXT_ID)
    async with runner:
        turn = await scope_turn(runner, ADA)
        found = await recall(turn, "What does she drink? tea", limit=2)
        assert texts(found)[0] == "Ada's first cup every morning is chai."  # by meaning
        assert found.items[0].provenance["explain"]["keywords"] is None
        assert (old.queries, new.queries) == (1, 0)  # the old space served
        # a memory written meanwhile goes into the old space too, which stays whole
        await remember(turn, "Ada's feline sleeps all day.")
        await turn.release()
        directory = await runner.management_client("source:spaces", ADA).read("inspect")
        [entry] = directory["spaces"]
        assert (entry["meaning_space"], entry["waiting_for_vectors"]) == (f"{SPACE_ID}@1", 5)
        turn = await scope_turn(runner, ADA)
        pets = await recall(turn, "pet", limit=2)
        await turn.release()
        assert set(texts(pets)) == {
            "Ada's feline sleeps all day.",
            "Ada adopted a feline named Turing.",
        }

        new.down = False
        assert await reindex(runner) == {"space": f"{NEXT_ID}@1", "done": 5, "remaining": 0}
        directory = await runner.management_client("source:spaces", ADA).read("inspect")
        assert directory["spaces"][0]["meaning_space"] == f"{NEXT_ID}@1"
        turn = await scope_turn(runner, ADA)
        found = await recall(turn, "What does she drink? tea", limit=2)
        await turn.release()
        assert texts(found)[0] == "Ada's first cup every morning is chai."
        assert (old.queries, new.queries) == (2, 1)  # the new space serves now


async def test_a_space_the_store_never_held_does_not_serve(tmp_path: Path) -> None:
    old, new = Concepts(), Concepts()
    new.down = True
    runner = MemoryCompositionRunner()
    await runner.mount(ConceptsPlugin(old), instance_id="concepts")
    await runner.mount(ConceptsPlugin(new, space_id=NEXT_ID, name="-next"), instance_id="next")
    await open_spaces(tmp_path, runner=runner, vectors=NEXT_ID)
    async with runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, MEMORIES[0])
        await recall(turn, "What does she drink? tea", limit=2)
        await turn.release()
        directory = await runner.management_client("source:spaces", ADA).read("inspect")
    # the old embedder is installed, but the store never kept its vectors: it is not used,
    # not embedded into, and not registered by asking
    assert (old.calls, old.queries) == (0, 0)
    assert directory["spaces"][0]["meaning_space"] == f"{NEXT_ID}@1"
