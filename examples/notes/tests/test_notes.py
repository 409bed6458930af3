"""The notes example composes through the runner and pins exact snapshots."""

from __future__ import annotations

import hashlib
from pathlib import Path

import mnemon_example_focus as focus
import mnemon_example_notes as notes
import pytest

from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner


async def test_notes_compose_through_the_runner(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("The user prefers {{short}} answers.", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(notes, instance_id="notes", config={"path": str(path)})
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        turn = await runner.begin_turn()
        view = turn.view
        await turn.release()
    assert [(f.source_key, f.mode, f.text) for f in view.fragments] == [
        ("source:notes", "eager", "The user prefers {{short}} answers.")
    ]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert view.consistency[0].revision == f"sha256:{digest}"
    assert [route.id for route in view.routes] == ["source:notes/read"]
    assert [offer.id for offer in view.offers] == ["source:notes/replace"]
    assert str(tmp_path) not in view.model_dump_json()


async def test_each_turn_captures_its_own_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("first", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(notes, instance_id="notes", config={"path": str(path)})
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        first = await runner.begin_turn()
        path.write_text("second", encoding="utf-8")
        second = await runner.begin_turn()
        assert first.view.fragments[0].text == "first"
        assert second.view.fragments[0].text == "second"
        assert first.view.consistency[0].revision != second.view.consistency[0].revision
        await first.release()
        await second.release()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"path": "relative/notes.md"}, "must be an absolute path"),
        ({}, "a file path is required"),
        ({"path": "/tmp/n.md", "colour": "red"}, "unknown key 'colour'"),
    ],
    ids=["relative", "missing", "unknown-key"],
)
async def test_invalid_configuration_is_rejected_at_mount_and_nothing_is_published(
    config: dict[str, str], message: str
) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        before = runner.inspect()
        with pytest.raises(InstallError, match=message):
            await runner.mount(notes, instance_id="notes", config=config)
        after = runner.inspect()
    assert after["registry_revision"] == before["registry_revision"]
    assert after["entries"] == ["focus"]
    assert after["serving"] is None
