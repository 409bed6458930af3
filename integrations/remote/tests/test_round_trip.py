"""The notes example served remotely composes the same View as in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import mnemon_example_focus as focus
import mnemon_example_notes as notes
import mnemon_remote
from mnemon_remote import RemoteSettings, create_app, define_remote_source
from remote_kit import TOKEN

from mnemon.sdk import PluginContext, install_memory
from mnemon_testing import MemoryCompositionRunner

FOCUS = {"source_keys": ["source:notes"]}


class InProcessRemote:
    """The remote Source over an ASGI transport: HTTP semantics, no socket."""

    def __init__(self, app: Any) -> None:
        self.transport = httpx.ASGITransport(app=app)

    def apply(self, ctx: PluginContext) -> None:
        settings = RemoteSettings(ctx.configuration, token=TOKEN)
        install_memory(ctx, sources=[define_remote_source(settings, self.transport)])


async def _turns(plugin: Any, config: dict[str, Any]) -> list[Any]:
    """Two turns: compose, write through the offer, read the route; then compose again."""
    outcomes: list[Any] = []
    async with MemoryCompositionRunner() as runner:
        await runner.mount(plugin, instance_id="notes", config=config)
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        outcomes.append(turn.view.digest)
        receipt = await turn.execute_action(
            "source:notes/add", {"text": "Ada prefers tea."}, lambda offer: True
        )
        outcomes.append((receipt.completion, receipt.revision))
        evidence = await turn.execute_route("source:notes/read", {})
        outcomes.append([item.text for item in evidence.items])
        await turn.release()
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        outcomes.append(turn.view.digest)
        outcomes.append([f.text for f in turn.view.fragments])
        await turn.release()
    return outcomes


def _remote_config(notes_plugin: Path, **where: Any) -> dict[str, Any]:
    return {"manifest": str(notes_plugin / "mnemon-source.yaml"), **where}


async def test_asgi_round_trip_composes_the_same_view(tmp_path: Path, notes_plugin: Path) -> None:
    local, remote = tmp_path / "local.md", tmp_path / "remote.md"
    local.write_text("The user is Ada.\n", encoding="utf-8")
    remote.write_text("The user is Ada.\n", encoding="utf-8")
    expected = await _turns(notes, {"path": str(local)})
    app = create_app(
        notes.NOTES_SOURCE,
        notes_plugin / "mnemon-source.yaml",
        token=TOKEN,
        configuration={"path": str(remote)},
    )
    plugin = InProcessRemote(app)
    got = await _turns(plugin, _remote_config(notes_plugin, endpoint="http://127.0.0.1:8400"))
    assert got == expected
    assert got[4] == ["The user is Ada.\n- Ada prefers tea.\n"]
    assert remote.read_text(encoding="utf-8") == local.read_text(encoding="utf-8")


async def test_launched_plugin_over_loopback_composes_the_same_view(
    tmp_path: Path, notes_plugin: Path
) -> None:
    local, remote = tmp_path / "local.md", tmp_path / "remote.md"
    local.write_text("Loopback.\n", encoding="utf-8")
    remote.write_text("Loopback.\n", encoding="utf-8")
    expected = await _turns(notes, {"path": str(local)})
    got = await _turns(
        mnemon_remote,
        _remote_config(notes_plugin, launch=True, configuration={"path": str(remote)}),
    )
    assert got == expected
