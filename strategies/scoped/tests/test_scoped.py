"""The scoped extension: exact keys in priority order, an optional writable subset."""

from __future__ import annotations

from typing import Any

import mnemon_strategy_layered as layered
import mnemon_strategy_scoped as scoped
import pytest

from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner, StubSource


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"writable_source_keys": ["source:a"]}, "needs source_keys beside it"),
        (
            {"source_keys": ["source:a"], "writable_source_keys": ["source:b"]},
            r"writable_source_keys\[0\]: must be one of source_keys",
        ),
        ({"source_keys": ["source:a"] * 2}, "items must be unique"),
        ({"source_keys": [f"source:{i}" for i in range(33)]}, "at most 32 items"),
        ({"sources": []}, "unknown key"),
    ],
    ids=["writable-alone", "writable-outside", "duplicates", "too-many", "unknown"],
)
async def test_invalid_configuration_is_refused(config: dict[str, Any], message: str) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match=message):
            await runner.mount(scoped, instance_id="scoped", config=config)


async def test_scoped_never_changes_the_selected_strategy_and_creates_no_storage(
    tmp_path: Any,
) -> None:
    notes = StubSource("working-context", actions=["mutate"])
    async with MemoryCompositionRunner() as runner:
        await runner.mount(notes, instance_id="notes")
        await runner.mount(layered, instance_id="layered")
        await runner.mount(
            scoped,
            instance_id="scoped",
            config={"source_keys": ["source:notes"], "writable_source_keys": []},
        )
        turn = await runner.begin_turn()
        view = turn.view
        await turn.release()
    assert view.strategy_key == "strategy:layered"
    assert view.offers == ()
    assert [e.instance_key for e in view.extensions] == ["strategy-extension:scoped"]
    assert list(tmp_path.iterdir()) == []
