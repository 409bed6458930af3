"""Several OS processes on one runtime store: nothing lost, nothing torn, even under SIGKILL."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio.to_thread
import orjson
import pytest
from runtime_kit import KEY, OFFER, allow, open_runtime
from runtime_writer import PADDING, entry_text

from mnemon_testing import MemoryCompositionRunner

WRITER = Path(__file__).with_name("runtime_writer.py")
ADA = {"user_id": "ada"}


def start(config: dict[str, Any], prefix: str, count: int, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(WRITER),
            orjson.dumps(config).decode(),
            "ada",
            prefix,
            str(count),
            *options,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdout is not None
    for seen in process.stdout:
        if seen.strip() == line:
            return
    raise AssertionError(f"the writer ended (rc {process.wait()}) before printing {line!r}")


def leftovers(root: Path) -> list[Path]:
    return list(root.rglob("*.tmp"))


def stored_file(root: Path) -> Path:
    (path,) = root.rglob("*.json")
    return path


async def read_entries(root: Path) -> list[dict[str, Any]]:
    """The memory entries as a fresh host in this process finds them."""
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(root)})
        output = await runner.management_client(KEY, ADA).read("read")
    assert output["status"] == "ok"
    entries: list[dict[str, Any]] = output["memory"]
    return entries


def numbers_of(entries: list[dict[str, Any]], prefix: str) -> list[int]:
    """The write numbers of the entries; every text must be a whole record of this prefix."""
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)-{PADDING}$")
    numbers = []
    for entry in entries:
        match = pattern.match(entry["text"])
        assert match, f"a partial or foreign record: {entry['text'][:60]!r}"
        numbers.append(int(match[1]))
    return numbers


async def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    config = {"data_dir": str(tmp_path)}
    prefixes = [f"p{index}" for index in range(4)]

    def run() -> list[int]:
        with ExitStack() as stack:
            writers = [
                stack.enter_context(start(config, prefix, 25, "--wait")) for prefix in prefixes
            ]
            for writer in writers:
                wait_for(writer, "ready")
            for writer in writers:  # every writer is mounted: they start writing together
                assert writer.stdin is not None
                writer.stdin.write("go\n")
                writer.stdin.flush()
            return [writer.wait(timeout=60) for writer in writers]

    assert await anyio.to_thread.run_sync(run) == [0, 0, 0, 0]
    body = json.loads(stored_file(tmp_path).read_bytes())
    entries = await read_entries(tmp_path)
    assert body["sequence"] == 100
    assert len({entry["id"] for entry in entries}) == 100
    for prefix in prefixes:
        mine = [e for e in entries if e["text"].startswith(f"{prefix}-")]
        assert sorted(numbers_of(mine, prefix)) == list(range(25)), f"writes of {prefix} lost"
    assert not leftovers(tmp_path)


async def test_a_writer_killed_at_any_moment_leaves_a_store_that_opens_cleanly(
    tmp_path: Path,
) -> None:
    config = {"data_dir": str(tmp_path)}

    def run() -> int:
        with start(config, "loop", 0) as writer:
            wait_for(writer, "wrote 30")
            writer.send_signal(signal.SIGKILL)  # wherever it is: mid-write, between writes, ...
            return writer.wait(timeout=30)

    assert await anyio.to_thread.run_sync(run) == -signal.SIGKILL
    json.loads(stored_file(tmp_path).read_bytes())
    numbers = sorted(numbers_of(await read_entries(tmp_path), "loop"))
    # adds and removes commit one at a time: the newest 20 (or 21) writes, with no gap
    assert numbers == list(range(numbers[0], numbers[-1] + 1))
    assert len(numbers) in (20, 21)
    assert numbers[-1] >= 30


@pytest.mark.parametrize(
    ("point", "survivors"),
    [("mid-temp", 5), ("before-rename", 5), ("after-rename", 6)],
    ids=["mid-temp", "before-rename", "after-rename"],
)
async def test_a_writer_killed_inside_its_write_leaves_old_or_new_never_a_mix(
    tmp_path: Path, point: str, survivors: int
) -> None:
    config = {"data_dir": str(tmp_path)}

    def run() -> int:
        with start(config, "cut", 10, "--die-at", point, "--after", "5") as writer:
            return writer.wait(timeout=30)

    assert await anyio.to_thread.run_sync(run) == -signal.SIGKILL
    json.loads(stored_file(tmp_path).read_bytes())
    assert len(leftovers(tmp_path)) == (0 if point == "after-rename" else 1)
    assert sorted(numbers_of(await read_entries(tmp_path), "cut")) == list(range(survivors))
    # the killed writer's lock died with it; the next write commits and sweeps the leftover
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, config)
        turn = await runner.begin_turn({"scope": ADA})
        receipt = await turn.execute_action(
            OFFER, {"target": "memory", "operation": "add", "text": entry_text("cut", 9)}, allow
        )
        await turn.release()
    assert receipt.detail["id"] == f"m{survivors + 1}"
    assert not leftovers(tmp_path)
    expected = [*range(survivors), 9]
    assert sorted(numbers_of(await read_entries(tmp_path), "cut")) == expected
