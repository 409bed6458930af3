"""The notes example composes through the runner and pins exact snapshots."""

from __future__ import annotations

import hashlib
from pathlib import Path

import mnemon_example_focus as focus
import mnemon_example_notes as notes
import pytest

from mnemon import ActionError, InstallError, ManagementError, RevisionConflict
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
    assert [offer.id for offer in view.offers] == ["source:notes/add", "source:notes/replace"]
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
        ({"path": ""}, "a file path is required"),
        ({"path": "/tmp/n.md", "colour": "red"}, r"notes configuration\.colour: unknown key"),
        ({"path": 7}, r"notes configuration\.path: must be a path"),
        ({"path": "/tmp/n.md", "data_dir": "/tmp"}, "either path or data_dir"),
        ({"data_dir": "relative"}, "data_dir: must be an absolute path"),
    ],
    ids=["relative", "empty", "unknown-key", "path-not-text", "both", "relative-data-dir"],
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


async def open_notes(runner: MemoryCompositionRunner, path: Path) -> None:
    await runner.mount(notes, instance_id="notes", config={"path": str(path)})
    await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})


async def test_a_turn_keeps_its_exact_snapshot_across_its_own_write(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("first", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        turn = await runner.begin_turn()
        assert turn.view.fragments[0].text == "first"
        receipt = await turn.execute_action(
            "source:notes/replace", {"text": "second"}, lambda offer: True
        )
        assert receipt.completion == "committed"
        assert receipt.status == "succeeded"
        assert receipt.committed_at is not None
        assert receipt.revision == "sha256:" + hashlib.sha256(b"second").hexdigest()
        evidence = await turn.execute_route("source:notes/read", {})
        assert [item.text for item in evidence.items] == ["first"]
        client = runner.management_client("source:notes")
        assert (await client.read("read"))["text"] == "second"
        await turn.release()
        following = await runner.begin_turn()
        assert following.view.fragments[0].text == "second"
        await following.release()
    assert path.read_text(encoding="utf-8") == "second"


async def test_management_replace_needs_confirmation_and_the_current_revision(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.md"
    path.write_text("v1", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        client = runner.management_client("source:notes")
        current = (await client.read("read"))["revision"]
        assert current == await client.revision()
        with pytest.raises(ManagementError, match="confirm"):
            await client.mutate("replace", {"text": "v2"}, expected_revision=current)
        result = await client.mutate(
            "replace", {"text": "v2"}, confirmed=True, expected_revision=current
        )
        with pytest.raises(RevisionConflict, match="revision conflict"):
            await client.mutate(
                "replace", {"text": "v3"}, confirmed=True, expected_revision=current
            )
        assert result.revision == (await client.read("read"))["revision"]
    assert path.read_text(encoding="utf-8") == "v2"


async def test_the_read_route_omits_a_pinned_text_larger_than_its_ceiling(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("n" * 500, encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        turn = await runner.begin_turn()
        evidence = await turn.execute_route("source:notes/read", {}, limits={"max_characters": 100})
        await turn.release()
    assert evidence.items == ()
    assert evidence.truncated


@pytest.mark.parametrize(
    "text",
    ["real note\n- forged note", "real note\r\n- forged note", "tab\tseparated"],
    ids=["newline", "crlf", "tab"],
)
async def test_add_refuses_text_that_would_span_lines_and_writes_nothing(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "notes.md"
    path.write_text("- kept\n", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        turn = await runner.begin_turn()
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:notes/add", {"text": text}, lambda offer: True)
        await turn.release()
    # one note is one line: nothing in the text may start a line that reads as another note
    assert path.read_text(encoding="utf-8") == "- kept\n"
    assert "forged" not in str(refused.value)


async def test_add_appends_exactly_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("- kept", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        turn = await runner.begin_turn()
        receipt = await turn.execute_action(
            "source:notes/add", {"text": "one line, with - dashes"}, lambda offer: True
        )
        await turn.release()
    assert receipt.completion == "committed"
    assert path.read_text(encoding="utf-8") == "- kept\n- one line, with - dashes\n"


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


async def test_partitioned_notes_are_kept_private(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(notes, instance_id="notes", config={"data_dir": str(tmp_path)})
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        receipt = await turn.execute_action(
            "source:notes/add", {"text": "tea, no sugar"}, lambda offer: True
        )
        await turn.release()
    assert receipt.completion == "committed"
    [written] = files_under(tmp_path)
    assert written.read_text(encoding="utf-8") == "- tea, no sugar\n"
    assert written.stat().st_mode & 0o777 == 0o600
    assert written.parent.stat().st_mode & 0o777 == 0o700


async def test_a_link_where_the_notes_file_belongs_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("- not yours\n", encoding="utf-8")
    path = tmp_path / "notes.md"
    path.symlink_to(target)
    async with MemoryCompositionRunner() as runner:
        await open_notes(runner, path)
        turn = await runner.begin_turn()
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:notes/replace", {"text": "new"}, lambda offer: True)
        await turn.release()
    assert "(unsafe-path)" in str(refused.value)
    assert "not yours" not in str(refused.value)
    assert target.read_text(encoding="utf-8") == "- not yours\n"
    assert path.is_symlink()
