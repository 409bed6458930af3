"""Routes pinned for a turn policy alone, and a policy's reads of sibling routes."""

from __future__ import annotations

from typing import Any

import pytest

from mnemon import CompositionRejected, Evidence, MemoryHost, RouteError, View
from mnemon.sdk import (
    ComposeRequest,
    ExtensionContribution,
    PolicyRequest,
    RouteReader,
    SourceCandidate,
    ViewContribution,
    ViewSpec,
)
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin


def front_and_hidden(
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
    *,
    both: bool = False,
) -> ViewSpec:
    """`source:a/lookup` for the model; `source:b/lookup` for the policy alone."""
    selections: list[dict[str, Any]] = []
    for source in sorted(sources, key=lambda s: s.key):
        if source.key == "source:a":
            selections.append({"source_key": source.key, "route_ids": ["lookup"]})
        else:
            hidden = {"source_key": source.key, "required": False, "policy_route_ids": ["lookup"]}
            if both:
                hidden["route_ids"] = ["lookup"]
            selections.append(hidden)
    return ViewSpec.model_validate(
        {"strategy_type_id": "select-all", "sources": selections, "explanation": "test"}
    )


class Joining:
    """A policy answering `source:a/lookup` from both Sources; it keeps what it was handed."""

    def __init__(self, view: View, siblings: int = 1) -> None:
        self.view = view
        self.siblings = siblings
        self.kept: list[RouteReader] = []

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        own = await read()
        other = read.sibling("source:b/lookup")
        self.kept.append(other)
        found = own.items
        for _ in range(self.siblings):
            found += (await other({"query": "from the policy"})).items
        return own.model_copy(update={"items": found})


async def open_host(
    host: MemoryHost, *, siblings: int = 1, b: Probe | None = None
) -> tuple[Probe, Probe, list[Joining]]:
    made: list[Joining] = []

    def create_turn(view: View) -> Joining:
        made.append(Joining(view, siblings))
        return made[-1]

    a_plugin, a = fake_source(Probe(text="alpha"))
    b_plugin, b = fake_source(b or Probe(text="beta"))
    await host.mount(a_plugin, instance_id="a")
    await host.mount(b_plugin, instance_id="b")
    await host.mount(
        strategy_plugin(front_and_hidden, create_turn=create_turn), instance_id="strategy"
    )
    return a, b, made


async def test_a_policy_answers_from_a_route_pinned_for_it_alone() -> None:
    async with MemoryHost() as host:
        a, b, _ = await open_host(host)
        turn = await host.begin_turn()
        view = turn.view
        evidence = await turn.execute_route("source:a/lookup", {"query": "q"})
        with pytest.raises(RouteError, match="is not in this View") as caught:
            await turn.execute_route("source:b/lookup", {"query": "q"})
        wake = turn.wake()
    assert [route.id for route in view.routes] == ["source:a/lookup"]
    assert [route.id for route in view.policy_routes] == ["source:b/lookup"]
    assert "source:b/lookup" not in wake
    assert caught.value.code == "unknown-route"
    assert [item.text for item in evidence.items] == ["alpha", "beta"]
    assert evidence.source_key == "source:a"  # it answers the route the model called
    (sibling,) = b.queries
    assert sibling.route.id == "source:b/lookup"
    assert sibling.grant.source_key == "source:b"  # that route's own grant
    assert sibling.grant.value["pinned"] == "beta"
    assert sibling.input == {"query": "from the policy"}
    assert [query.input for query in a.queries] == [{"query": "q"}]


async def test_a_sibling_counts_against_its_own_routes_calls() -> None:
    async with MemoryHost() as host:
        _, b, _ = await open_host(host, siblings=3)
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="'source:b/lookup': call budget is exhausted"):
            await turn.execute_route("source:a/lookup", {})
    assert len(b.queries) == 2  # the fake route allows 2 calls a turn


async def test_a_sibling_dies_with_the_reader_it_came_from() -> None:
    async with MemoryHost() as host:
        _, b, made = await open_host(host)
        turn = await host.begin_turn()
        await turn.execute_route("source:a/lookup", {})
        (kept,) = made[0].kept
        with pytest.raises(RouteError, match="used after it returned") as caught:
            await kept({"query": "late"})
    assert caught.value.code == "contract"
    assert len(b.queries) == 1


async def test_a_sibling_of_a_route_the_view_does_not_pin_is_refused() -> None:
    class Wandering:
        async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
            return await read.sibling("source:c/lookup")()

    async with MemoryHost() as host:
        plugin, _ = fake_source()
        await host.mount(plugin, instance_id="a")
        await host.mount(strategy_plugin(create_turn=lambda view: Wandering()), instance_id="s")
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="route 'source:c/lookup' is not in this View") as e:
            await turn.execute_route("source:a/lookup", {})
    assert e.value.code == "unknown-route"


async def test_policy_routes_need_a_turn_policy() -> None:
    async with MemoryHost() as host:
        for name in ("a", "b"):
            plugin, _ = fake_source()
            await host.mount(plugin, instance_id=name)
        await host.mount(strategy_plugin(front_and_hidden), instance_id="strategy")
        with pytest.raises(
            CompositionRejected, match="pins policy routes of source:b, but has no turn policy"
        ):
            await host.begin_turn()


async def test_a_route_is_either_for_the_model_or_for_the_policy_alone() -> None:
    def twice(*arguments: Any) -> ViewSpec:
        return front_and_hidden(*arguments, both=True)

    async with MemoryHost() as host:
        for name in ("a", "b"):
            plugin, _ = fake_source()
            await host.mount(plugin, instance_id=name)
        await host.mount(
            strategy_plugin(twice, create_turn=lambda view: Joining(view)), instance_id="s"
        )
        with pytest.raises(
            CompositionRejected,
            match="selected route 'lookup' of source:b both for the model and for its turn policy",
        ):
            await host.begin_turn()


async def test_a_policy_route_needs_its_sources_grant() -> None:
    async def no_grant(source: FakeSource, request: Any) -> ViewContribution:
        return ViewContribution()

    async with MemoryHost() as host:
        await open_host(host, b=Probe(text="beta", on_project=no_grant))
        turn = await host.begin_turn()
        view = turn.view
    assert view.policy_routes == ()
    assert [(d.key, d.code) for d in view.diagnostics] == [("source:b", "source-project-invalid")]


async def test_the_view_names_each_selected_sources_role() -> None:
    async with MemoryHost() as host:
        await open_host(host)
        turn = await host.begin_turn()
    assert [(c.source_key, c.role) for c in turn.view.consistency] == [
        ("source:a", "notes"),
        ("source:b", "notes"),
    ]
