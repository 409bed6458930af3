"""The three-tier workflow: a full working memory makes room by archiving into long-term memory.

Real Sources throughout (runtime on files or PostgreSQL, spaces on SQLite or PostgreSQL), the
layered Strategy's own policy, and a real process killed with SIGKILL mid-maintenance.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_spaces as spaces
import mnemon_strategy_general as general
import mnemon_strategy_layered as layered
import mnemon_strategy_scoped as scoped
import pytest

from mnemon import ActionError, MaintenanceError, MaintenanceReport, ManagementError, MemoryHost
from mnemon_testing.postgres import PostgresServer

from .archive_probe import ArchiveProbe
from .maintenance_kit import (
    ADA,
    LIMIT,
    OFFER,
    RUNTIME,
    SPACES,
    add,
    add_refused,
    allow,
    archived_texts,
    fill,
    open_host,
    runtime_config,
    spaces_config,
    text_of,
    working_texts,
)

WRITER = Path(__file__).with_name("maintenance_writer.py")


def deny(offer: object) -> bool:
    return False


async def test_a_write_past_the_cap_archives_the_oldest_entries_and_then_succeeds(
    tmp_path: Path,
) -> None:
    async with await open_host(tmp_path) as host:
        written = await fill(host, 4)
        async with host.turn(scope=ADA) as turn:
            value = {"target": "user", "operation": "add", "text": text_of(4)}
            receipt = await turn.execute_action(OFFER, value, allow)
            (report,) = turn.maintenance
        assert receipt.completion == "committed"
        written.append(text_of(4))
        # the oldest entries moved, each archived: its copy committed, then the entry removed
        archived = [entry for entry in report.entries if entry.outcome == "archived"]
        assert [entry.record_id for entry in archived] == ["u1", "u2", "u3"][: len(archived)]
        assert archived
        assert all(e.removed and e.copied == "committed" for e in archived)
        assert report.trigger.kind == "refused-write"
        assert report.trigger.code == "runtime-capacity"
        working, kept = await working_texts(host), await archived_texts(host)
        # nothing lost, nothing twice: every text is in exactly one tier
        assert sorted(working + kept) == sorted(written)
        assert kept == [text_of(n) for n in range(len(archived))][::-1]  # newest first
        usage = dict(report.usage)[RUNTIME]
        assert usage.limit == LIMIT
        assert usage.unit == "bytes"


async def test_the_archive_keeps_the_entries_as_tagged_memories_in_the_writable_space(
    tmp_path: Path,
) -> None:
    async with await open_host(tmp_path) as host:
        await fill(host, 5)
        records = await host.management_client(SPACES, ADA).read(
            "records-read", {"kind": "memory", "limit": 10}
        )
    assert records["records"]
    for record in records["records"]:
        assert record["space"] == "personal"
        assert list(record["tags"]) == ["working-memory", "fact"]


async def test_another_strategy_gets_no_automatic_maintenance(tmp_path: Path) -> None:
    host = MemoryHost()
    async with host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (spaces, "spaces", spaces_config(tmp_path)),
                (general, "general", None),
            ]
        )
        written = await fill(host, 4)
        refused = await add_refused(host, text_of(4))
        assert refused.code == "runtime-capacity"
        assert refused.maintenance is None
        assert await working_texts(host) == written
        assert await archived_texts(host) == []
        with pytest.raises(MaintenanceError) as caught:
            await host.maintain(scope=ADA, authorize=allow)
        assert caught.value.code == "no-maintenance-policy"


async def test_essential_entries_stay_and_a_task_asks_the_agent_to_merge_them(
    tmp_path: Path,
) -> None:
    async with await open_host(tmp_path) as host:
        written = [text_of(n) for n in range(4)]
        for text in written:
            await add(host, text, importance=5)
        refused = await add_refused(host, text_of(4))
    assert refused.code == "runtime-capacity"
    report = refused.maintenance
    assert isinstance(report, MaintenanceReport)
    assert report.entries == ()
    (task,) = report.tasks
    assert task.draft.task == "review"
    assert task.draft.record_ids == ("u1", "u2", "u3", "u4")
    # no Source of this View stores maintenance tasks: it lives in the report, and says so
    assert task.completion == "unstored"
    assert "x" * 50 not in task.draft.instruction  # no memory content in the task


async def test_a_denied_write_scope_preserves_everything_and_fails(tmp_path: Path) -> None:
    probe = ArchiveProbe("empty")
    host = MemoryHost()
    async with host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (probe, "archive", None),
                (layered, "layered", None),
            ]
        )
        written = await fill(host, 4)
        refused = await add_refused(host, text_of(4))
        assert refused.code == "runtime-capacity"
        failure = refused.maintenance
        assert isinstance(failure, MaintenanceError)
        assert failure.code == "write-scope-denied"
        assert probe.preflights == 1
        assert await working_texts(host) == written
        assert probe.memories == {}


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("malformed", "write-scope-malformed"),
        ("other-view", "write-scope-mismatch"),
        ("other-source", "write-scope-mismatch"),
    ],
)
async def test_a_malformed_write_scope_fails_closed(tmp_path: Path, answer: str, code: str) -> None:
    probe = ArchiveProbe(answer)
    host = MemoryHost()
    async with host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (probe, "archive", None),
                (layered, "layered", None),
            ]
        )
        written = await fill(host, 4)
        refused = await add_refused(host, text_of(4))
        assert isinstance(refused.maintenance, MaintenanceError)
        assert refused.maintenance.code == code
        assert refused.maintenance.report is None  # nothing was even planned
        assert await working_texts(host) == written
        assert probe.memories == {}


async def test_a_write_scope_that_allows_it_archives_into_the_probe(tmp_path: Path) -> None:
    probe = ArchiveProbe("ok")
    host = MemoryHost()
    async with host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (probe, "archive", None),
                (layered, "layered", None),
            ]
        )
        await fill(host, 5)
        assert probe.memories
        assert {memory["space"] for memory in probe.memories.values()} == {"kept"}


async def test_two_writable_archive_sources_are_rejected_as_ambiguous(tmp_path: Path) -> None:
    host = MemoryHost()
    async with host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (spaces, "spaces", spaces_config(tmp_path)),
                (spaces, "archive", spaces_config(tmp_path / "b")),
                (layered, "layered", None),
                (
                    scoped,
                    "scoped",
                    {"source_keys": [RUNTIME, SPACES, "source:archive"]},
                ),
            ]
        )
        written = await fill(host, 4)
        refused = await add_refused(host, text_of(4))
        failure = refused.maintenance
        assert isinstance(failure, MaintenanceError)
        assert failure.code == "ambiguous-archive"
        assert await working_texts(host) == written
        assert await archived_texts(host) == []
        assert await archived_texts(host, "source:archive") == []


async def test_an_operator_run_with_authority_denied_changes_nothing(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host:
        written = await fill(host, 4)
        with pytest.raises(MaintenanceError) as caught:
            await host.maintain(scope=ADA, authorize=deny)
        assert caught.value.code == "not-authorized"
        report = caught.value.report
        assert isinstance(report, MaintenanceReport)
        assert {entry.outcome for entry in report.entries} <= {"refused", "kept"}
        assert await working_texts(host) == written
        assert await archived_texts(host) == []


async def test_a_dry_run_lists_exactly_what_the_real_run_does(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host:
        written = await fill(host, 4)
        planned = await host.maintain(scope=ADA, authorize=allow, dry_run=True)
        assert await working_texts(host) == written  # a dry run writes nothing
        assert planned.entries
        assert {e.outcome for e in planned.entries} == {"planned"}
        done = await host.maintain(scope=ADA, authorize=allow, expected_plan=planned.plan_digest)
        assert [e.record_id for e in done.entries] == [e.record_id for e in planned.entries]
        assert {e.outcome for e in done.entries} == {"archived"}
        assert done.plan_digest == planned.plan_digest
        moved = {text_of(int(e.record_id[1:]) - 1) for e in done.entries}
        assert set(await archived_texts(host)) == moved
        assert set(await working_texts(host)) == set(written) - moved


async def test_a_plan_shown_before_the_memory_changed_is_not_applied(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host:
        await fill(host, 4)
        planned = await host.maintain(scope=ADA, authorize=allow, dry_run=True)
        async with host.turn(scope=ADA) as turn:
            value = {"target": "user", "operation": "remove", "id": "u1"}
            await turn.execute_action(OFFER, value, allow)
        before = await working_texts(host)
        with pytest.raises(MaintenanceError) as caught:
            await host.maintain(scope=ADA, authorize=allow, expected_plan=planned.plan_digest)
        assert caught.value.code == "plan-changed"
        assert await working_texts(host) == before
        assert await archived_texts(host) == []


async def test_an_operator_run_on_a_memory_with_room_moves_nothing(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host:
        written = await fill(host, 2)
        report = await host.maintain(scope=ADA, authorize=allow)
        assert report.entries == ()
        assert "has room" in report.explanation
        assert await working_texts(host) == written


async def test_the_wake_says_when_working_memory_is_nearly_full(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host:
        await add(host, text_of(0))
        async with host.turn(scope=ADA) as turn:
            assert "% full" not in turn.wake()
        for number in range(1, 4):
            await add(host, text_of(number))
        async with host.turn(scope=ADA) as turn:
            wake = turn.wake()
    assert f"Working memory {RUNTIME} is" in wake
    assert "% full" in wake
    assert "archives the least important, oldest entries into long-term memory" in wake


async def test_the_spaces_write_scope_answers_only_a_grant_it_issued_for_this_scope(
    tmp_path: Path,
) -> None:
    async with MemoryHost() as host:
        await host.mount_all(
            [(spaces, "spaces", spaces_config(tmp_path)), (layered, "layered", None)]
        )
        client = host.management_client(SPACES, ADA)
        async with host.turn(scope=ADA) as turn:
            view_id = turn.view.id
        forged = {"v": 1, "nonce": "0" * 32, "revision": "spaces:0", "spaces": []}
        for grant in (None, forged, "forged"):
            payload = {"write_scope": {"view_id": view_id, "grant": grant}}
            with pytest.raises(ManagementError) as caught:
                await client.read("write-scope", payload)
            assert caught.value.code == "forbidden"


async def test_read_only_spaces_are_outside_the_write_scope(tmp_path: Path) -> None:
    config = spaces_config(
        tmp_path,
        spaces=[{"name": "team", "writable": False}, {"name": "personal", "writable": True}],
    )
    async with await open_host(tmp_path, spaces_extra=config) as host:
        await fill(host, 5)
        page = await host.management_client(SPACES, ADA).read(
            "records-read", {"kind": "memory", "limit": 10}
        )
    assert page["records"]
    assert {record["space"] for record in page["records"]} == {"personal"}


def start_writer(root: Path, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(root), str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=WRITER.parent,
    )


async def test_a_process_killed_between_the_copy_and_the_removal_loses_nothing(
    tmp_path: Path,
) -> None:
    writer = start_writer(tmp_path, 5)
    out, err = await anyio.to_thread.run_sync(writer.communicate)
    assert writer.returncode == -9, err[-2_000:]
    lines = out.split()
    assert lines[-1] == "copied"
    assert lines.count("wrote") == 4
    written = [text_of(n) for n in range(4)]
    async with await open_host(tmp_path) as host:
        working, kept = await working_texts(host), await archived_texts(host)
        # the copy is committed, the original not removed: a duplicate at worst, nothing lost
        assert sorted(working) == sorted(written)
        assert kept == [text_of(0)]
        # the same write again (its idempotency key): maintenance replays the copy, removes
        # the original, and the write fits
        async with host.turn(scope=ADA) as turn:
            value = {"target": "user", "operation": "add", "text": text_of(4)}
            receipt = await turn.execute_action(OFFER, value, allow, idempotency_key="write-4")
            (report,) = turn.maintenance
        assert receipt.completion == "committed"
        first = report.entries[0]
        assert (first.record_id, first.outcome, first.replayed, first.removed) == (
            "u1",
            "archived",
            True,
            True,
        )
        working, kept = await working_texts(host), await archived_texts(host)
    everything = [*written, text_of(4)]
    assert sorted(working + kept) == sorted(everything)  # converged: each text once
    assert len(set(kept)) == len(kept)


def _removals(reports: list[MaintenanceReport]) -> Counter[str]:
    return Counter(e.record_id for report in reports for e in report.entries if e.removed)


async def _race(
    first: MemoryHost, second: MemoryHost, scope: dict[str, str] = ADA
) -> list[MaintenanceReport]:
    """Both hosts maintain `scope` at once; their reports."""
    reports: list[MaintenanceReport] = []

    async def run(host: MemoryHost) -> None:
        reports.append(await host.maintain(scope=scope, authorize=allow))

    async with anyio.create_task_group() as group:
        group.start_soon(run, first)
        group.start_soon(run, second)
    return reports


async def _check_race(first: MemoryHost, second: MemoryHost, written: list[str]) -> None:
    reports = await _race(first, second)
    working, kept = await working_texts(first), await archived_texts(first)
    assert sorted(working + kept) == sorted(written)  # nothing lost, nothing twice
    assert len(set(kept)) == len(kept)
    removals = _removals(reports)
    assert all(count == 1 for count in removals.values())  # never removed twice
    assert len(removals) == len(written) - len(working)
    for report in reports:
        assert all(e.outcome in ("archived", "unknown", "kept") for e in report.entries)


async def test_two_hosts_maintaining_one_scope_at_once_never_lose_or_double_remove(
    tmp_path: Path,
) -> None:
    for attempt in range(3):
        root = tmp_path / str(attempt)
        first = await open_host(root)
        second = await open_host(root)
        async with first, second:
            written = await fill(first, 4)
            await _check_race(first, second, written)


@pytest.fixture
def schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


async def test_two_hosts_on_postgresql_maintaining_one_scope_never_lose_or_double_remove(
    postgres_server: PostgresServer, schema: str, tmp_path: Path
) -> None:
    import mnemon_spaces_postgres

    dsn = postgres_server.dsn()
    options: dict[str, Any] = {
        "runtime_extra": {"store": "postgres", "dsn": dsn, "schema": f"{schema}_rt"},
        "spaces_plugin": mnemon_spaces_postgres,
        "spaces_extra": {"provider": {"type": "postgres", "dsn": dsn, "schema": f"{schema}_sp"}},
    }
    for attempt in range(3):
        scope = {"user_id": f"ada-{attempt}"}
        first = await open_host(tmp_path / "a", **options)
        second = await open_host(tmp_path / "b", **options)
        async with first, second:
            written = []
            for number in range(4):
                async with first.turn(scope=scope) as turn:
                    value = {"target": "user", "operation": "add", "text": text_of(number)}
                    await turn.execute_action(OFFER, value, allow)
                written.append(text_of(number))
            reports = await _race(first, second, scope)
            output = await second.management_client(RUNTIME, scope).read("read")
            working = [entry["text"] for entry in output["user"]]
            page = await second.management_client(SPACES, scope).read(
                "records-read", {"kind": "memory", "limit": 100}
            )
            kept = [record["text"] for record in page["records"]]
        assert sorted(working + kept) == sorted(written)
        assert len(set(kept)) == len(kept)
        removals = _removals(reports)
        assert all(count == 1 for count in removals.values())
        assert len(removals) == len(written) - len(working) > 0


async def test_a_refused_write_of_another_kind_is_not_maintained(tmp_path: Path) -> None:
    async with await open_host(tmp_path) as host, host.turn(scope=ADA) as turn:
        value = {"target": "user", "operation": "remove", "id": "u9"}
        with pytest.raises(ActionError) as caught:
            await turn.execute_action(OFFER, value, allow)
        assert caught.value.code == "not_found"
        failure = caught.value.maintenance
        assert isinstance(failure, MaintenanceError)
        assert failure.code == "not-capacity"


def _with_policy(policy: Any) -> Any:
    """A plugin installing the layered composition under another maintenance policy."""
    from mnemon_strategy_layered._compose import MANIFEST, compose, create_turn

    from mnemon.sdk import define_memory_strategy, install_memory

    definition = define_memory_strategy(MANIFEST, compose, create_turn, maintain=policy)

    class Plugin:
        @staticmethod
        def apply(ctx: Any) -> None:
            install_memory(ctx, strategies=[definition])

    return Plugin()


def _move(record_id: str, space: str) -> dict[str, Any]:
    return {
        "source_key": RUNTIME,
        "kind": "fact",
        "record_id": record_id,
        "to_source_key": "source:archive",
        "to_kind": "memory",
        "record": {"space": space, "text": "moved"},
    }


@pytest.mark.parametrize(
    ("plan", "code"),
    [
        ({"explanation": "outside", "archive": [_move("u1", "elsewhere")]}, "write-scope-denied"),
        ({"explanation": "unknown", "archive": [_move("u99", "kept")]}, "invalid-plan"),
        ("not a plan", "invalid-plan"),
    ],
    ids=["outside-the-write-scope", "unknown-record", "not-a-plan"],
)
async def test_the_host_refuses_a_plan_outside_what_the_view_allows(
    tmp_path: Path, plan: Any, code: str
) -> None:
    probe = ArchiveProbe("ok")
    async with MemoryHost() as host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (probe, "archive", None),
                (_with_policy(lambda request: plan), "layered", None),
            ]
        )
        written = await fill(host, 4)
        with pytest.raises(MaintenanceError) as caught:
            await host.maintain(scope=ADA, authorize=allow)
        assert caught.value.code == code
        assert await working_texts(host) == written
        assert probe.memories == {}


async def test_a_policy_that_answers_two_plans_is_refused(tmp_path: Path) -> None:
    answers = iter(["first", "second"])

    def restless(request: Any) -> dict[str, Any]:
        return {"explanation": next(answers)}

    async with MemoryHost() as host:
        await host.mount_all(
            [
                (__import__("mnemon_source_runtime"), "runtime", runtime_config(tmp_path)),
                (_with_policy(restless), "layered", None),
            ]
        )
        with pytest.raises(MaintenanceError) as caught:
            await host.maintain(scope=ADA, authorize=allow)
        assert caught.value.code == "policy-not-pure"


def test_a_maintenance_policy_is_a_plain_callable() -> None:
    from mnemon_strategy_layered._compose import MANIFEST, compose

    from mnemon import DefinitionError
    from mnemon.sdk import define_memory_strategy

    async def waits(request: Any) -> None:
        return None

    with pytest.raises(DefinitionError, match="maintain: a maintenance policy must be a plain"):
        define_memory_strategy(MANIFEST, compose, maintain=waits)
    with pytest.raises(DefinitionError, match="maintain: must be callable"):
        define_memory_strategy(MANIFEST, compose, maintain="policy")  # type: ignore[arg-type]


def test_the_write_scope_preflight_is_the_cores_and_needs_a_writable_kind() -> None:
    from mnemon import ManagementDescriptor

    with pytest.raises(ValueError, match="write_scope: needs a writable record kind"):
        ManagementDescriptor.model_validate({"label": "x", "description": "x", "write_scope": True})
    with pytest.raises(ValueError, match="'write-scope' is the core's preflight"):
        ManagementDescriptor.model_validate(
            {
                "label": "x",
                "description": "x",
                "operations": [
                    {"id": "write-scope", "kind": "read", "description": "x",
                     "input_schema": {"type": "object"}}
                ],
            }
        )  # fmt: skip
