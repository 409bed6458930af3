"""The Strategy composes real Views over stub Sources."""

from __future__ import annotations

import pytest
from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner, StubSource

import __PACKAGE__


async def test_every_available_source_is_selected_and_projected() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("notes", text="Ada likes tea."), instance_id="notes")
        await runner.mount(StubSource("docs", routes=["search"]), instance_id="docs")
        await runner.mount(StubSource("gone", availability="unavailable"), instance_id="gone")
        await runner.mount(__PACKAGE__, instance_id="strategy")
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        view = turn.view
        await turn.release()
    assert [c.source_key for c in view.consistency] == ["source:docs", "source:notes"]
    assert "Ada likes tea." in [fragment.text for fragment in view.fragments]
    assert [route.id for route in view.routes] == ["source:docs/search"]


async def test_routed_mode_is_honoured() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("notes", text="Ada likes tea."), instance_id="notes")
        await runner.mount(__PACKAGE__, instance_id="strategy", config={"mode": "routed"})
        turn = await runner.begin_turn()
        view = turn.view
        await turn.release()
    assert {fragment.mode for fragment in view.fragments} == {"routed"}


async def test_an_unknown_configuration_key_is_refused() -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match="unknown key 'colour'"):
            await runner.mount(__PACKAGE__, instance_id="strategy", config={"colour": "red"})
