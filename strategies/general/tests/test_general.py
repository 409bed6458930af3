"""The general Strategy: resident weights, round-robin offers, configuration, empty Views."""

from __future__ import annotations

import itertools
from typing import Any

import mnemon_strategy_general as general
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon import InstallError, Scope, View, ViewBudget
from mnemon.sdk import ComposeRequest, SourceCandidate, define_memory_strategy, install_memory
from mnemon_testing import MemoryCompositionRunner, StubSource

GENERAL_SEEN: list[SourceCandidate] = []


class Recording:
    """The general Strategy, recording the candidates it is shown."""

    memory_plugin = general.memory_plugin

    def apply(self, ctx: Any) -> None:
        made = general.GENERAL_CONFIGURATION.create(ctx.configuration)

        def compose(request: Any, sources: Any, contributions: Any) -> Any:
            GENERAL_SEEN[:] = sources
            return made.compose(request, sources, contributions)

        install_memory(ctx, strategies=[define_memory_strategy(made.manifest, compose)])


async def compose(
    sources: dict[str, StubSource], config: dict[str, Any] | None = None, **request: Any
) -> View:
    async with MemoryCompositionRunner() as runner:
        for name, plugin in sources.items():
            await runner.mount(plugin, instance_id=name)
        await runner.mount(Recording(), instance_id="general", config=config)
        turn = await runner.begin_turn(request or None)
        view = turn.view
        await turn.release()
    return view


async def test_working_context_is_resident_by_default() -> None:
    view = await compose(
        {
            "a-runtime": StubSource("working-context", text="w" * 5_000),
            "b-notes": StubSource("notes", text="n" * 5_000),
            "c-docs": StubSource("narrative", text="d" * 5_000),
        },
        budget={"max_projection_characters": 1_100},
    )
    assert [(f.source_key, f.mode, len(f.text)) for f in view.fragments] == [
        ("source:a-runtime", "eager", 900),
        ("source:b-notes", "routed", 100),
        ("source:c-docs", "routed", 100),
    ]
    assert view.strategy_type_id == "general"


async def test_configured_resident_sources_come_first_in_their_order() -> None:
    view = await compose(
        {name: StubSource("notes", text="t" * 5_000) for name in ("a", "b", "c")},
        {"resident_source_keys": ["source:c", "source:b"], "instruction": "Be terse."},
        budget={"max_projection_characters": 1_900},
    )
    assert [(f.source_key, f.mode, len(f.text)) for f in view.fragments] == [
        ("source:c", "eager", 900),
        ("source:b", "eager", 900),
        ("source:a", "routed", 100),
    ]
    assert view.guidance is not None
    assert view.guidance.system == "Be terse."


async def test_routes_and_actions_are_dealt_round_robin_within_the_maxima() -> None:
    many = [f"r{i}" for i in range(40)]
    sources = {
        "a": StubSource("notes", routes=["search", *many[:39]]),
        "b": StubSource("notes", routes=["recall"]),
        "c": StubSource("notes", routes=["read", *many[:30]], actions=["store"]),
    }
    view = await compose(sources)
    per_source: dict[str, list[str]] = {}
    for route in view.routes:
        per_source.setdefault(route.source_key, []).append(route.route_id)
    assert len(view.routes) == 64
    assert per_source["source:b"] == ["recall"]
    assert per_source["source:a"][0] == "search"
    assert per_source["source:c"][0] == "read"
    assert abs(len(per_source["source:a"]) - len(per_source["source:c"])) <= 1
    assert [o.id for o in view.offers] == ["source:c/store"]


@given(
    st.lists(st.integers(min_value=0, max_value=80), min_size=0, max_size=32),
    st.integers(min_value=0, max_value=100),
)
def test_dealing_gives_everyone_a_first_before_anyone_a_second(
    counts: list[int], limit: int
) -> None:
    offers = [[f"{i}-{j}" for j in range(count)] for i, count in enumerate(counts)]
    dealt = general.deal_round_robin(offers, limit)
    assert sum(map(len, dealt)) == min(limit, sum(counts))
    for index, items in enumerate(dealt):
        assert items == offers[index][: len(items)]
    lengths = [len(items) for items in dealt]
    for index, length in enumerate(lengths):
        # a Source short of its offers is at most one behind any other that got more
        if length < counts[index]:
            assert all(other <= length + 1 for other in lengths)


async def test_with_nothing_admitted_it_says_so_instead_of_failing() -> None:
    view = await compose(
        {"a": StubSource("notes", availability="unavailable")}, {"instruction": "Help."}
    )
    assert view.fragments == ()
    assert view.guidance is not None
    assert view.guidance.system is not None
    assert "No memory Source is available" in view.guidance.system
    assert view.guidance.system.startswith("Help.")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"resident_source_keys": ["source:a", "source:a"]}, "items must be unique"),
        ({"instruction": "x" * 4_001}, "exceeds 4,000 characters"),
        ({"resident": ["source:a"]}, "unknown key"),
    ],
    ids=["duplicate-resident", "long-instruction", "unknown-key"],
)
async def test_invalid_configuration_is_refused_at_mount(
    config: dict[str, Any], message: str
) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match=message):
            await runner.mount(general, instance_id="general", config=config)
        assert runner.inspect()["registry_revision"] == 0


async def test_the_view_does_not_depend_on_fact_or_installation_order() -> None:
    made = {
        "x": StubSource("notes", text="x" * 100, routes=["search"]),
        "a": StubSource("narrative", text="a" * 100, routes=["recall"], actions=["remember"]),
        "m": StubSource("working-context", text="m" * 100),
    }
    first = await compose(made)
    second = await compose(dict(reversed(list(made.items()))))
    assert first.id == second.id
    specs = set()
    request = ComposeRequest(scope=Scope(), scenario="t", budget=ViewBudget())
    candidates = list(GENERAL_SEEN)
    for order in itertools.permutations(candidates):
        specs.add(
            general.compose(
                general.GeneralConfiguration(), request, tuple(order), ()
            ).model_dump_json()
        )
    assert len(specs) == 1


async def test_with_nothing_admitted_and_no_instruction_the_guidance_is_only_the_notice() -> None:
    view = await compose({"a": StubSource("notes", availability="unavailable")})
    assert view.guidance is not None
    assert view.guidance.system == (
        "No memory Source is available for this turn; answer without memory."
    )
