"""The light-context extension: a capped projection budget, strictly validated."""

from __future__ import annotations

from typing import Any

import mnemon_strategy_layered as layered
import mnemon_strategy_light_context as light_context
import pytest

from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner, StubSource


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "non-finite number nan"),
        (float("inf"), "non-finite number inf"),
        (float("-inf"), "non-finite number -inf"),
        (0, "must be between 1 and 10000000"),
        (-5, "must be between 1 and 10000000"),
        (2.5, "must be an integer"),
        (10_000_001, "must be between 1 and 10000000"),
        ("4096", "must be an integer"),
    ],
    ids=["nan", "inf", "-inf", "zero", "negative", "fraction", "too-large", "text"],
)
async def test_invalid_budgets_are_refused(value: Any, message: str) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match=message):
            await runner.mount(
                light_context, instance_id="light", config={"max_projection_characters": value}
            )
        assert runner.inspect()["registry_revision"] == 0


async def test_the_default_caps_at_4096_and_disabling_restores_the_budget() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("working-context", text="w" * 20_000), instance_id="runtime")
        await runner.mount(layered, instance_id="layered")
        unmount = await runner.mount(light_context, instance_id="light")
        turn = await runner.begin_turn()
        capped = sum(len(f.text) for f in turn.view.fragments)
        await turn.release()
        await unmount()
        turn = await runner.begin_turn()
        full = sum(len(f.text) for f in turn.view.fragments)
        await turn.release()
    assert capped == 4_096
    assert full == 16_000
