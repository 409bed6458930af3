"""Several long-term memory Sources under the layered Strategy: one recall, fused, one writer."""

from __future__ import annotations

import itertools
from typing import Any

import mnemon_strategy_auto_capture as auto_capture
import mnemon_strategy_layered as layered
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon import DefinitionError, EvidenceItem, RouteError, Scope, SourceError, View, ViewBudget
from mnemon.sdk import ComposeRequest, QueryRequest
from mnemon_testing import MemoryCompositionRunner, StubSource

from .test_layered import candidate

Items = list[tuple[str, str]]


def memory(role: str = "durable-evidence", **options: Any) -> StubSource:
    return StubSource(role, **options)


def sources(**items: Any) -> dict[str, StubSource]:
    """Runtime, documents, and three long-term memories: spaces, archive (recall), mem0 (search)."""
    return {
        "runtime": StubSource("working-context", text="w" * 2_000, actions=["mutate"]),
        "documents": StubSource(
            "narrative", routes=["search"], actions=["create"], items=items.get("documents", ())
        ),
        "spaces": memory(
            type_id="spaces",
            text="spaces cover",
            routes=["inspect", "recall", "related"],
            actions=["remember", "forget"],
            items=items.get("spaces", ()),
        ),
        "archive": memory(
            type_id="archive",
            text="archive cover",
            routes=["recall"],
            actions=["store"],
            items=items.get("archive", ()),
        ),
        "mem0": memory(
            type_id="mem0", routes=["search"], actions=["ingest"], items=items.get("mem0", ())
        ),
    }


async def open_runner(
    stubs: dict[str, StubSource], config: dict[str, Any] | None = None, *extensions: Any
) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    for name, stub in stubs.items():
        await runner.mount(stub, instance_id=name)
    await runner.mount(layered, instance_id="layered", config=config)
    for plugin, name, extension_config in extensions:
        await runner.mount(plugin, instance_id=name, config=extension_config)
    return runner


SPACES_WRITES = {"write_sources": ["source:spaces"]}


async def compose_view(runner: MemoryCompositionRunner) -> View:
    turn = await runner.begin_turn({"budget": {"max_projection_characters": 1_000}})
    view = turn.view
    await turn.release()
    return view


# ---------------------------------------------------------------------- the View


async def test_one_recall_for_the_model_and_the_others_read_through_it() -> None:
    async with await open_runner(sources(), SPACES_WRITES) as runner:
        view = await compose_view(runner)
    assert [r.id for r in view.routes] == [
        "source:documents/search",
        "source:spaces/inspect",
        "source:spaces/recall",
        "source:spaces/related",
    ]
    assert [r.id for r in view.policy_routes] == ["source:archive/recall", "source:mem0/search"]
    assert {o.source_key for o in view.offers} == {
        "source:runtime",
        "source:documents",
        "source:spaces",
    }
    # the same projection as for one Source, within the same budget
    fragments = {f.source_key: (f.mode, len(f.text)) for f in view.fragments}
    assert sum(length for _, length in fragments.values()) <= 1_000
    assert fragments["source:runtime"] == ("eager", 900)
    assert {key for key, (mode, _) in fragments.items() if mode == "routed"} == {
        "source:documents",
        "source:spaces",
        "source:archive",
        "source:mem0",
    }
    routing = view.guidance.routing if view.guidance else ""
    assert (
        "Recall through source:spaces/recall reads all 3 long-term memory Sources at once "
        "(source:spaces, source:archive, source:mem0)" in (routing or "")
    )
    assert "recall reads 3 long-term memory Sources" in view.explanation


async def test_without_write_sources_the_first_by_key_is_written_and_said() -> None:
    async with await open_runner(sources()) as runner:
        view = await compose_view(runner)
    evidence = {o.source_key for o in view.offers} - {"source:runtime", "source:documents"}
    assert evidence == {"source:archive"}
    # the model recalls where it writes
    assert "source:archive/recall" in [r.id for r in view.routes]
    assert [r.id for r in view.policy_routes] == ["source:mem0/search", "source:spaces/recall"]
    assert "durable-evidence writes go to source:archive, the first by key" in view.explanation


async def test_the_write_target_does_not_move_when_it_is_down() -> None:
    stubs = sources()
    stubs["spaces"].availability = "unavailable"
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        view = await compose_view(runner)
    assert {o.source_key for o in view.offers} == {"source:runtime", "source:documents"}
    # recall still reads what serves, through the first of them
    assert "source:archive/recall" in [r.id for r in view.routes]
    assert [r.id for r in view.policy_routes] == ["source:mem0/search"]


async def test_a_write_source_not_installed_is_noted() -> None:
    config = {"write_sources": ["source:spaces", "source:gone"]}
    async with await open_runner(sources(), config) as runner:
        view = await compose_view(runner)
    assert "1 write Source(s) not installed" in view.explanation


def test_write_sources_is_checked_when_the_entry_is_read() -> None:
    with pytest.raises(DefinitionError, match=r"layered configuration\.write_sources"):
        layered.LAYERED_CONFIGURATION.create({"write_sources": "source:spaces"})
    with pytest.raises(DefinitionError, match=r"layered configuration\.writes: unknown key"):
        layered.LAYERED_CONFIGURATION.create({"writes": ["source:spaces"]})


async def test_capture_names_only_the_write_target() -> None:
    capture = (auto_capture, "capture", {"action_ids": ["remember", "store", "ingest"]})
    async with await open_runner(sources(), SPACES_WRITES, capture) as runner:
        view = await compose_view(runner)
    reminder = view.guidance.reminders.write if view.guidance and view.guidance.reminders else ""
    assert "source:spaces/remember" in (reminder or "")
    assert "source:archive/store" not in (reminder or "")
    assert "source:mem0/ingest" not in (reminder or "")


def test_compose_is_independent_of_fact_order_with_several_of_a_role() -> None:
    found = ("recall", "related")
    candidates = [
        candidate("source:w", "working-context", actions=("mutate",)),
        candidate("source:d", "durable-evidence", routes=found, actions=("remember",)),
        candidate("source:e", "durable-evidence", routes=("recall",), actions=("store",)),
        candidate("source:f", "durable-evidence", routes=("search",), actions=("ingest",)),
        candidate("source:n", "narrative", routes=("search",)),
        candidate("source:m", "narrative", routes=("search",)),
    ]
    request = ComposeRequest(scope=Scope(), scenario="t", budget=ViewBudget())
    for targets in ((), ("source:e",)):
        specs = {
            layered.compose(request, tuple(order), (), write_sources=targets).model_dump_json()
            for order in itertools.permutations(candidates)
        }
        assert len(specs) == 1


# ---------------------------------------------------------------------- the fused recall


def fixed(pairs: Items) -> Any:
    def items(request: QueryRequest) -> Items:
        return pairs

    return items


async def test_recall_fuses_by_rank_without_duplicates_and_names_its_sources() -> None:
    stubs = sources(
        spaces=fixed([("s-a", "Ada drinks tea."), ("s-b", "Ada's cat is Io."), ("s-c", "C")]),
        archive=fixed([("r-b", "ada's CAT is io"), ("r-d", "D")]),
        mem0=fixed([("n-e", "E"), ("n-a", "Ada drinks tea")]),
    )
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        turn = await runner.begin_turn()
        found = await turn.execute_route("source:spaces/recall", {"query": "Ada?", "limit": 5})
        await turn.release()
    # tea: 1/61 + 1/62 (spaces 1st, mem0 2nd) ties with the cat: 1/62 + 1/61 (spaces 2nd,
    # archive 1st); the better single rank ties too, so the earlier Source wins: spaces
    assert [item.id for item in found.items] == ["s-a", "r-b", "n-e", "r-d", "s-c"]
    cat = found.items[1]
    assert cat.text == "ada's CAT is io"  # the best-ranked copy's text
    assert cat.provenance["source_key"] == "source:archive"
    assert cat.provenance["sources"] == (
        {"source_key": "source:spaces", "id": "s-b", "rank": 2, "score_scale": "unstated"},
        {"source_key": "source:archive", "id": "r-b", "rank": 1, "score_scale": "unstated"},
    )
    assert cat.provenance["fusion"] == {
        "method": "reciprocal-rank",
        "k": 60,
        "score": round(1 / 61 + 1 / 62, 6),
    }
    assert found.source_key == "source:spaces"
    assert found.output == {  # frozen JSON: arrays are tuples
        "status": "fused",
        "sources": ("source:spaces", "source:archive", "source:mem0"),
    }
    # the front read gets the model's input; the others the query alone, in the same envelope
    assert [q.input for q in stubs["spaces"].queries] == [{"query": "Ada?", "limit": 5}]
    for name in ("archive", "mem0"):
        (asked,) = stubs[name].queries
        assert asked.input == {"query": "Ada?"}
        assert (asked.route.max_results, asked.route.max_item_characters) == (8, 1_200)


def numbered(prefix: str, count: int, size: int = 100) -> Any:
    def items(request: QueryRequest) -> Items:
        query = str(request.input.get("query", ""))
        return [(f"{prefix}{i}", f"{query} {prefix}{i} ".ljust(size, "x")) for i in range(count)]

    return items


async def test_several_sources_share_one_envelope() -> None:
    stubs = sources(
        spaces=numbered("s", 8), archive=numbered("r", 8), mem0=numbered("n", 8, size=700)
    )
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        turn = await runner.begin_turn()
        first = await turn.execute_route("source:spaces/recall", {"query": "deadline"})
        again = await turn.execute_route("source:spaces/recall", {"query": "Deadline!"})
        second = await turn.execute_route("source:spaces/recall", {"query": "billing"})
        third = await turn.execute_route("source:spaces/recall", {"query": "more"})
        await turn.release()
    assert len(first.items) == 8  # 24 found, 8 admitted: the first attempt's count
    assert first.truncated
    assert sum(len(i.text) for i in first.items) <= 3_600
    assert again.items == first.items
    assert again.output == {"status": "replayed"}
    assert len(first.items) + len(second.items) == 12  # the turn's 12 results in all
    assert third.output == {"status": "not-run", "reason": "recall allows 2 attempts per turn"}
    assert [len(stub.queries) for stub in (stubs["spaces"], stubs["archive"], stubs["mem0"])] == [
        2,
        2,
        2,
    ]


async def test_a_failing_source_costs_only_its_results() -> None:
    def down(request: QueryRequest) -> Items:
        raise SourceError("provider_error", "the backend at http://user:pw@host is down")

    stubs = sources(spaces=fixed([("s-a", "A")]), archive=down, mem0=fixed([("n-b", "B")]))
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        turn = await runner.begin_turn()
        found = await turn.execute_route("source:spaces/recall", {"query": "q"})
        await turn.release()
    assert [item.id for item in found.items] == ["s-a", "n-b"]
    assert found.output == {
        "status": "fused",
        "sources": ("source:spaces", "source:mem0"),
        "failed": ({"source_key": "source:archive", "code": "provider_error"},),
    }
    assert "user:pw" not in str(found.model_dump())


async def test_when_every_source_fails_the_recall_fails() -> None:
    def down(request: QueryRequest) -> Items:
        raise SourceError("timeout", "slow")

    stubs = sources(spaces=down, archive=down, mem0=down)
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        turn = await runner.begin_turn()
        with pytest.raises(RouteError) as caught:
            await turn.execute_route("source:spaces/recall", {"query": "q"})
        await turn.release()
    assert caught.value.code == "timeout"


async def test_related_accepts_the_front_sources_own_ids_from_a_fused_recall() -> None:
    stubs = sources(spaces=fixed([("s-a", "A")]), archive=fixed([("r-b", "B")]))
    async with await open_runner(stubs, SPACES_WRITES) as runner:
        turn = await runner.begin_turn()
        await turn.execute_route("source:spaces/recall", {"query": "q"})
        related = await turn.execute_route("source:spaces/related", {"id": "s-a"})
        foreign = await turn.execute_route("source:spaces/related", {"id": "r-b"})
        await turn.release()
    assert related.output is None
    # r-b is the archive's id: the spaces Source has no memory by that name
    assert foreign.output == {
        "status": "not-run",
        "reason": "related accepts only ids this turn's recall returned",
    }


async def test_a_long_term_memorys_search_is_recalled_not_limited_as_documents() -> None:
    stubs = {
        "documents": StubSource("narrative", routes=["search"], items=numbered("d", 2)),
        "mem0": memory(type_id="mem0", routes=["search"], items=numbered("n", 20)),
    }
    async with await open_runner(stubs) as runner:
        turn = await runner.begin_turn()
        await turn.execute_route("source:documents/search", {"query": "plan"})
        recalled = await turn.execute_route("source:mem0/search", {"query": "plan"})
        again = await turn.execute_route("source:mem0/search", {"query": "budget"})
        await turn.release()
    assert len(recalled.items) == 8  # the recall envelope's first attempt, not 4 documents
    assert len(again.items) == 4
    (asked, _) = stubs["mem0"].queries
    assert asked.route.max_results == 8


# ---------------------------------------------------------------------- fuse itself


texts = st.text(alphabet="abAB .!", min_size=1, max_size=6)
answers = st.lists(
    st.lists(texts, max_size=6).map(
        lambda found: [EvidenceItem(id=f"i{n}", text=text) for n, text in enumerate(found)]
    ),
    min_size=1,
    max_size=4,
)


@given(answers)
def test_fuse_keeps_one_result_per_text_and_every_source_that_returned_it(
    lists: list[list[EvidenceItem]],
) -> None:
    named = [(f"source:{n}", items) for n, items in enumerate(lists)]
    fused = layered.fuse(named)
    keys = [layered.normalized_query(item.text) or item.text for item in fused]
    assert len(keys) == len(set(keys))
    returned = {
        (key, layered.normalized_query(item.text) or item.text)
        for key, items in named
        for item in items
    }
    listed = {
        (entry["source_key"], layered.normalized_query(item.text) or item.text)
        for item in fused
        for entry in item.provenance["sources"]
    }
    assert listed == returned
    scores = [item.provenance["fusion"]["score"] for item in fused]
    assert scores == sorted(scores, reverse=True)
    assert layered.fuse(named) == fused  # deterministic
