"""The documents Source from the user's side: compositions, search, writes, management."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sqlite3
import stat
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_documents as documents
import pytest

from mnemon import (
    ActionError,
    CompositionRejected,
    InstallError,
    ManagementError,
    RevisionConflict,
    Scope,
    SourceError,
    SourceProvenance,
    render_wake,
)
from mnemon.sdk import FactsRequest, ProjectionRequest, SourceInit
from mnemon_testing import MemoryCompositionRunner

KEY = "source:docs"
Harness = Any  # the `harness` fixture of conftest.py


def allow(offer: object) -> bool:
    return True


# ---------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"colour": "red"}, "documents configuration.colour: unknown key"),
        (
            {"data_dir": "relative/dir"},
            "documents configuration.data_dir: must be an absolute path",
        ),
        ({"data_dir": 7}, "documents configuration.data_dir: must be a path"),
        (
            {"max_document_bytes": 0},
            "documents configuration.max_document_bytes: must be between 1 and 4194304",
        ),
        (
            {"max_document_bytes": "big"},
            "documents configuration.max_document_bytes: must be an integer",
        ),
        (
            {"max_documents": True},
            "documents configuration.max_documents: must be an integer",
        ),
        (
            {"excerpt_characters": 5},
            "documents configuration.excerpt_characters: must be between 20 and 4000",
        ),
        (
            {"lock_timeout": -1},
            "documents configuration.lock_timeout: must be between 0.01 and 300",
        ),
        (
            {"lock_timeout": "soon"},
            "documents configuration.lock_timeout: must be a number",
        ),
        (
            {"recheck_files_per_turn": -1},
            "documents configuration.recheck_files_per_turn: must be between 0 and 100000",
        ),
        (
            {"rescan_seconds": 3601},
            "documents configuration.rescan_seconds: must be between 0 and 3600",
        ),
    ],
    ids=[
        "unknown-key",
        "relative-data-dir",
        "data-dir-not-text",
        "zero-bytes",
        "bytes-not-integer",
        "bool-documents",
        "tiny-excerpt",
        "negative-timeout",
        "timeout-not-number",
        "negative-recheck",
        "rescan-too-long",
    ],
)
async def test_invalid_configuration_is_refused_at_mount_and_nothing_is_published(
    harness: Harness, config: dict[str, Any], message: str
) -> None:
    runner = harness.runner
    await runner.mount(harness.strategy(), instance_id="select")
    before = runner.inspect()
    full = {"data_dir": str(harness.data_dir), **config}
    with pytest.raises(InstallError) as caught:
        await runner.mount(documents, instance_id="docs", config=full)
    assert message in str(caught.value)
    after = runner.inspect()
    assert after["registry_revision"] == before["registry_revision"]
    assert after["entries"] == ["select"]
    assert not harness.data_dir.exists()


# ---------------------------------------------------------------------------- the View


async def test_the_view_offers_search_and_writes_behind_a_compact_cover(mounted: Harness) -> None:
    await mounted.create("Secret roadmap", "The launch is planned for Tuesday in Lisbon.")
    await mounted.create("Second", "Another body.")
    turn = await mounted.turn()
    view = turn.view
    await turn.release()
    assert [fragment.text for fragment in view.fragments] == [
        "2 Markdown documents in this workspace; search to read them."
    ]
    assert [route.id for route in view.routes] == [f"{KEY}/search"]
    assert [offer.id for offer in view.offers] == [f"{KEY}/create", f"{KEY}/update"]
    assert view.consistency[0].consistency == "exact-snapshot"
    rendered = view.model_dump_json() + render_wake(view)
    for private in ("Secret roadmap", "Lisbon", "Second", str(mounted.data_dir), "doc-"):
        assert private not in rendered


@pytest.mark.parametrize("mode", ["eager", "routed"])
@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (200, ["2 Markdown documents in this workspace; search to read them."]),
        (12, ["2 documents"]),
        (10, []),
        (0, []),
    ],
    ids=["roomy", "short", "too-small", "none"],
)
async def test_the_cover_shrinks_to_fit_or_disappears(
    harness: Harness, mode: str, share: int, expected: list[str]
) -> None:
    await harness.mount(mode=mode, share=share)
    await harness.create("Title", "Body")
    await harness.create("Title", "Body")
    turn = await harness.turn()
    fragments = turn.view.fragments
    await turn.release()
    assert [f.text for f in fragments] == expected
    assert all(f.mode == mode for f in fragments)
    assert [g.source_key for g in turn.view.grants] == [KEY]


async def test_a_scope_without_a_workspace_is_unavailable_and_touches_nothing(
    mounted: Harness,
) -> None:
    turn = await mounted.turn(None, user_id="u1")
    view = turn.view
    await turn.release()
    assert view.consistency == ()
    assert [(d.code, d.message) for d in view.diagnostics] == [
        ("source-unavailable", f"Memory Source {KEY} is unavailable (missing-scope)")
    ]
    assert not mounted.data_dir.exists()
    with pytest.raises(ManagementError, match="missing-scope"):
        await mounted.runner.management_client(KEY, {"user_id": "u1"}).read("list")


async def test_tenants_partition_a_workspace_and_never_fall_back(mounted: Harness) -> None:
    client = mounted.client("shared", tenant_id="a")
    await client.mutate(
        "create",
        {"title": "Tenant A plan", "body": "alpha-only words"},
        confirmed=True,
        expected_revision=await client.revision(),
    )
    for scope in ({"tenant_id": "b"}, {}):
        turn = await mounted.turn("shared", **scope)
        evidence = await turn.execute_route(f"{KEY}/search", {"query": "alpha"})
        await turn.release()
        assert evidence.items == ()
        assert len((await mounted.client("shared", **scope).read("list"))["documents"]) == 0
    turn = await mounted.turn("shared", tenant_id="a")
    evidence = await turn.execute_route(f"{KEY}/search", {"query": "alpha"})
    await turn.release()
    assert [item.provenance["title"] for item in evidence.items] == ["Tenant A plan"]


# ---------------------------------------------------------------------------- search


async def test_search_returns_ranked_excerpts_with_provenance(mounted: Harness) -> None:
    receipt = await mounted.create("Gardening", "Tomatoes need sun. " * 3 + "Water daily.")
    await mounted.create("Tomato sauce", "Cook the tomatoes slowly with garlic.")
    await mounted.create("Unrelated", "Nothing about that vegetable here.")
    evidence = await mounted.search("tomatoes")
    assert [item.provenance["title"] for item in evidence.items] == ["Tomato sauce", "Gardening"]
    first, second = evidence.items
    assert first.provenance["rank"] == 1
    assert second.provenance["rank"] == 2
    assert first.provenance["score"] > second.provenance["score"] > 0
    assert second.id == second.provenance["document"] == receipt.detail["document"]
    assert second.provenance["revision"] == receipt.detail["document_revision"]
    assert "Tomatoes need sun" in second.text
    assert str(mounted.data_dir) not in evidence.model_dump_json()
    assert not evidence.truncated


async def test_search_excerpts_fit_the_per_item_ceiling_of_the_read(mounted: Harness) -> None:
    body = "Tomatoes need sun and patience. " * 40
    await mounted.create("Gardening", body)
    whole = await mounted.search("tomatoes")
    assert len(whole.items[0].text) > 60
    narrow = await mounted.search("tomatoes", max_item_characters=60)
    assert len(narrow.items) == 1  # excerpted by the Source within the ceiling, not dropped
    assert len(narrow.items[0].text) <= 60
    assert "Tomatoes" in narrow.items[0].text
    assert narrow.items[0].provenance["excerpt"] is True


@pytest.mark.parametrize(
    "query",
    [
        'foo"bar OR',
        '"',
        "NEAR(a b",
        "title:secret",
        "* ^ - + ( ) :",
        "AND OR NOT",
        "{{template}} {x}",
        "\x00\x01 control",
        "syn\x00tax",
        "emoji 👩‍👩‍👧 and café",
    ],
    ids=[
        "quote-or",
        "lone-quote",
        "near",
        "column-filter",
        "operators",
        "keywords",
        "braces",
        "control",
        "nul-in-word",
        "unicode",
    ],
)
async def test_fts_syntax_in_queries_is_searched_for_never_executed(
    mounted: Harness, query: str
) -> None:
    await mounted.create("Syntax", 'A body with foo"bar, NEAR things, a title: secret and café.')
    evidence = await mounted.search(query)
    assert all(item.provenance["title"] == "Syntax" for item in evidence.items)


async def test_a_special_character_query_still_finds_its_words(mounted: Harness) -> None:
    await mounted.create("Operators", "How OR and NEAR behave in full text search.")
    await mounted.create("Other", "Plain prose.")
    evidence = await mounted.search('behave" OR (NEAR')
    assert [item.provenance["title"] for item in evidence.items] == ["Operators"]


async def test_search_honours_max_results_and_max_characters(mounted: Harness) -> None:
    for number in range(6):
        await mounted.create(f"Report {number}", f"quarterly figures {number} " * 200)
    evidence = await mounted.search("quarterly", limit=20, max_results=4, max_characters=200)
    assert len(evidence.items) == 4
    assert sum(len(item.text) for item in evidence.items) <= 200
    assert all(item.text for item in evidence.items)
    assert all(item.text.endswith("…") for item in evidence.items)
    assert evidence.truncated
    few = await mounted.search("quarterly", limit=2)
    assert len(few.items) == 2
    assert few.truncated
    all_of_them = await mounted.search("quarterly", limit=20)
    assert len(all_of_them.items) == 6
    assert not all_of_them.truncated


async def test_a_document_created_after_composition_is_invisible_to_that_view(
    mounted: Harness,
) -> None:
    await mounted.create("Before", "pinned zebra facts")
    turn = await mounted.turn()
    receipt = await turn.execute_action(
        f"{KEY}/create", {"title": "After", "body": "late zebra facts"}, allow
    )
    assert receipt.completion == "committed"
    assert receipt.status == "succeeded"
    assert receipt.committed_at is not None
    evidence = await turn.execute_route(f"{KEY}/search", {"query": "zebra"})
    assert [item.provenance["title"] for item in evidence.items] == ["Before"]
    assert sorted(doc["title"] for doc in await mounted.listed()) == ["After", "Before"]
    assert turn.view.consistency[0].revision != receipt.revision
    await turn.release()
    later = await mounted.search("zebra")
    assert sorted(item.provenance["title"] for item in later.items) == ["After", "Before"]


async def test_a_document_updated_after_composition_is_left_out_of_that_view(
    mounted: Harness,
) -> None:
    created = await mounted.create("Plan", "original wording about otters")
    turn = await mounted.turn()
    await turn.execute_action(
        f"{KEY}/update",
        {
            "document": created.detail["document"],
            "expected_revision": created.detail["document_revision"],
            "body": "rewritten wording about otters",
        },
        allow,
    )
    pinned = await turn.execute_route(f"{KEY}/search", {"query": "otters"})
    await turn.release()
    # the pinned text is no longer held, and the new text is not this View's: nothing is served
    assert pinned.items == ()
    later = await mounted.search("otters")
    assert [item.text for item in later.items] == ["rewritten wording about otters"]


def _create_source(data_dir: Path) -> Any:
    """A documents Source made by its factory, to call its protocol methods directly."""
    init = SourceInit(
        instance_key=KEY,
        provenance=SourceProvenance(
            entry_id="docs", package_name="mnemon-source-documents", type_id="documents"
        ),
        configuration={"data_dir": str(data_dir)},
    )
    return documents.DOCUMENTS_SOURCE.create(init)


def _projection(workspace: str, revision: str | None) -> ProjectionRequest:
    return ProjectionRequest(
        instance_key=KEY,
        scope=Scope(workspace=workspace),
        scenario="agent.root-turn",
        expected_revision=revision,
        mode="routed",
        max_characters=200,
    )


async def test_project_serves_the_snapshot_facts_announced_despite_later_writes(
    harness: Harness,
) -> None:
    source = _create_source(harness.data_dir)
    folder = harness.folder("w1") / "documents"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nfirst", encoding="utf-8")
    (folder / "b.md").write_text("# B\n\nsecond", encoding="utf-8")

    async def facts(workspace: str) -> Any:
        return await source.facts(
            FactsRequest(instance_key=KEY, scope=Scope(workspace=workspace), scenario="s")
        )

    first = await facts("w1")
    other = await facts("w2")  # another scope's facts in between must not matter
    (folder / "a.md").write_text("# A\n\nrewritten", encoding="utf-8")  # a writer, by hand
    (folder / "c.md").write_text("# C\n\nthird", encoding="utf-8")
    second = await facts("w1")
    assert len({first.revision, second.revision, other.revision}) == 3
    for announced, count in ((first, 2), (second, 3)):
        contribution = await source.project(_projection("w1", announced.revision))
        grant = contribution.grant.value
        # honest: the pinned revision is the one whose documents are counted and pinned
        assert contribution.revision == grant["revision"] == announced.revision
        assert workspace_revision_of(grant["documents"]) == announced.revision
        assert len(grant["documents"]) == count
        assert contribution.fragments[0].text.startswith(f"{count} Markdown documents")
    assert (await source.project(_projection("w2", other.revision))).revision == other.revision


def workspace_revision_of(pinned: dict[str, str]) -> str:
    lines = sorted(f"{key} {revision}" for key, revision in pinned.items())
    return "documents:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


_ACTION_WRITER = """
import sys, anyio
from pathlib import Path
import mnemon_source_documents as documents
from mnemon_testing import MemoryCompositionRunner, SelectAll

data_dir, stop = sys.argv[1], Path(sys.argv[2])

async def main():
    async with MemoryCompositionRunner() as runner:
        await runner.mount(documents, instance_id="docs", config={"data_dir": data_dir})
        await runner.mount(SelectAll(), instance_id="select")
        revisions = {}
        for number in range(3_000):
            if stop.exists():
                return
            turn = await runner.begin_turn({"scope": {"workspace": "w1"}})
            if not turn.view.offers:  # this writer's own turn lost the Source: try again
                await turn.release()
                continue
            if len(revisions) < 8:
                receipt = await turn.execute_action(
                    "source:docs/create", {"title": f"Written {number}", "body": "words"},
                    lambda offer: True)
            else:
                handle = sorted(revisions)[number % 8]
                receipt = await turn.execute_action(
                    "source:docs/update",
                    {"document": handle, "expected_revision": revisions[handle],
                     "body": f"version {number}"},
                    lambda offer: True)
            await turn.release()
            revisions[receipt.detail["document"]] = receipt.detail["document_revision"]
            await anyio.sleep(0.01)

anyio.run(main)
"""

_HAND_WRITER = """
import os, sys, time
from pathlib import Path

folder, stop = Path(sys.argv[1]), Path(sys.argv[2])
for number in range(3_000):
    if stop.exists():
        break
    target = folder / f"hand-{number % 8}.md"
    temporary = folder / f".edit-{number}"
    temporary.write_text(f"# Hand {number % 8}\\n\\nedit {number}", encoding="utf-8")
    os.replace(temporary, target)  # how an editor saves a file
    time.sleep(0.01)
"""


async def test_concurrent_writer_processes_never_drop_the_source_from_a_turn(
    mounted: Harness, tmp_path: Path
) -> None:
    await mounted.create("Seed", "the workspace exists")
    stop = tmp_path / "stop"
    commands = [
        [sys.executable, "-c", _ACTION_WRITER, str(mounted.data_dir), str(stop)],
        [sys.executable, "-c", _HAND_WRITER, str(mounted.folder() / "documents"), str(stop)],
    ]
    writers = [await anyio.open_process(command, stdout=None, stderr=None) for command in commands]
    revisions: set[str | None] = set()
    dropped: list[list[str]] = []
    try:
        with anyio.fail_after(20):
            while True:  # both writers are busy before the turns start
                titles = [doc["title"] for doc in await mounted.listed()]
                if any(t.startswith("Written") for t in titles) and "Hand 0" in titles:
                    break
                await anyio.sleep(0.02)
            for _ in range(200):
                try:
                    turn = await mounted.turn()
                except CompositionRejected:  # the Source is required by this Strategy
                    dropped.append(["composition-rejected"])
                    continue
                await turn.release()
                view = turn.view
                if view.diagnostics or not view.consistency:
                    dropped.append([d.code for d in view.diagnostics])
                    continue
                revisions.add(view.consistency[0].revision)
                assert [route.id for route in view.routes] == [f"{KEY}/search"]
    finally:
        stop.touch()
        with anyio.fail_after(20):
            for writer in writers:
                await writer.wait()
    assert [writer.returncode for writer in writers] == [0, 0]
    assert dropped == []
    assert len(revisions) > 20  # the workspace really moved under the turns


# ---------------------------------------------------------------------------- writes


async def test_update_is_fenced_by_the_document_revision(mounted: Harness) -> None:
    created = await mounted.create("Fenced", "version one")
    handle, first = created.detail["document"], created.detail["document_revision"]
    turn = await mounted.turn()
    updated = await turn.execute_action(
        f"{KEY}/update",
        {"document": handle, "expected_revision": first, "body": "version two"},
        allow,
    )
    second = updated.detail["document_revision"]
    assert second != first
    assert updated.detail["document"] == handle
    with pytest.raises(RevisionConflict, match="revision conflict"):
        await turn.execute_action(
            f"{KEY}/update",
            {"document": handle, "expected_revision": first, "body": "version three"},
            allow,
        )
    renamed = await turn.execute_action(
        f"{KEY}/update",
        {"document": handle, "expected_revision": second, "title": "Renamed"},
        allow,
    )
    await turn.release()
    document = await mounted.client().read("read", {"document": handle})
    assert (document["title"], document["body"]) == ("Renamed", "version two")
    assert document["revision"] == renamed.detail["document_revision"]


async def test_concurrent_updates_of_one_revision_let_exactly_one_win(mounted: Harness) -> None:
    created = await mounted.create("Contested", "start")
    turn = await mounted.turn()
    outcomes: list[str] = []

    async def update(number: int) -> None:
        try:
            await turn.execute_action(
                f"{KEY}/update",
                {
                    "document": created.detail["document"],
                    "expected_revision": created.detail["document_revision"],
                    "body": f"writer {number}",
                },
                allow,
            )
            outcomes.append(f"writer {number}")
        except RevisionConflict:
            outcomes.append("conflict")

    async with anyio.create_task_group() as group:
        for number in range(8):
            group.start_soon(update, number)
    await turn.release()
    winners = [outcome for outcome in outcomes if outcome != "conflict"]
    assert len(winners) == 1
    assert len(outcomes) == 8
    document = await mounted.client().read("read", {"document": created.detail["document"]})
    assert document["body"] == winners[0]


async def test_concurrent_creates_from_many_tasks_lose_nothing(mounted: Harness) -> None:
    turn = await mounted.turn()
    handles: list[str] = []

    async def create(number: int) -> None:
        receipt = await turn.execute_action(
            f"{KEY}/create", {"title": f"Note {number}", "body": f"payload-{number}-unique"}, allow
        )
        handles.append(receipt.detail["document"])

    async with anyio.create_task_group() as group:
        for number in range(40):
            group.start_soon(create, number)
    await turn.release()
    assert len(set(handles)) == 40
    listed = await mounted.listed()
    assert sorted(doc["title"] for doc in listed) == sorted(f"Note {n}" for n in range(40))
    for number in (0, 17, 39):
        evidence = await mounted.search(f"payload-{number}-unique", limit=1)
        assert [item.provenance["title"] for item in evidence.items] == [f"Note {number}"]


def _write_nothing_check(harness: Harness) -> list[str]:
    folder = harness.folder() / "documents"
    return sorted(os.listdir(folder)) if folder.exists() else []


@pytest.mark.parametrize(
    ("payload", "code", "cause"),
    [
        (
            {"title": "Big", "body": "x" * 1_100},
            "invalid_payload",
            "the limit is 1024 (max_document_bytes)",
        ),
        (
            {"title": "Big", "body": "é" * 600},
            "invalid_payload",
            "the limit is 1024 (max_document_bytes)",
        ),
        # the memory-text rule is in the input schema too: refused before the Source is asked
        ({"title": "two\u2028lines", "body": "b"}, "invalid-input", None),
        ({"title": "   ", "body": "b"}, "invalid-input", None),
        ({"title": "t", "body": "nul\x00"}, "invalid-input", None),
        ({"title": "right\u202eleft", "body": "b"}, "invalid-input", None),
        ({"title": "t", "body": "clear \x1b[2J screen"}, "invalid-input", None),
        ({"title": "two\nlines", "body": "b"}, "invalid-input", None),
        ({"title": "t", "body": "half \udc00 pair"}, "invalid-input", None),
        ({"title": "t" * 201, "body": "b"}, "invalid-input", None),
        ({"title": "t", "body": "x" * 4_194_305}, "input-too-large", None),
        ({"title": "t"}, "invalid-input", None),
    ],
    ids=[
        "oversized",
        "oversized-multibyte",
        "line-separator-title",
        "blank-title",
        "nul",
        "bidi-title",
        "escape-body",
        "newline-title",
        "surrogate",
        "long-title",
        "beyond-the-hosts-input-limit",
        "missing-body",
    ],
)
async def test_invalid_and_oversized_creates_are_refused_and_write_nothing(
    harness: Harness, payload: dict[str, Any], code: str, cause: str | None
) -> None:
    await harness.mount(max_document_bytes=1_024)
    await harness.create("Existing", "kept")
    before = await harness.client().revision()
    files = _write_nothing_check(harness)
    turn = await harness.turn()
    with pytest.raises(ActionError) as caught:
        await turn.execute_action(f"{KEY}/create", payload, allow)
    await turn.release()
    error = caught.value
    assert error.code == code
    if cause is None:
        assert error.receipt is None  # refused before the Source was asked
    else:
        assert error.receipt.completion == "failed"
        assert isinstance(error.__cause__, SourceError)
        assert cause in str(error.__cause__)
    assert await harness.client().revision() == before
    assert _write_nothing_check(harness) == files


async def test_invalid_updates_are_refused_and_write_nothing(harness: Harness) -> None:
    await harness.mount(max_document_bytes=1_024)
    created = await harness.create("Existing", "kept")
    handle, revision = created.detail["document"], created.detail["document_revision"]
    before = await harness.client().revision()
    cases = [
        ({"document": handle, "expected_revision": revision}, "give a new title, a new body"),
        (
            {"document": handle, "expected_revision": revision, "body": "y" * 2_000},
            "max_document_bytes",
        ),
        ({"document": "doc-unknown", "expected_revision": revision, "body": "y"}, "no document"),
    ]
    turn = await harness.turn()
    for payload, cause in cases:
        with pytest.raises(ActionError) as caught:
            await turn.execute_action(f"{KEY}/update", payload, allow)
        assert caught.value.receipt.completion == "failed"
        assert cause in str(caught.value.__cause__)
    with pytest.raises(ActionError) as caught:
        await turn.execute_action(
            f"{KEY}/update",
            {"document": "../escape", "expected_revision": revision, "body": "y"},
            allow,
        )
    assert caught.value.code == "invalid-input"
    await turn.release()
    assert await harness.client().revision() == before


async def test_a_full_workspace_refuses_more_documents(harness: Harness) -> None:
    await harness.mount(max_documents=2)
    await harness.create("One", "1")
    await harness.create("Two", "2")
    with pytest.raises(ActionError) as caught:
        await harness.create("Three", "3")
    assert caught.value.code == "documents-capacity"
    assert caught.value.receipt.completion == "failed"
    assert len(await harness.listed()) == 2
    await harness.create("Elsewhere", "other workspaces have their own count", workspace="w2")


async def test_a_retried_create_with_its_idempotency_key_writes_once(mounted: Harness) -> None:
    turn = await mounted.turn()
    payload = {"title": "Once", "body": "only one copy"}
    first = await turn.execute_action(f"{KEY}/create", payload, allow, idempotency_key="k-1")
    again = await turn.execute_action(f"{KEY}/create", payload, allow, idempotency_key="k-1")
    assert again.detail == first.detail
    assert again.idempotency_key == "k-1"
    with pytest.raises(ActionError) as caught:
        await turn.execute_action(
            f"{KEY}/create", {"title": "Once", "body": "different"}, allow, idempotency_key="k-1"
        )
    assert "idempotency key" in str(caught.value.__cause__)
    await turn.release()
    assert [doc["title"] for doc in await mounted.listed()] == ["Once"]


def _hold_lock(harness: Harness, mode: int = fcntl.LOCK_EX) -> int:
    # held as a process of a version before mnemon.sdk.storage held it: they must exclude each other
    folder = harness.folder()
    folder.mkdir(parents=True, exist_ok=True)
    handle = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(handle, mode)
    return handle


async def test_readers_share_the_lock_and_writers_wait_for_them(harness: Harness) -> None:
    await harness.mount(lock_timeout=0.05)
    await harness.create("Existing", "kept")
    handle = _hold_lock(harness, fcntl.LOCK_SH)  # another process reading
    try:
        assert [doc["title"] for doc in await harness.listed()] == ["Existing"]
        turn = await harness.turn()
        assert [d.code for d in turn.view.diagnostics] == []
        with pytest.raises(ActionError) as caught:
            await turn.execute_action(f"{KEY}/create", {"title": "Blocked", "body": "b"}, allow)
        await turn.release()
    finally:
        os.close(handle)
    assert caught.value.code == "timeout"
    assert [doc["title"] for doc in await harness.listed()] == ["Existing"]


async def test_a_cancelled_create_waiting_for_the_lock_never_writes(mounted: Harness) -> None:
    await mounted.create("Existing", "kept")
    turn = await mounted.turn()
    handle = _hold_lock(mounted)
    try:
        with anyio.move_on_after(0.05) as scope:
            await turn.execute_action(f"{KEY}/create", {"title": "Late", "body": "never"}, allow)
        assert scope.cancelled_caught
    finally:
        os.close(handle)
    await anyio.sleep(0.1)  # the worker thread notices within one 20 ms poll
    await turn.release()
    assert [doc["title"] for doc in await mounted.listed()] == ["Existing"]


async def test_a_lock_held_too_long_times_out_without_writing(harness: Harness) -> None:
    await harness.mount(lock_timeout=0.05)
    await harness.create("Existing", "kept")
    turn = await harness.turn()
    handle = _hold_lock(harness)
    try:
        with pytest.raises(ActionError) as caught:
            await turn.execute_action(f"{KEY}/create", {"title": "Blocked", "body": "b"}, allow)
    finally:
        os.close(handle)
    await turn.release()
    assert caught.value.code == "timeout"
    assert caught.value.retryable
    assert [doc["title"] for doc in await harness.listed()] == ["Existing"]


# ---------------------------------------------------------------------------- the index


def _remove(index: Path, suffixes: tuple[str, ...]) -> None:
    for suffix in suffixes:
        Path(f"{index}{suffix}").unlink(missing_ok=True)


async def test_a_deleted_index_is_rebuilt_from_the_files(mounted: Harness) -> None:
    titles = [f"Doc {n}" for n in range(5)]
    for title in titles:
        await mounted.create(title, f"{title} mentions the kestrel.")
    before = await mounted.client().revision()
    index = mounted.folder() / "index.sqlite3"
    _remove(index, ("", "-wal", "-shm"))
    evidence = await mounted.search("kestrel")
    assert sorted(item.provenance["title"] for item in evidence.items) == titles
    assert index.exists()
    assert await mounted.client().revision() == before


@pytest.mark.parametrize(
    "offset", [0, 100, 4_096, -2_000], ids=["header", "early", "page-two", "tail"]
)
async def test_a_corrupted_index_file_is_rebuilt_with_nothing_lost(
    mounted: Harness, offset: int
) -> None:
    titles = [f"Doc {n}" for n in range(8)]
    for title in titles:
        await mounted.create(title, f"{title} is about the heron. " + "filler words " * 300)
    before = await mounted.client().revision()
    index = mounted.folder() / "index.sqlite3"
    data = bytearray(index.read_bytes())
    start = offset if offset >= 0 else len(data) + offset
    data[start : start + 1_500] = b"\xa5" * 1_500
    index.write_bytes(bytes(data))
    evidence = await mounted.search("heron")
    assert sorted(item.provenance["title"] for item in evidence.items) == sorted(titles)
    assert await mounted.client().revision() == before
    assert len(await mounted.listed()) == 8


async def test_an_index_replaced_by_garbage_or_an_empty_file_is_rebuilt(mounted: Harness) -> None:
    await mounted.create("Only", "the osprey")
    index = mounted.folder() / "index.sqlite3"
    for damage in (b"", b"not a database at all" * 100):
        index.write_bytes(damage)
        evidence = await mounted.search("osprey")
        assert [item.provenance["title"] for item in evidence.items] == ["Only"]


async def test_an_outdated_index_is_reconciled_with_the_files(mounted: Harness) -> None:
    await mounted.create("First", "the first bittern")
    index = mounted.folder() / "index.sqlite3"
    old = index.read_bytes()
    await mounted.create("Second", "the second bittern")
    _remove(index, ("-wal", "-shm"))
    index.write_bytes(old)  # an index from before the second write
    evidence = await mounted.search("bittern")
    assert sorted(item.provenance["title"] for item in evidence.items) == ["First", "Second"]


async def test_files_changed_by_hand_are_what_search_serves(mounted: Harness) -> None:
    created = await mounted.create("Edited", "the old text about puffins")
    documents = mounted.folder() / "documents"
    path = documents / f"{created.detail['document']}.md"
    path.write_text(
        '---\ntitle: "Edited by hand"\n---\n\nthe new text about puffins', encoding="utf-8"
    )
    (documents / "notes-from-disk.md").write_text("# Dropped in\n\npuffins again", encoding="utf-8")
    (documents / "ignored.txt").write_text("puffins in a text file", encoding="utf-8")
    evidence = await mounted.search("puffins")
    found = {item.provenance["title"]: item.text for item in evidence.items}
    assert found == {
        "Edited by hand": "the new text about puffins",
        "Dropped in": "# Dropped in\n\npuffins again",
    }
    path.unlink()
    evidence = await mounted.search("puffins")
    assert [item.provenance["title"] for item in evidence.items] == ["Dropped in"]


# ---------------------------------------------------------------------------- odd files


def _wake_up_readers(fifo: Path) -> None:
    # a reader stuck opening the FIFO is released when a writer opens it; none waiting is fine
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


SKIPPED = ("source-degraded", f"Memory Source {KEY} is degraded (skipped-files)")


async def test_a_fifo_named_like_a_document_never_blocks_a_turn_and_is_diagnosed(
    hurried: Harness,
) -> None:
    await hurried.create("Real", "the dunlin")
    fifo = hurried.folder() / "documents" / "notes.md"
    os.mkfifo(fifo)
    try:
        with anyio.fail_after(5):
            turn = await hurried.turn()
            evidence = await turn.execute_route(f"{KEY}/search", {"query": "dunlin"})
            # the handle a user would guess for the FIFO: nothing is opened that can block
            with pytest.raises(ActionError) as caught:
                await turn.execute_action(
                    f"{KEY}/update",
                    {"document": "notes", "expected_revision": "rev:0", "body": "x"},
                    allow,
                )
            await turn.release()
            with pytest.raises(ManagementError, match="not_found"):
                await hurried.client().read("read", {"document": "notes"})
            later = await hurried.turn()
            await later.release()
    finally:
        _wake_up_readers(fifo)
    assert caught.value.code == "not_found"
    assert [item.provenance["title"] for item in evidence.items] == ["Real"]
    for view in (turn.view, later.view):
        # served (not dropped for a timeout), with a coded note that names no file
        assert [(d.code, d.message) for d in view.diagnostics] == [SKIPPED]
        assert [route.id for route in view.routes] == [f"{KEY}/search"]
        assert [f.text for f in view.fragments] == [
            "1 Markdown document in this workspace; search to read it."
        ]
        assert "notes" not in view.model_dump_json() + render_wake(view)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # skipped, never replaced or removed


async def test_symlinks_named_like_documents_are_never_followed(
    hurried: Harness, tmp_path: Path
) -> None:
    await hurried.create("Real", "the dunlin")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nthe dunlin secret", encoding="utf-8")
    os.mkfifo(outside / "pipe")
    documents = hurried.folder() / "documents"
    (documents / "linked.md").symlink_to(outside / "secret.md")
    (documents / "piped.md").symlink_to(outside / "pipe")
    try:
        with anyio.fail_after(5):
            turn = await hurried.turn()
            evidence = await turn.execute_route(f"{KEY}/search", {"query": "dunlin secret"})
            await turn.release()
            client = hurried.client()
            for handle in ("linked", "piped"):
                with pytest.raises(ManagementError, match="not_found"):
                    await client.read("read", {"document": handle})
            listed = await client.read("list")
    finally:
        _wake_up_readers(outside / "pipe")
    assert [item.provenance["title"] for item in evidence.items] == ["Real"]
    assert [(d.code, d.message) for d in turn.view.diagnostics] == [SKIPPED]
    assert [d["title"] for d in listed["documents"]] == ["Real"]


async def test_a_symlink_planted_at_the_lock_path_is_refused_never_followed(
    mounted: Harness, tmp_path: Path
) -> None:
    await mounted.create("Existing", "kept")
    lock = mounted.folder() / ".lock"
    lock.unlink()
    (tmp_path / "elsewhere").mkdir()
    planted = tmp_path / "elsewhere" / "planted"
    lock.symlink_to(planted)  # dangling: following it with O_CREAT would create `planted`
    turn = await mounted.turn()
    await turn.release()
    assert [(d.code, d.message) for d in turn.view.diagnostics] == [
        ("source-unavailable", f"Memory Source {KEY} is unavailable (unsafe-lock)")
    ]
    with pytest.raises(ManagementError, match="unsafe-lock") as caught:
        await mounted.client().read("list")
    assert "the workspace lock file is not a regular file" in str(caught.value.__cause__)
    assert str(tmp_path) not in str(caught.value.__cause__)
    with pytest.raises(ManagementError, match="unsafe-lock"):
        await mounted.client().read("read", {"document": "doc-unknown"})
    assert not planted.exists()
    assert lock.is_symlink()
    lock.unlink()  # the owner removes the planted link: everything is served again
    assert [doc["title"] for doc in await mounted.listed()] == ["Existing"]


# ---------------------------------------------------------------------------- leftovers

_KILLED_WRITER = """
import os, sys, anyio
import mnemon_source_documents as documents
from mnemon_testing import MemoryCompositionRunner, SelectAll

data_dir, step, workspace = sys.argv[1], sys.argv[2], sys.argv[3]

def killed(*args, **kwargs):
    os._exit(7)  # the process dies after writing its temporary file, before the rename

async def main():
    async with MemoryCompositionRunner() as runner:
        await runner.mount(documents, instance_id="docs", config={"data_dir": data_dir})
        await runner.mount(SelectAll(), instance_id="select")
        client = runner.management_client("source:docs", {"workspace": workspace})
        os.replace = killed
        revision = await client.revision()  # with no index, this rebuilds it
        if step == "write":
            await client.mutate("create", {"title": "Lost", "body": "never renamed"},
                                confirmed=True, expected_revision=revision)

anyio.run(main)
"""

# mnemon.sdk.storage's temporaries: `.<the file's name>.<16 hex>.tmp`
TEMPORARY = re.compile(r"\.(doc-[0-9a-f]{24}\.md|index\.sqlite3)\.[0-9a-f]{16}\.tmp")
# what versions before mnemon.sdk.storage named them; a store they wrote may still hold some
LEGACY = re.compile(r"\.mnemon-[0-9a-f]{32}\.tmp(-wal|-shm|-journal)?")
HEX = "0123456789abcdef" * 2
LOOK_ALIKES = (
    ".tmp-notes",
    ".tmp-abc12345",
    "draft.tmp",
    ".mnemon-notes.tmp",
    f"mnemon-{HEX}.tmp",
    f".mnemon-{HEX[:31]}.tmp",
    f".mnemon-{HEX.upper()}.tmp",
    f".mnemon-{HEX}.tmpx",
    f".mnemon-{HEX}.tmp.bak",
    f".mnemon-{HEX}.tmp-wal.old",
    f"notes.md.{HEX[:16]}.tmp",
    f".notes.md.{HEX[:15]}.tmp",
    f".notes.md.{HEX[:16].upper()}.tmp",
    f".notes.md.{HEX[:16]}.tmpx",
    f".notes.txt.{HEX[:16]}.tmp",  # not a document's temporary
)


async def _killed_writer(harness: Harness, step: str, workspace: str) -> None:
    command = [sys.executable, "-c", _KILLED_WRITER, str(harness.data_dir), step, workspace]
    with anyio.fail_after(20):
        process = await anyio.run_process(command, check=False)
    assert process.returncode == 7


def _names(folder: Path) -> set[str]:
    return set(os.listdir(folder))


async def test_temporaries_of_a_killed_writer_are_removed_by_the_next_write(
    mounted: Harness,
) -> None:
    await mounted.create("Kept", "the whimbrel")
    await mounted.create("Other", "another workspace", workspace="w2")
    folder, documents_folder = mounted.folder(), mounted.folder() / "documents"
    before = _names(documents_folder)
    await _killed_writer(mounted, "write", "w1")  # dies before renaming a new document
    (killed_write,) = _names(documents_folder) - before
    other = mounted.folder("w2")
    before = _names(other)
    (other / "index.sqlite3").unlink()
    await _killed_writer(mounted, "rebuild", "w2")  # dies before swapping in a new index
    (killed_rebuild,) = _names(other) - before
    assert TEMPORARY.fullmatch(killed_write)
    assert killed_write.startswith(".doc-")
    assert TEMPORARY.fullmatch(killed_rebuild)
    assert killed_rebuild.startswith(".index.sqlite3.")
    # what a rebuild killed mid-way leaves beside w1's index, by this version and by earlier
    # ones (a file and SQLite's side files), and an earlier version's half-written document
    planted = [f".index.sqlite3.{os.urandom(8).hex()}.tmp"]
    planted += [f".mnemon-{os.urandom(16).hex()}.tmp{side}" for side in ("", "-wal", "-shm")]
    for name in planted:
        (folder / name).write_bytes(b"half an index")
    planted_documents = [f".mnemon-{os.urandom(16).hex()}.tmp"]
    for name in planted_documents:
        (documents_folder / name).write_bytes(b"half a document")
    for look_alike in LOOK_ALIKES:  # a user's own files
        (documents_folder / look_alike).write_text("mine", encoding="utf-8")
        (folder / look_alike).write_text("mine", encoding="utf-8")
    # named right, but folders
    named_right = (f".mnemon-{HEX}.tmp", f".doc-{HEX[:24]}.md.{HEX[:16]}.tmp")
    for name in named_right:
        (documents_folder / name).mkdir()
    await mounted.create("Next", "a later write")
    assert killed_write not in _names(documents_folder)
    assert not set(planted) & _names(folder)
    assert not set(planted_documents) & _names(documents_folder)
    assert set(LOOK_ALIKES) <= _names(documents_folder) & _names(folder)
    # a rebuild spares them as well
    (folder / "index.sqlite3").unlink()
    assert len((await mounted.client().read("list"))["documents"]) == 2
    assert set(LOOK_ALIKES) <= _names(documents_folder) & _names(folder)
    assert all((documents_folder / name).is_dir() for name in named_right)
    left = [name for name in _names(folder) if TEMPORARY.fullmatch(name) or LEGACY.fullmatch(name)]
    assert left == []
    found = await mounted.search("whimbrel")
    assert [item.provenance["title"] for item in found.items] == ["Kept"]


# ---------------------------------------------------------------------------- privacy


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.lstat().st_mode):o}"


def _modes(top: Path) -> dict[str, str]:
    """The permission bits (octal) of `top` and everything under it, by relative path."""
    return {str(path.relative_to(top)): _mode(path) for path in (top, *top.rglob("*"))}


async def test_every_store_file_is_private_whatever_the_umask(mounted: Harness) -> None:
    previous = os.umask(0)  # the most permissive umask there is
    try:
        created = await mounted.create("Secret", "private words")
        index = mounted.folder() / "index.sqlite3"
        # another reader keeps the index open, so its -wal and -shm stay on disk to be seen
        with closing(sqlite3.connect(index)) as reader:
            reader.execute("SELECT count(*) FROM documents").fetchone()
            turn = await mounted.turn()
            await turn.execute_action(
                f"{KEY}/update",
                {
                    "document": created.detail["document"],
                    "expected_revision": created.detail["document_revision"],
                    "body": "still private",
                },
                allow,
            )
            await turn.release()
            modes = _modes(mounted.data_dir)
    finally:
        os.umask(previous)
    names = {Path(path).name for path in modes}
    assert {"index.sqlite3-wal", "index.sqlite3-shm", ".lock"} <= names
    folders = {path for path in modes if (mounted.data_dir / path).is_dir()}
    assert len(folders) == 7  # data, sources, documents, docs, workspaces, ws-…, documents
    assert {path: mode for path, mode in modes.items() if path in folders} == dict.fromkeys(
        folders, "700"
    )
    assert {path: mode for path, mode in modes.items() if path not in folders} == dict.fromkeys(
        set(modes) - folders, "600"
    )


async def test_an_existing_store_is_tightened_when_it_is_opened(harness: Harness) -> None:
    harness.data_dir.mkdir(mode=0o755)
    await harness.mount()
    await harness.create("Secret", "private words")
    await harness.runner.dispose()
    folder = harness.folder()
    instance = folder.parent.parent
    # as an earlier version left it: shared folders and a world-readable index and lock
    for path in (instance, instance / "workspaces", folder):
        path.chmod(0o755)
    for path in (folder / "index.sqlite3", folder / ".lock"):
        path.chmod(0o644)
    hand_written = folder / "documents" / "by-hand.md"
    hand_written.write_text("# Mine\n\nthe user's own file", encoding="utf-8")
    hand_written.chmod(0o644)
    async with MemoryCompositionRunner() as runner:
        again = type(harness)(runner, harness.data_dir)
        await again.mount()
        turn = await again.turn()  # a read is enough
        await turn.release()
    assert [d.code for d in turn.view.diagnostics] == []
    private = (
        instance,
        instance / "workspaces",
        folder,
        folder / "index.sqlite3",
        folder / ".lock",
    )
    assert [_mode(path) for path in private] == ["700", "700", "700", "600", "600"]
    # the user's own: the base folder given as data_dir, and a file written by hand
    assert [_mode(harness.data_dir), _mode(hand_written)] == ["755", "644"]


# ---------------------------------------------------------------------------- management


async def test_management_lists_reads_creates_and_updates_under_fences(mounted: Harness) -> None:
    client = mounted.client()
    empty = await client.read("list")
    assert len(empty["documents"]) == 0
    assert empty["total"] == 0
    assert empty["revision"] == await client.revision()
    with pytest.raises(ManagementError, match="confirm"):
        await client.mutate(
            "create", {"title": "T", "body": "B"}, expected_revision=empty["revision"]
        )
    created = await client.mutate(
        "create",
        {"title": "Minutes", "body": "We agreed."},
        confirmed=True,
        expected_revision=empty["revision"],
    )
    handle = created.output["document"]
    assert created.revision == await client.revision()
    with pytest.raises(RevisionConflict):
        await client.mutate(
            "update",
            {"document": handle, "body": "stale"},
            confirmed=True,
            expected_revision=empty["revision"],
        )
    updated = await client.mutate(
        "update",
        {"document": handle, "body": "We agreed twice."},
        confirmed=True,
        expected_revision=created.revision,
    )
    with pytest.raises(RevisionConflict):
        await client.mutate(
            "update",
            {
                "document": handle,
                "body": "stale document",
                "expected_revision": created.output["revision"],
            },
            confirmed=True,
            expected_revision=updated.revision,
        )
    document = await client.read("read", {"document": handle})
    assert document["body"] == "We agreed twice."
    assert document["title"] == "Minutes"
    listed = await client.read("list")
    assert [(d["document"], d["title"], d["revision"]) for d in listed["documents"]] == [
        (handle, "Minutes", document["revision"])
    ]
    assert listed["documents"][0]["bytes"] > 0
    with pytest.raises(ManagementError, match="not_found"):
        await client.read("read", {"document": "doc-unknown"})
    with pytest.raises(ManagementError, match="not_found"):
        await mounted.client("w2").read("read", {"document": handle})


async def test_management_refuses_oversized_documents_and_writes_nothing(harness: Harness) -> None:
    await harness.mount(max_document_bytes=512)
    client = harness.client()
    before = await client.revision()
    with pytest.raises(ManagementError, match="invalid_payload") as caught:
        await client.mutate(
            "create", {"title": "Big", "body": "x" * 600}, confirmed=True, expected_revision=before
        )
    assert "max_document_bytes" in str(caught.value.__cause__)
    assert await client.revision() == before
    assert await harness.listed() == []


async def test_management_list_pages(mounted: Harness) -> None:
    for title in ("b", "a", "c"):
        await mounted.create(title, "x")
    page = await mounted.client().read("list", {"offset": 1, "limit": 1})
    assert page["total"] == 3
    assert [d["title"] for d in page["documents"]] == ["b"]


async def test_documents_survive_a_remount(harness: Harness) -> None:
    await harness.mount()
    await harness.create("Durable", "the plover stays")
    await harness.runner.dispose()
    async with MemoryCompositionRunner() as runner:
        again = type(harness)(runner, harness.data_dir)
        await again.mount()
        evidence = await again.search("plover")
    assert [item.provenance["title"] for item in evidence.items] == ["Durable"]


# ---------------------------------------------------------------------------- earlier stores

# the partition folders versions before mnemon.sdk.scope_partition gave workspace `w1`, written
# out literally: sha256 of '{"tenant_id": null, "workspace": "w1"}' (and of tenant "acme")
EARLIER_FOLDERS = {
    "": "ws-c1bbfcbc55dc0b1f548c53c136a605f6456ebd99",
    "acme": "ws-3e53946a04d8185205e6064961e806244ba7285a",
}


async def test_a_store_written_by_an_earlier_version_is_still_found(harness: Harness) -> None:
    workspaces = harness.data_dir / "sources" / "documents" / "docs" / "workspaces"
    for tenant, name in EARLIER_FOLDERS.items():
        folder = workspaces / name / "documents"
        folder.mkdir(parents=True)
        title = f"Earlier {tenant or 'no tenant'}"
        (folder / f"doc-{'0' * 24}.md").write_text(
            f'---\ntitle: "{title}"\n---\n\nthe earlier sandpiper', encoding="utf-8"
        )
    await harness.mount()
    for tenant in EARLIER_FOLDERS:
        scope = {"tenant_id": tenant} if tenant else {}
        turn = await harness.turn("w1", **scope)
        evidence = await turn.execute_route(f"{KEY}/search", {"query": "sandpiper"})
        await turn.release()
        assert [item.provenance["title"] for item in evidence.items] == [
            f"Earlier {tenant or 'no tenant'}"
        ]
        client = harness.client("w1", **scope)
        await client.mutate(
            "create",
            {"title": "Later", "body": "written after the upgrade"},
            confirmed=True,
            expected_revision=await client.revision(),
        )
    # the later writes joined the earlier folders; no second partition appeared
    assert sorted(os.listdir(workspaces)) == sorted(EARLIER_FOLDERS.values())
    assert harness.folder("w1").name == EARLIER_FOLDERS[""]
