"""A turn reads a partition file only when it changed since this runtime last read it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mnemon_source_runtime._store as store
import pytest
from runtime_kit import OFFER, allow, open_runtime

from mnemon_testing import MemoryCompositionRunner

ADA = {"user_id": "ada"}


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a partition file, counted."""
    read: list[str] = []
    original = store.load

    def counting(partition: store.Partition) -> store.Snapshot:
        read.append(partition.name)
        return original(partition)

    monkeypatch.setattr(store, "load", counting)
    return read


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled at once (instead of two seconds after their last change)."""
    monkeypatch.setattr(store, "_SETTLED_NS", 0)


async def add(runner: MemoryCompositionRunner, text: str) -> None:
    turn = await runner.begin_turn({"scope": ADA})
    try:
        value = {"target": "user", "operation": "add", "text": text}
        await turn.execute_action(OFFER, value, allow)
    finally:
        await turn.release()


async def revision(runner: MemoryCompositionRunner) -> str | None:
    turn = await runner.begin_turn({"scope": ADA})
    await turn.release()
    [pinned] = turn.view.consistency
    return pinned.revision


def the_file(root: Path) -> Path:
    [found] = sorted(root.rglob("*.json"))
    return found


async def test_an_unchanged_file_is_not_read_again(
    tmp_path: Path, loads: list[str], settled: Any
) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await add(runner, "Ada prefers tea.")
        loads.clear()
        first = await revision(runner)
        assert len(loads) == 1
        for _ in range(3):
            assert await revision(runner) == first
        assert len(loads) == 1


async def test_a_file_changed_by_a_write_or_by_hand_is_read_again(
    tmp_path: Path, loads: list[str], settled: Any
) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await add(runner, "Ada prefers tea.")
        first = await revision(runner)
        await add(runner, "Ada keeps bees.")
        second = await revision(runner)
        assert second != first
        path = the_file(tmp_path)
        status = path.stat()
        # by hand, in place, keeping the size and the mtime: the ctime still moves
        raw = path.read_bytes()
        path.write_bytes(raw.replace(b"Ada keeps bees.", b"Ada keeps wasp."))
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
        loads.clear()
        assert await revision(runner) not in (first, second)
        assert len(loads) == 1


async def test_a_file_changed_within_the_clock_tick_of_its_read_is_read_every_turn(
    tmp_path: Path, loads: list[str]
) -> None:
    # just written: a change in the same tick of the file system's clock would not show
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await add(runner, "Ada prefers tea.")
        loads.clear()
        for _ in range(3):
            await revision(runner)
        assert len(loads) == 3


async def test_many_turns_at_once_read_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settled: Any
) -> None:
    # a turn pins the snapshot facts() read; project() must find it again, not read the file
    # again, even when hundreds of other turns read theirs in between
    import anyio

    users = [{"user_id": f"user-{number}"} for number in range(300)]
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        for scope in users:
            turn = await runner.begin_turn({"scope": scope})
            try:
                value = {"target": "user", "operation": "add", "text": "Prefers tea."}
                await turn.execute_action(OFFER, value, allow)
            finally:
                await turn.release()
        reads: list[str] = []
        original = store.ReadCache.read

        def counting(self: store.ReadCache, partition: store.Partition) -> Any:
            reads.append(partition.name)
            return original(self, partition)

        monkeypatch.setattr(store.ReadCache, "read", counting)
        # every turn's facts() answers before any turn's project() begins
        from mnemon_source_runtime import _source

        answered = anyio.Event()
        facts_given: list[object] = []
        original_facts = _source.RuntimeSource.facts

        async def facts_then_wait(self: Any, request: Any) -> Any:
            facts = await original_facts(self, request)
            facts_given.append(facts)
            if len(facts_given) == len(users):
                answered.set()
            await answered.wait()
            return facts

        monkeypatch.setattr(_source.RuntimeSource, "facts", facts_then_wait)
        views: list[Any] = []

        async def one(scope: dict[str, str]) -> None:
            turn = await runner.begin_turn({"scope": scope})
            views.append(turn.view)
            await turn.release()

        async with anyio.create_task_group() as group:
            for scope in users:
                group.start_soon(one, scope)
    assert len(views) == len(users)
    assert all("Prefers tea." in "".join(f.text for f in view.fragments) for view in views)
    assert len(reads) == len(users)
