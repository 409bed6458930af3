"""A turn on an unchanged workspace reuses what the last one read; any change is still seen."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import pytest

from mnemon.sdk import run_blocking

KEY = "source:docs"
Harness = Any  # the `harness` fixture of conftest.py


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    original = sqlite3.connect

    def counting(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(database))
        return original(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    return opened


async def _revision(harness: Harness) -> str | None:
    turn = await harness.turn()
    try:
        [pinned] = [item for item in turn.view.consistency if item.source_key == KEY]
        return pinned.revision
    finally:
        await turn.release()


async def test_an_unchanged_workspace_opens_no_connection_for_a_turn(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    connections.clear()
    assert await _revision(mounted) == first
    assert await _revision(mounted) == first
    assert connections == []


async def test_an_edit_in_place_is_seen_by_the_next_turn(
    mounted: Harness, connections: list[str]
) -> None:
    created = await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    path = mounted.folder() / "documents" / f"{created.detail['document']}.md"
    with path.open("r+b") as file:  # in place: the folder itself does not change
        file.seek(0, os.SEEK_END)
        file.write(b" and then flies")
    second = await _revision(mounted)
    assert second != first
    evidence = await mounted.search("flies")
    assert [item.provenance["title"] for item in evidence.items] == ["Heron"]


async def test_a_document_written_by_another_runtime_is_seen(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    documents = mounted.folder() / "documents"
    [existing] = list(documents.glob("doc-*.md"))
    (documents / ("doc-" + "0" * 24 + ".md")).write_bytes(
        existing.read_bytes().replace(b"Heron", b"Egret")
    )
    assert await _revision(mounted) != first
    assert {item["title"] for item in await mounted.listed()} == {"Heron", "Egret"}


async def test_a_replaced_index_is_verified_again_before_it_is_trusted(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    index = mounted.folder() / "index.sqlite3"
    index.write_bytes(b"not a database at all" * 100)
    connections.clear()
    assert await _revision(mounted) == first
    assert connections  # the damaged index was opened, found wrong and rebuilt
    evidence = await mounted.search("heron")
    assert [item.provenance["title"] for item in evidence.items] == ["Heron"]


# ------------------------------------------------------------------ freshness (README)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every scan of a `documents/` folder, counted."""
    from mnemon_source_documents import _workspace

    scanned: list[str] = []
    original = _workspace.scan_documents

    def counting(folder: Any) -> Any:
        scanned.append(str(folder))
        return original(folder)

    monkeypatch.setattr(_workspace, "scan_documents", counting)
    return scanned


def settle(harness: Harness) -> None:
    """Date the folder's last change a minute back, as if nobody touched it since."""
    documents = harness.folder() / "documents"
    moment = documents.stat().st_mtime_ns - 60 * 10**9
    os.utime(documents, ns=(moment, moment))


async def settled_with(harness: Harness, count: int, **config: Any) -> str | None:
    """Mount with `config`, create `count` documents, settle the folder; the revision now."""
    await harness.mount(**config)
    for number in range(count):
        await harness.create(f"Bird {number}", f"bird number {number}")
    settle(harness)
    return await _revision(harness)  # this turn scans once and trusts the folder from now on


def document_files(harness: Harness) -> list[Any]:
    return sorted((harness.folder() / "documents").glob("doc-*.md"))


async def test_a_settled_unchanged_workspace_is_neither_scanned_nor_opened(
    harness: Harness, connections: list[str], scans: list[str]
) -> None:
    first = await settled_with(harness, 3)
    connections.clear()
    scans.clear()
    for _ in range(3):
        assert await _revision(harness) == first
    assert scans == []
    assert connections == []


@pytest.mark.parametrize("change", ["added", "removed", "renamed"])
async def test_a_file_added_removed_or_renamed_is_seen_by_the_next_turn(
    harness: Harness, connections: list[str], scans: list[str], change: str
) -> None:
    # no re-check and no rescan: only the folder's own stat can tell
    first = await settled_with(harness, 3, recheck_files_per_turn=0, rescan_seconds=3600.0)
    assert await _revision(harness) == first
    scans.clear()
    path = document_files(harness)[0]
    titles = {item["document"]: item["title"] for item in await harness.listed()}
    if change == "added":
        (path.parent / "by-hand.md").write_bytes(b"# Wren\n\nthe wren sings loudly\n")
        expected = {*titles.values(), "Wren"}
    elif change == "removed":
        path.unlink()
        expected = set(titles.values()) - {titles[path.stem]}
    else:
        path.rename(path.parent / "renamed.md")
        expected = set(titles.values())
    assert await _revision(harness) != first
    assert scans  # the folder moved: it was scanned
    listed = await harness.listed()
    assert {item["title"] for item in listed} == expected
    if change == "renamed":
        assert "renamed" in {item["document"] for item in listed}


def edit_in_place(path: Any) -> None:
    with path.open("r+b") as file:  # the same file: the folder itself does not change
        file.seek(0, os.SEEK_END)
        file.write(b" and then flies")


async def test_an_edit_in_place_is_seen_within_the_rolling_recheck(
    harness: Harness, connections: list[str]
) -> None:
    # four documents, one re-checked per turn, no rescan: an edit is seen within four turns
    first = await settled_with(harness, 4, recheck_files_per_turn=1, rescan_seconds=3600.0)
    for path in document_files(harness):
        edit_in_place(path)
        revisions = [await _revision(harness) for _ in range(4)]
        assert revisions[-1] != first
        first = revisions[-1]
        connections.clear()
    evidence = await harness.search("flies")
    assert len(evidence.items) == 4


async def test_without_a_recheck_an_edit_in_place_waits_for_the_rescan(
    harness: Harness,
) -> None:
    # the documented bound, both ways: with no re-check it is the rescan interval ...
    first = await settled_with(harness, 2, recheck_files_per_turn=0, rescan_seconds=3600.0)
    edit_in_place(document_files(harness)[0])
    assert await _revision(harness) == first


async def test_a_zero_rescan_interval_scans_every_turn(harness: Harness, scans: list[str]) -> None:
    # ... and with rescan_seconds = 0 every turn scans, as before this cache existed
    first = await settled_with(harness, 2, recheck_files_per_turn=0, rescan_seconds=0.0)
    scans.clear()
    edit_in_place(document_files(harness)[0])
    assert await _revision(harness) != first
    assert scans


async def test_a_change_in_the_same_clock_tick_as_the_last_scan_is_not_missed(
    harness: Harness,
) -> None:
    await harness.mount(recheck_files_per_turn=0, rescan_seconds=3600.0)
    await harness.create("Heron", "the heron stands still")
    first = await _revision(harness)  # scanned just now: the folder has not settled
    documents = harness.folder() / "documents"
    before = documents.stat().st_mtime_ns
    (documents / "by-hand.md").write_bytes(b"# Wren\n\nthe wren sings\n")
    os.utime(documents, ns=(before, before))  # as if the change fell in the same tick
    assert await _revision(harness) != first


async def test_the_management_list_is_always_as_the_files_are_now(harness: Harness) -> None:
    first = await settled_with(harness, 2, recheck_files_per_turn=0, rescan_seconds=3600.0)
    path = document_files(harness)[0]
    raw = path.read_bytes()
    with path.open("r+b") as file:  # in place, the same size: only the file's stat moves
        file.write(raw.replace(b"Bird", b"Wren"))
    assert await _revision(harness) == first  # a turn waits for the rescan (the bound) ...
    titles = {item["title"] for item in await harness.listed()}
    assert titles & {"Wren 0", "Wren 1"}  # ... a person's list does not


# ------------------------------------------------------------------ one check for turns at once


def make_source(data_dir: Any) -> Any:
    import mnemon_source_documents as documents

    from mnemon import SourceProvenance
    from mnemon.sdk import SourceInit

    init = SourceInit(
        instance_key=KEY,
        provenance=SourceProvenance(
            entry_id="docs", package_name="mnemon-source-documents", type_id="documents"
        ),
        configuration={"data_dir": str(data_dir)},
    )
    return documents.DOCUMENTS_SOURCE.create(init)


def facts_request() -> Any:
    from mnemon import Scope
    from mnemon.sdk import FactsRequest

    return FactsRequest(instance_key=KEY, scope=Scope(workspace="w1"), scenario="agent.turn")


@pytest.fixture
def states(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every state check a documents Source makes, counted."""
    from mnemon_source_documents import _workspace

    checked: list[int] = []
    original = _workspace.Workspace.state

    def counting(self: Any, abandon: Any, **options: Any) -> Any:
        checked.append(1)
        return original(self, abandon, **options)

    monkeypatch.setattr(_workspace.Workspace, "state", counting)
    return checked


@pytest.fixture
async def one_worker() -> Any:
    """Blocking calls cut to one worker thread, and a way to keep that thread busy.

    `run_blocking` and `guarded_call` take their thread limit from anyio's default limiter.
    """
    import threading

    import anyio.to_thread

    limiter = anyio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    limiter.total_tokens = 1
    release = threading.Event()
    yield release
    release.set()
    limiter.total_tokens = tokens


async def test_turns_asking_at_once_share_one_state_check(
    mounted: Harness, states: list[int], one_worker: Any
) -> None:
    import anyio
    import anyio.to_thread

    await mounted.create("Heron", "the heron stands still")
    source = make_source(mounted.data_dir)
    results: list[Any] = []

    async def ask() -> None:
        results.append(await source.facts(facts_request()))

    async with anyio.create_task_group() as group:
        group.start_soon(run_blocking, one_worker.wait)  # the only worker is busy
        await anyio.sleep(0.01)
        states.clear()
        for _ in range(8):
            group.start_soon(ask)  # every check waits for the worker: none has begun
        await anyio.sleep(0.01)
        one_worker.set()
    assert len(states) == 1
    assert len({item.revision for item in results}) == 1
    assert results[0].hints["documents"] == 1


async def test_a_check_already_begun_is_not_shared(
    mounted: Harness,
) -> None:
    import threading

    import anyio
    from mnemon_source_documents import _workspace

    await mounted.create("Heron", "the heron stands still")
    source = make_source(mounted.data_dir)
    inside = threading.Event()
    release = threading.Event()
    original = _workspace.Workspace.state
    states: list[int] = []

    def slow(self: Any, abandon: Any, **options: Any) -> Any:
        states.append(1)
        if len(states) == 1:
            inside.set()
            release.wait(5)
        return original(self, abandon, **options)

    results: list[Any] = []

    async def ask() -> None:
        results.append(await source.facts(facts_request()))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_workspace.Workspace, "state", slow)
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            assert await anyio.to_thread.run_sync(inside.wait, 5)
            # the first check has begun: a turn asking now makes its own
            group.start_soon(ask)
            await anyio.sleep(0.05)
            release.set()
    assert len(states) == 2
    assert [item.hints["documents"] for item in results] == [1, 1]


async def _cancellable(scope: Any, call: Any) -> None:
    with scope:
        await call()


async def test_when_the_turn_that_started_a_check_stops_waiting_the_others_check_themselves(
    mounted: Harness, states: list[int], one_worker: Any
) -> None:
    import anyio
    import anyio.to_thread

    await mounted.create("Heron", "the heron stands still")
    source = make_source(mounted.data_dir)
    results: list[Any] = []

    async def ask() -> None:
        results.append(await source.facts(facts_request()))

    first = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(run_blocking, one_worker.wait)  # the only worker is busy
        await anyio.sleep(0.01)
        states.clear()
        group.start_soon(_cancellable, first, ask)  # it starts the check, queued
        await anyio.sleep(0.01)
        for _ in range(3):
            group.start_soon(ask)  # they join it
        await anyio.sleep(0.01)
        first.cancel()  # its turn stops waiting before the check began
        await anyio.sleep(0.01)
        one_worker.set()
    assert len(results) == 3
    assert {item.hints["documents"] for item in results} == {1}
    assert 1 <= len(states) <= 3  # the three checked on their own (and may share again)
