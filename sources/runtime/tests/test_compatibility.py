"""Stores written by earlier versions keep working: names, text, temporaries; any platform."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from runtime_kit import KEY, OFFER, allow, open_runtime

from mnemon import ActionError, render_wake
from mnemon_testing import MemoryCompositionRunner

STAMP = "2026-01-02T03:04:05.000006+00:00"


def earlier_name(values: dict[str, str]) -> str:
    """The file name the runtime Source gave a partition before it used the SDK's partitions."""
    canonical = orjson.dumps(values, option=orjson.OPT_SORT_KEYS)
    return f"scope-{hashlib.sha256(canonical).hexdigest()[:32]}.json"


def document(partition: dict[str, str], *texts: str) -> bytes:
    """A format 2 file as the runtime Source wrote it, with `texts` as user facts."""
    entries = [
        {"id": f"u{n}", "text": text, "importance": 3, "created_at": STAMP, "updated_at": STAMP}
        for n, text in enumerate(texts, start=1)
    ]
    body = {
        "format": "mnemon-runtime/2",
        "partition": partition,
        "sequence": len(texts),
        "user": {"next": len(texts) + 1, "entries": entries},
        "notes": [],
        "recent": [],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"


def plant(root: Path, partition: dict[str, str], *texts: str) -> Path:
    folder = root / "sources" / "runtime" / "runtime"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / earlier_name(partition)
    path.write_bytes(document(partition, *texts))
    return path


async def shown(runner: MemoryCompositionRunner, scope: dict[str, str]) -> list[str]:
    turn = await runner.begin_turn({"scope": scope})
    await turn.release()
    return [fragment.text for fragment in turn.view.fragments]


@pytest.mark.parametrize(
    ("config", "scope", "partition"),
    [
        ({}, {"user_id": "ada"}, {"user_id": "ada"}),
        (
            {},
            {"tenant_id": "acme", "user_id": "ada", "agent_id": "x"},
            {"tenant_id": "acme", "user_id": "ada"},
        ),
        (
            {"scope_keys": ["workspace", "user_id"]},
            {"user_id": "ada", "workspace": "billing", "session_id": "s"},
            {"user_id": "ada", "workspace": "billing"},
        ),
    ],
    ids=["user", "tenant-and-agent", "two-keys"],
)
async def test_a_store_written_under_the_earlier_names_is_found(
    tmp_path: Path, config: dict[str, Any], scope: dict[str, str], partition: dict[str, str]
) -> None:
    stored = plant(tmp_path, partition, "written before the port")
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path), **config})
        before = await shown(runner, scope)
        turn = await runner.begin_turn({"scope": scope})
        await turn.execute_action(
            OFFER, {"target": "user", "operation": "add", "text": "after"}, allow
        )
        await turn.release()
    assert before == ["User facts (runtime memory):\n- [u1] written before the port"]
    # the write went to the same file: one partition, one file, before and after
    assert sorted(p.name for p in stored.parent.glob("*.json")) == [stored.name]
    assert b'"after"' in stored.read_bytes()


async def test_text_stored_under_the_earlier_rule_keeps_loading_and_new_text_meets_the_rule(
    tmp_path: Path,
) -> None:
    # the earlier rule refused C0 controls only; a bidi override or a C1 control got in
    stored = plant(tmp_path, {"user_id": "ada"}, "Ada \u202eeta\u202c tea", "a\x85b")
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        wake = render_wake(turn.view)
        before = stored.read_bytes()
        value = {"target": "user", "operation": "add", "text": "new \u202e override"}
        with pytest.raises(ActionError) as refused:
            await turn.execute_action(OFFER, value, allow)
        await turn.release()
        output = await runner.management_client(KEY, {"user_id": "ada"}).read("read")
    assert output["status"] == "ok"
    assert [entry["text"] for entry in output["user"]] == ["Ada \u202eeta\u202c tea", "a\x85b"]
    assert "\u202e" not in wake  # shown as a visible escape, never acting on the reader
    assert "\\u202e" in wake
    assert refused.value.code == "invalid-input"
    assert stored.read_bytes() == before


async def test_a_temporary_the_earlier_writer_left_is_swept_by_the_next_write(
    tmp_path: Path,
) -> None:
    stored = plant(tmp_path, {"user_id": "ada"}, "committed")
    # exactly how the earlier writer named its temporary file
    handle, name = tempfile.mkstemp(prefix=f".{stored.name}.", suffix=".tmp", dir=stored.parent)
    os.close(handle)
    leftover = stored.parent / os.path.basename(name)
    leftover.write_bytes(b'{"format": "mnemon-runt')
    unrelated = stored.parent / f".{stored.name}.notes-of-mine.tmp"
    unrelated.write_bytes(b"not a temporary of the store")
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        await turn.execute_action(OFFER, {"target": "user", "operation": "add", "text": "x"}, allow)
        await turn.release()
    assert not leftover.exists()
    assert unrelated.exists()


def test_the_package_imports_where_there_is_no_fcntl() -> None:
    # Windows has no fcntl: the Source must import there and lock through mnemon.sdk.storage
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import mnemon_source_runtime\n"
        "print(mnemon_source_runtime.MANIFEST['type_id'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "runtime"
