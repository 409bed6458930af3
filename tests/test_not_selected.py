"""A serving Source the Strategy leaves out gets `source-not-selected`, with a reason code."""

from __future__ import annotations

from typing import Any

from mnemon import MemoryHost
from mnemon.sdk import ViewSpec
from tests.kit import fake_source, select_all, strategy_plugin


def choose_none(request: Any, sources: Any, contributions: Any) -> ViewSpec:
    return ViewSpec(strategy_type_id="select-all", explanation="nothing today")


def choose_first(request: Any, sources: Any, contributions: Any) -> ViewSpec:
    spec = select_all(request, sources, contributions)
    return spec.model_copy(update={"sources": spec.sources[:1]})


async def reasons(*sources: Any, **strategy: Any) -> tuple[dict[str, str], Any]:
    async with MemoryHost() as memory:
        for index, source in enumerate(sources):
            await memory.mount(source, instance_id=f"s{index}")
        await memory.mount(strategy_plugin(**strategy), instance_id="strategy")
        async with memory.turn() as turn:
            view = turn.view
    found = {
        d.key: d.message.rsplit("(", 1)[1].rstrip(")")
        for d in view.diagnostics
        if d.code == "source-not-selected"
    }
    return found, view


async def test_a_source_the_strategy_chose_not_to_use_is_named() -> None:
    found, view = await reasons(fake_source()[0], compose=choose_none)
    assert found == {"source:s0": "not-chosen"}
    (diagnostic,) = view.diagnostics
    assert diagnostic.message == (
        "Memory Source source:s0 is serving but memory Strategy strategy:strategy did not "
        "select it (not-chosen)"
    )


async def test_a_role_the_strategy_does_not_take_is_the_reason() -> None:
    notes, _ = fake_source(role="notes")
    other, _ = fake_source(role="todo", type_id="todo")
    found, _ = await reasons(notes, other, compose=choose_first, roles=("notes",))
    assert found == {"source:s1": "role-not-supported"}


async def test_the_strategys_source_limit_is_the_reason() -> None:
    first, _ = fake_source()
    second, _ = fake_source(type_id="second")
    found, _ = await reasons(first, second, compose=choose_first, max_sources=1)
    assert found == {"source:s1": "max-sources"}


async def test_selected_and_unavailable_sources_get_no_such_diagnostic() -> None:
    found, view = await reasons(fake_source()[0])
    assert found == {}
    assert view.diagnostics == ()
