"""The auto-capture extension: guidance only, and it needs durable evidence."""

from __future__ import annotations

from typing import Any

import mnemon_strategy_auto_capture as auto_capture
import mnemon_strategy_layered as layered
import pytest

from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner, StubSource


async def test_it_requires_a_durable_evidence_source() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("working-context"), instance_id="runtime")
        await runner.mount(layered, instance_id="layered")
        with pytest.raises(InstallError, match=r"requires source\.durable-evidence"):
            await runner.mount(auto_capture, instance_id="capture")


async def test_it_names_eligible_sources_and_actions_and_writes_nothing() -> None:
    spaces = StubSource("durable-evidence", routes=["recall"], actions=["remember", "forget"])
    async with MemoryCompositionRunner() as runner:
        await runner.mount(spaces, instance_id="spaces")
        await runner.mount(layered, instance_id="layered")
        await runner.mount(
            auto_capture, instance_id="capture", config={"instruction": "Keep decisions."}
        )
        turn = await runner.begin_turn()
        view = turn.view
        await turn.release()
    reminders = view.guidance.reminders if view.guidance else None
    assert reminders is not None
    assert "Keep decisions." in (reminders.write or "")
    assert "source:spaces/remember" in (reminders.write or "")
    assert "source:spaces/forget" not in (reminders.write or "")
    assert spaces.mutations == []
    assert view.strategy_key == "strategy:layered"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"action_ids": []}, "action_ids: must hold at least 1 item"),
        ({"instruction": "x" * 4_001}, "exceeds 4,000 characters"),
        ({"action_ids": "remember"}, "must be a list"),
    ],
    ids=["no-actions", "long-instruction", "string-actions"],
)
async def test_invalid_configuration_is_refused(config: dict[str, Any], message: str) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("durable-evidence"), instance_id="spaces")
        with pytest.raises(InstallError, match=message):
            await runner.mount(auto_capture, instance_id="capture", config=config)
