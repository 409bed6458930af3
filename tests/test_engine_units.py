"""Engine unit checks that the public API cannot reach on purpose."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from mnemon import MemoryHost, RouteError
from mnemon._engine.assembly import PinnedView
from mnemon._engine.execution import TurnExecution
from tests.kit import fake_source, strategy_plugin


async def test_a_view_of_another_generation_cannot_execute() -> None:
    source, probe = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            pinned = turn._pinned
            stranger = BaseModel.model_copy(
                pinned.view, update={"generation_id": "generation:elsewhere"}
            )
            execution = TurnExecution(
                PinnedView(stranger, pinned.generation, pinned.grants, pinned.strategy)
            )
            with pytest.raises(RouteError, match="belongs to generation generation:elsewhere"):
                await execution.execute_route("source:a/lookup", {})
    assert probe.queries == []
