"""The Node.js reference plugin: certified by the runner, and usable by a real turn."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import mnemon_example_focus as focus
import mnemon_remote
import pytest
from mnemon_remote import certify

from mnemon_testing import MemoryCompositionRunner

NODE_NOTES = Path(__file__).parents[1] / "examples" / "node-notes"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


async def test_the_node_plugin_is_certified() -> None:
    report = await certify(NODE_NOTES, plugin_output=io.BytesIO())
    statuses = {check["id"]: check["status"] for check in report["checks"]}
    assert report["certified"] is True, report
    assert set(statuses.values()) == {"pass"}, statuses
    invalid = next(c for c in report["checks"] if c["id"] == "invalid_request")
    for probe in (
        "undeclared_route",
        "undeclared_action",
        "invalid_input_mutate",
        "no_caller_secret",
        "wrong_caller_secret",
        "foreign_host",
        "text_plain_body",
    ):
        assert probe in invalid["note"]


async def test_a_turn_writes_and_reads_through_the_node_plugin() -> None:
    config = {"manifest": str(NODE_NOTES / "mnemon-source.yaml"), "launch": True}
    async with MemoryCompositionRunner() as runner:
        await runner.mount(mnemon_remote, instance_id="notes", config=config)
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        receipt = await turn.execute_action(
            "source:notes/add", {"text": "Ada likes Node."}, lambda o: True
        )
        assert receipt.completion == "committed"
        await turn.release()
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert [f.text for f in turn.view.fragments] == ["- Ada likes Node.\n"]
        evidence = await turn.execute_route("source:notes/read", {})
        assert [item.text for item in evidence.items] == ["- Ada likes Node.\n"]
        await turn.release()
        turn = await runner.begin_turn({"scope": {"user_id": "bob"}})
        assert turn.view.fragments == ()
        await turn.release()
