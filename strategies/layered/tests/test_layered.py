"""The layered Strategy: composition, extensions, allocation and its turn policy."""

from __future__ import annotations

import itertools
from typing import Any

import mnemon_strategy_auto_capture as auto_capture
import mnemon_strategy_layered as layered
import mnemon_strategy_light_context as light_context
import mnemon_strategy_scoped as scoped
from hypothesis import given
from hypothesis import strategies as st

from mnemon import Scope, View, ViewBudget
from mnemon.sdk import (
    ComposeRequest,
    ExtensionContribution,
    QueryRequest,
    SourceAction,
    SourceCandidate,
    SourceFacts,
    SourceRoute,
)
from mnemon_testing import MemoryCompositionRunner, RunnerTurn, StubSource

ROLES = ("working-context", "narrative", "durable-evidence")


def stubs(**overrides: Any) -> dict[str, StubSource]:
    made = {
        "runtime": StubSource("working-context", text="w" * 50_000, actions=["mutate"]),
        "documents": StubSource(
            "narrative", text="n" * 50_000, routes=["search", "read"], actions=["create"]
        ),
        "spaces": StubSource(
            "durable-evidence",
            text="d" * 50_000,
            routes=["inspect", "recall", "related", "browse"],
            actions=["remember", "forget"],
        ),
    }
    made.update(overrides)
    return made


async def open_runner(
    sources: dict[str, StubSource], *extensions: tuple[Any, str, dict[str, Any]], order: str = "s"
) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    mounts: list[tuple[Any, str, dict[str, Any] | None]] = [
        (plugin, name, None) for name, plugin in sources.items()
    ]
    mounts.append((layered, "layered", None))
    mounts += list(extensions)
    if order == "reversed":
        mounts.reverse()
    for plugin, name, config in mounts:
        await runner.mount(plugin, instance_id=name, config=config)
    return runner


async def compose_view(runner: MemoryCompositionRunner, **request: Any) -> View:
    turn = await runner.begin_turn(request or None)
    view = turn.view
    await turn.release()
    return view


async def test_without_extensions_working_context_is_eager_with_ninety_percent() -> None:
    async with await open_runner(stubs()) as runner:
        view = await compose_view(runner, budget={"max_projection_characters": 10_000})
    shown = {f.source_key: (f.mode, len(f.text)) for f in view.fragments}
    assert shown == {
        "source:runtime": ("eager", 9_000),
        "source:documents": ("routed", 500),
        "source:spaces": ("routed", 500),
    }
    assert [r.id for r in view.routes] == [
        "source:documents/search",
        "source:spaces/inspect",
        "source:spaces/recall",
        "source:spaces/related",
    ]
    assert {o.id for o in view.offers} == {
        "source:runtime/mutate",
        "source:documents/create",
        "source:spaces/remember",
        "source:spaces/forget",
    }
    assert view.guidance is not None
    assert "at most once per turn" in (view.guidance.routing or "")
    assert view.guidance.reminders is not None
    assert view.guidance.reminders.read
    assert view.guidance.reminders.write


async def test_every_source_is_optional() -> None:
    sources = stubs(documents=StubSource("narrative", availability="unavailable"))
    async with await open_runner(sources) as runner:
        view = await compose_view(runner)
    assert {c.source_key for c in view.consistency} == {"source:runtime", "source:spaces"}
    assert "1 unavailable" in view.explanation


async def test_a_second_source_of_one_role_serves_and_one_of_them_is_written() -> None:
    more = StubSource("narrative", type_id="more", routes=["search"], actions=["create"])
    sources = stubs(more=more)
    async with await open_runner(sources) as runner:
        view = await compose_view(runner)
        await runner.mount(
            scoped,
            instance_id="scoped",
            config={"source_keys": ["source:runtime", "source:more", "source:documents"]},
        )
        selected = await compose_view(runner)
    assert [c.source_key for c in view.consistency] == [
        "source:runtime",
        "source:documents",
        "source:more",
        "source:spaces",
    ]
    assert {r.id for r in view.routes} >= {"source:documents/search", "source:more/search"}
    # a shared role writes to one Source: the first by key, and the View says so
    assert {o.source_key for o in view.offers} == {
        "source:runtime",
        "source:documents",
        "source:spaces",
    }
    assert "narrative writes go to source:documents, the first by key" in view.explanation
    # a selection still decides the order, and which Sources are written
    assert [c.source_key for c in selected.consistency] == [
        "source:runtime",
        "source:more",
        "source:documents",
    ]


async def test_the_view_is_independent_of_installation_order() -> None:
    views = []
    for order in ("s", "reversed"):
        async with await open_runner(stubs(), order=order) as runner:
            views.append(await compose_view(runner))
    assert views[0].id == views[1].id


async def test_selection_uses_one_priority_list_and_one_shared_allocation() -> None:
    extension = (
        scoped,
        "scoped",
        {
            "source_keys": ["source:spaces", "source:runtime", "source:documents"],
            "writable_source_keys": ["source:spaces"],
        },
    )
    async with await open_runner(stubs(), extension) as runner:
        view = await compose_view(runner, budget={"max_projection_characters": 1_000})
    assert [(f.source_key, f.mode, len(f.text)) for f in view.fragments] == [
        ("source:spaces", "routed", 50),
        ("source:runtime", "eager", 900),
        ("source:documents", "routed", 50),
    ]
    assert {o.source_key for o in view.offers} == {"source:spaces"}
    assert view.strategy_type_id == "layered"


async def test_an_unconfigured_scoped_selects_existing_instances_by_role_and_key() -> None:
    async with await open_runner(stubs(), (scoped, "scoped", None)) as runner:
        view = await compose_view(runner)
    assert [c.source_key for c in view.consistency] == [
        "source:runtime",
        "source:documents",
        "source:spaces",
    ]
    assert len(view.offers) == 4  # all writable


async def test_projection_caps_the_total() -> None:
    async with await open_runner(stubs(), (light_context, "light", None)) as runner:
        view = await compose_view(runner)
    assert sum(len(f.text) for f in view.fragments) == light_context.DEFAULT_CHARACTERS
    async with await open_runner(
        stubs(), (light_context, "light", {"max_projection_characters": 100})
    ) as runner:
        view = await compose_view(runner, budget={"max_projection_characters": 50})
    assert sum(len(f.text) for f in view.fragments) == 50


async def test_capture_adds_guidance_but_never_writes() -> None:
    sources = stubs()
    async with await open_runner(sources, (auto_capture, "capture", None)) as runner:
        view = await compose_view(runner)
    reminder = view.guidance.reminders.write if view.guidance and view.guidance.reminders else ""
    assert "Auto-capture" in (reminder or "")
    assert "source:spaces/remember" in (reminder or "")
    assert "source:runtime/mutate" not in (reminder or "")
    assert all(not stub.mutations for stub in sources.values())


async def test_enabling_and_disabling_an_extension_touches_only_its_contribution() -> None:
    async with await open_runner(stubs()) as runner:
        baseline = await compose_view(runner)
        unmount = await runner.mount(light_context, instance_id="light", config=None)
        lighter = await compose_view(runner)
        await unmount()
        restored = await compose_view(runner)
    assert lighter.id != baseline.id
    assert lighter.strategy_key == baseline.strategy_key == "strategy:layered"
    assert restored.id == baseline.id


@given(
    st.lists(st.sampled_from((*ROLES, "notes")), min_size=0, max_size=32),
    st.integers(min_value=1, max_value=10_000_000),
    st.booleans(),
)
def test_the_allocation_always_sums_to_the_budget(
    roles: list[str], budget: int, selected: bool
) -> None:
    shares = layered.allocation(roles, budget, selected=selected)
    assert len(shares) == len(roles)
    if roles:
        assert sum(shares) == budget
    assert all(share >= 0 for share in shares)


def test_the_allocation_keeps_its_weights() -> None:
    assert layered.allocation(list(ROLES), 1_000, selected=False) == (900, 50, 50)
    assert layered.allocation(["working-context", "narrative"], 1_000, selected=False) == (900, 100)
    assert layered.allocation(["narrative", "durable-evidence"], 1_001, selected=False) == (
        501,
        500,
    )
    assert layered.allocation(list(ROLES), 1_000, selected=True) == (900, 50, 50)
    assert layered.allocation(["narrative"] * 3, 10, selected=True) == (4, 3, 3)


# ---------------------------------------------------------------- the turn policy


def numbered(prefix: str, count: int, size: int = 100) -> Any:
    def items(request: QueryRequest) -> list[tuple[str, str]]:
        query = str(request.input.get("query", ""))
        return [(f"{prefix}{i}", f"{query} {prefix}{i} ".ljust(size, "x")) for i in range(count)]

    return items


async def policy_turn(**overrides: StubSource) -> tuple[MemoryCompositionRunner, RunnerTurn]:
    runner = await open_runner(stubs(**overrides))
    return runner, await runner.begin_turn()


async def test_one_documents_search_per_turn() -> None:
    documents = StubSource("narrative", routes=["search"], items=numbered("doc", 10, size=2_000))
    runner, turn = await policy_turn(documents=documents)
    first = await turn.execute_route("source:documents/search", {"query": "plan"})
    second = await turn.execute_route("source:documents/search", {"query": "other"})
    await runner.dispose()
    assert len(documents.queries) == 1
    route = documents.queries[0].route
    assert (route.max_results, route.max_characters) == (4, 6_000)
    assert len(first.items) == 3  # 3 x 2,000 characters fit in 6,000
    assert first.truncated
    assert second.items == ()
    assert second.output == {
        "status": "not-run",
        "reason": "documents were already searched this turn",
    }


async def test_the_recall_envelope() -> None:
    spaces = StubSource(
        "durable-evidence", routes=["recall", "related"], items=numbered("m", 10, size=700)
    )
    runner, turn = await policy_turn(spaces=spaces)
    first = await turn.execute_route("source:spaces/recall", {"query": "Deadline?"})
    replay = await turn.execute_route("source:spaces/recall", {"query": "deadline"})
    second = await turn.execute_route("source:spaces/recall", {"query": "billing"})
    third = await turn.execute_route("source:spaces/recall", {"query": "anything else"})
    await runner.dispose()
    assert len(spaces.queries) == 2
    limits = [(q.route.max_results, q.route.max_characters) for q in spaces.queries]
    assert limits[0] == (8, 3_600)
    assert limits[1] == (12 - len(first.items), 4_800 - sum(len(i.text) for i in first.items))
    assert len(first.items) == 5  # 5 x 700 = 3,500 characters: the characters bind, not 8
    assert replay.items == first.items
    assert replay.output == {"status": "replayed"}
    assert len(second.items) == 1  # 1,300 characters were left of the envelope's 4,800
    assert sum(len(i.text) for i in first.items + second.items) <= 4_800
    assert third.output == {"status": "not-run", "reason": "recall allows 2 attempts per turn"}


async def test_short_memories_fill_the_first_recall_up_to_eight() -> None:
    spaces = StubSource("durable-evidence", routes=["recall"], items=numbered("m", 20, size=100))
    runner, turn = await policy_turn(spaces=spaces)
    first = await turn.execute_route("source:spaces/recall", {"query": "deadline"})
    second = await turn.execute_route("source:spaces/recall", {"query": "billing"})
    routing = turn.view.guidance.routing if turn.view.guidance else ""
    await runner.dispose()
    assert len(first.items) == 8  # the count binds: 800 of 3,600 characters
    assert len(second.items) == 4  # 12 results at most across the envelope
    assert "the first returns up to 8 memories" in (routing or "")


async def test_recall_dedupes_by_content_and_drops_long_items() -> None:
    def items(request: QueryRequest) -> list[tuple[str, str]]:
        if request.input["query"] == "first":
            return [("a", "same text"), ("b", "y" * 1_201), ("c", "unique")]
        return [("d", "same text"), ("e", "fresh")]

    spaces = StubSource("durable-evidence", routes=["recall"], items=items)
    runner, turn = await policy_turn(spaces=spaces)
    first = await turn.execute_route("source:spaces/recall", {"query": "first"})
    second = await turn.execute_route("source:spaces/recall", {"query": "second"})
    await runner.dispose()
    assert [i.id for i in first.items] == ["a", "c"]
    assert first.truncated
    assert [i.id for i in second.items] == ["e"]
    assert second.truncated


async def test_related_only_for_ids_recall_returned_and_replayed() -> None:
    spaces = StubSource("durable-evidence", routes=["recall", "related"], items=numbered("m", 2))
    runner, turn = await policy_turn(spaces=spaces)
    refused = await turn.execute_route("source:spaces/related", {"id": "m0"})
    await turn.execute_route("source:spaces/recall", {"query": "q"})
    related = await turn.execute_route("source:spaces/related", {"id": "m0"})
    again = await turn.execute_route("source:spaces/related", {"id": "m0"})
    unknown = await turn.execute_route("source:spaces/related", {"id": "elsewhere"})
    await runner.dispose()
    assert refused.output["reason"] == "related accepts only ids this turn's recall returned"
    assert [q.route.route_id for q in spaces.queries] == ["recall", "related"]
    assert again.items == related.items
    assert again.output == {"status": "replayed"}
    assert unknown.output["status"] == "not-run"


async def test_each_turn_has_its_own_envelope() -> None:
    documents = StubSource("narrative", routes=["search"], items=numbered("doc", 1))
    async with await open_runner(stubs(documents=documents)) as runner:
        for _ in range(2):
            turn = await runner.begin_turn()
            await turn.execute_route("source:documents/search", {"query": "q"})
            await turn.release()
    assert len(documents.queries) == 2


# ---------------------------------------------------------------- purity


def candidate(
    key: str, role: str, *, routes: tuple[str, ...] = (), actions: tuple[str, ...] = ()
) -> SourceCandidate:
    schema = {"type": "object"}
    return SourceCandidate(
        key=key,
        package_name="mnemon-test",
        consistency="exact-snapshot",
        facts=SourceFacts(
            instance_key=key,
            type_id="t",
            role=role,
            availability="ready",
            revision="1",
            capabilities=("project", "search", "recall", "write"),
            route_ids=routes,
            action_ids=actions,
        ),
        routes=tuple(
            SourceRoute(source_key=key, id=r, description="d", capability="search",
                        input_schema=schema, max_calls=1, max_results=None, max_characters=None)
            for r in routes
        ),
        actions=tuple(
            SourceAction(source_key=key, id=a, description="d", capability="write",
                         input_schema=schema, authority=None)
            for a in actions
        ),
    )  # fmt: skip


def test_compose_is_independent_of_fact_order() -> None:
    sources = [
        candidate("source:w", "working-context", actions=("mutate",)),
        candidate("source:n", "narrative", routes=("search",)),
        candidate(
            "source:d", "durable-evidence", routes=("recall", "related"), actions=("remember",)
        ),
    ]
    selection = ExtensionContribution(
        instance_key="strategy-extension:s",
        type_id="scoped",
        slot="selection",
        value={"source_keys": ["source:d", "source:w"], "writable_source_keys": ["source:d"]},
    )
    request = ComposeRequest(scope=Scope(), scenario="t", budget=ViewBudget())
    for contributions in ((), (selection,)):
        specs = {
            layered.compose(request, tuple(order), contributions).model_dump_json()
            for order in itertools.permutations(sources)
        }
        assert len(specs) == 1
