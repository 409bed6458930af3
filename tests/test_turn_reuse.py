"""What a turn reuses from earlier turns of its generation, and what it must never reuse.

A turn reuses checks and dumps only for values proven the same: the very same frozen model,
or plain JSON with the same canonical bytes that is equal to its own JSON. These tests fail
when a reuse would let a changed value through.
"""

from __future__ import annotations

import enum
import itertools
import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mnemon import CompositionRejected, MemoryHost, View, ViewRef
from mnemon.sdk import FactsRequest, ProjectionRequest, SourceFacts, ViewContribution
from tests.kit import FakeSource, Probe, fake_source, select_all, strategy_plugin


def plain_spec(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
    """The kit's select-all spec as a plain JSON dict, the way many Strategies return it."""
    return select_all(request, sources, contributions).model_dump(mode="json")


async def mounted(host: MemoryHost, compose: Any, probe: Probe | None = None) -> Probe:
    source, probe = fake_source(probe)
    await host.mount(source, instance_id="a")
    await host.mount(strategy_plugin(compose), instance_id="strategy")
    return probe


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(math.nan, id="nan-written-as-null"),
        pytest.param(math.inf, id="infinity-written-as-null"),
    ],
)
async def test_a_second_spec_that_only_its_json_matches_is_not_taken_as_the_first(
    second: float,
) -> None:
    calls = itertools.count()

    def drifting(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        spec = plain_spec(request, sources, contributions)
        spec["guidance"] = None if next(calls) % 2 == 0 else second
        return spec

    async with MemoryHost() as host:
        await mounted(host, drifting)
        with pytest.raises(CompositionRejected, match="ViewSpec"):
            async with host.turn(scope={"user_id": "u"}):
                pass


async def test_an_enum_in_place_of_the_same_text_is_validated_not_assumed() -> None:
    class Kind(enum.Enum):
        SELECT_ALL = "select-all"

    calls = itertools.count()

    def drifting(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        spec = plain_spec(request, sources, contributions)
        if next(calls) % 2:
            spec["strategy_type_id"] = Kind.SELECT_ALL
        return spec

    async with MemoryHost() as host:
        await mounted(host, drifting)
        with pytest.raises(CompositionRejected, match="strategy_type_id"):
            async with host.turn(scope={"user_id": "u"}):
                pass


async def test_a_spec_changed_in_place_by_the_second_call_is_not_deterministic() -> None:
    kept: dict[str, Any] = {}

    def mutating(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        if not kept:
            kept.update(plain_spec(request, sources, contributions))
        else:
            kept["explanation"] += "!"
        return kept

    async with MemoryHost() as host:
        await mounted(host, mutating)
        with pytest.raises(CompositionRejected, match="is not deterministic"):
            async with host.turn(scope={"user_id": "u"}):
                pass


async def test_a_plain_spec_served_again_selects_again_when_a_source_changed() -> None:
    # the Strategy returns the same bytes every turn; the Source's facts change under it
    probe = Probe()
    state = {"availability": "ready"}

    async def facts(source: FakeSource, request: FactsRequest) -> SourceFacts:
        return source.default_facts().model_copy(update=state)

    def fixed(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        return {
            "strategy_type_id": "select-all",
            "sources": [{"source_key": "source:a", "required": False, "route_ids": ["lookup"]}],
            "explanation": "always the same",
        }

    probe.on_facts = facts
    async with MemoryHost() as host:
        await mounted(host, fixed, probe)
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert [route.id for route in turn.view.routes] == ["source:a/lookup"]
        state["availability"] = "unavailable"
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert turn.view.routes == ()
            assert [d.code for d in turn.view.diagnostics] == ["source-unavailable"]
        state["availability"] = "ready"
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert [route.id for route in turn.view.routes] == ["source:a/lookup"]


async def test_facts_a_source_changes_in_place_are_checked_again() -> None:
    probe = Probe()
    shared: dict[str, Any] = {}

    async def facts(source: FakeSource, request: FactsRequest) -> dict[str, Any]:
        if not shared:
            shared.update(source.default_facts().model_dump(mode="json"))
        return shared  # the same dict every turn, changed between turns

    probe.on_facts = facts
    async with MemoryHost() as host:
        await mounted(host, None, probe)
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert turn.view.consistency[0].revision == "r1"
        shared["revision"] = "r2"
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert turn.view.consistency[0].revision == "r2"
        shared["role"] = "other"
        # facts that now contradict the manifest cost only their Source: unavailable, coded
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert turn.view.consistency == ()
            assert [(d.key, d.code) for d in turn.view.diagnostics] == [
                ("source:a", "source-facts-invalid")
            ]


def reusing_probe(reuse: bool) -> Probe:
    """A probe whose Source serves one facts and one contribution object, or new ones."""
    probe = Probe()
    made: dict[str, Any] = {}

    async def facts(source: FakeSource, request: FactsRequest) -> Any:
        if not reuse or "facts" not in made:
            made["facts"] = source.default_facts()
        return made["facts"]

    async def project(source: FakeSource, request: ProjectionRequest) -> Any:
        if not reuse or "contribution" not in made:
            made["contribution"] = source.default_contribution(request)
        return made["contribution"]

    probe.on_facts, probe.on_project = facts, project
    return probe


async def test_the_same_frozen_facts_and_contribution_give_the_same_view_as_new_ones() -> None:
    # one host reuses a Source's objects turn after turn, the other gets new equal ones
    views: list[View] = []
    for reuse in (True, False):
        async with MemoryHost() as host:
            await mounted(host, plain_spec, reusing_probe(reuse))
            for _ in range(3):
                async with host.turn(scope={"user_id": "u"}) as turn:
                    views.append(turn.view)
    assert len({view.id for view in views}) == 1
    assert len(views[0].grants) == 1
    assert len(views[0].fragments) == 1


async def test_the_models_a_turn_builds_equal_validated_ones() -> None:
    # the core builds requests and the View from values it checked, without validating again
    probe = Probe()
    seen: list[Any] = []

    async def facts(source: FakeSource, request: FactsRequest) -> SourceFacts:
        seen.append(request)
        return source.default_facts()

    async def project(source: FakeSource, request: ProjectionRequest) -> ViewContribution:
        seen.append(request)
        return source.default_contribution(request)

    probe.on_facts, probe.on_project = facts, project
    async with MemoryHost() as host:
        await mounted(host, None, probe)
        async with host.turn(scope={"user_id": "u"}) as turn:
            view = turn.view
            await turn.execute_route("source:a/lookup", {"query": "x"})
    seen.append(view)
    seen.append(probe.queries[0].view)
    assert [type(item) for item in seen] == [FactsRequest, ProjectionRequest, View, ViewRef]
    for item in seen:
        again = type(item).model_validate(item.model_dump())
        assert again == item
        assert repr(again) == repr(item)
        assert again.model_fields_set == item.model_fields_set
        assert list(vars(again)) == list(vars(item))


async def test_a_turn_released_in_a_cancelled_scope_still_disposes_its_retired_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def slow_dispose(self: FakeSource) -> None:
        await anyio.lowlevel.checkpoint()  # a real dispose waits for its store
        self.probe.disposed.append(self.key)

    monkeypatch.setattr(FakeSource, "dispose", slow_dispose)
    async with MemoryHost() as host:
        probe = await mounted(host, None)
        turn = await host.begin_turn({"scope": {"user_id": "u"}})
        other, _ = fake_source(type_id="other")
        await host.mount(other, instance_id="b")  # a new generation; the turn's is retired
        disposed = len(probe.disposed)  # a trial at mount makes and disposes one runtime
        assert len(probe.created) - disposed == 2  # the turn's and the new generation's
        with anyio.CancelScope() as scope:
            scope.cancel()
            await turn.release()
        assert len(probe.disposed) == disposed + 1
        assert turn.released
