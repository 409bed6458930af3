"""The storage layer on its own: file format, partitions, the FTS index and its repairs."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mnemon_source_documents._config import DocumentsSettings
from mnemon_source_documents._files import (
    derived_document_id,
    new_document_id,
    partition_name,
    read_document_file,
    scan_documents,
)
from mnemon_source_documents._index import match_expression
from mnemon_source_documents._markdown import (
    check_body,
    check_title,
    parse_document,
    render_document,
)
from mnemon_source_documents._source import cover, excerpt
from mnemon_source_documents._workspace import Workspace, workspace_revision

from mnemon import RevisionConflict, Scope, SourceError

# memory text: no controls, surrogates, line or paragraph separators, or bidi controls
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
titles = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u2028\u2029" + BIDI),
    min_size=1,
    max_size=200,
).filter(lambda text: text.strip() == text and text)
bodies = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


def _workspace(folder: Path, **limits: int) -> Workspace:
    return Workspace(folder, DocumentsSettings(root=folder.parent, **limits), {})


def _idle() -> threading.Event:
    return threading.Event()


def _create(workspace: Workspace, title: str, body: str) -> str:
    document_id = new_document_id()
    workspace.create(document_id, title, body, expected_revision=None, abandon=_idle())
    return document_id


def _titles_found(workspace: Workspace, query: str) -> list[str]:
    state = workspace.state(_idle())
    pinned = {key: record.revision for key, record in state.documents.items()}
    expression = match_expression(query)
    assert expression is not None
    return sorted(hit.title for hit in workspace.search(expression, pinned, 100, _idle()))


# ---------------------------------------------------------------------------- file format


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(titles, bodies)
def test_a_rendered_document_reads_back_exactly(title: str, body: str) -> None:
    parsed = parse_document(render_document(check_title(title, "t"), body), "fallback")
    assert (parsed.title, parsed.body) == (title, body)


@pytest.mark.parametrize(
    ("text", "title", "body"),
    [
        ("# Heading here\n\nText", "Heading here", "# Heading here\n\nText"),
        ("\n\n## Second level ##\nText", "Second level", "\n\n## Second level ##\nText"),
        ("Plain text only", "fallback", "Plain text only"),
        ("---\r\ntitle: 'It''s CRLF'\r\n---\r\n\r\nBody", "It's CRLF", "Body"),
        ("---\ntitle: bare words\nauthor: x\n---\nBody", "bare words", "Body"),
        ('---\ntitle: "broken json\n---\n\n# From heading\n', "From heading", "# From heading\n"),
        ("---\nno closing fence\n", "fallback", "---\nno closing fence\n"),
        ("", "fallback", ""),
        # a title that is not memory text is not served: the file name stands in
        ('---\ntitle: "right\\u202eleft"\n---\n\nBody', "fallback", "Body"),
        ("# Tab\there\n", "fallback", "# Tab\there\n"),
    ],
    ids=[
        "heading",
        "late-heading",
        "no-title",
        "crlf-quoted",
        "bare",
        "bad-json",
        "unclosed",
        "empty",
        "bidi-title",
        "tab-in-heading",
    ],
)
def test_files_written_by_hand_are_read_sensibly(text: str, title: str, body: str) -> None:
    parsed = parse_document(text.encode(), "fallback")
    assert (parsed.title, parsed.body) == (title, body)


def test_undecodable_bytes_are_replaced_not_dropped() -> None:
    parsed = parse_document(b"# T\n\ncaf\xe9 \xff end", "x")
    assert parsed.body == "# T\n\ncaf\ufffd \ufffd end"


# titles are one line of memory text, bodies memory text that may be empty (mnemon's rule)
REFUSED = {
    "blank-title": ("title", "  \t ", "title: must not be blank"),
    "long-title": ("title", "x" * 201, "title: at most 200 characters"),
    "newline-title": ("title", "a\nb", r"title: contains a control character \(U\+000A\)"),
    "tab-title": ("title", "a\tb", r"title: contains a control character \(U\+0009\)"),
    "paragraph-title": ("title", "a\u2029b", r"title: contains a paragraph separator \(U\+2029\)"),
    "bell-title": ("title", "bell \x07", r"title: contains a control character \(U\+0007\)"),
    "bidi-title": ("title", "right \u202e left", r"title: contains a bidi control \(U\+202E\)"),
    "surrogate-title": ("title", "half \ud800", r"title: contains an unpaired surrogate"),
    "nul-body": ("body", "nul \x00", r"body: contains a control character \(U\+0000\)"),
    "escape-body": ("body", "escape \x1b[2J", r"body: contains a control character \(U\+001B\)"),
    "bidi-body": ("body", "right \u2067 left", r"body: contains a bidi control \(U\+2067\)"),
    "surrogate-body": ("body", "half \udfff", r"body: contains an unpaired surrogate"),
}


@pytest.mark.parametrize(("part", "text", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_bad_titles_and_bodies_are_refused_with_a_clear_message(
    part: str, text: str, message: str
) -> None:
    check = check_title if part == "title" else check_body
    with pytest.raises(SourceError, match=f"^documents update: {message}") as caught:
        check(text, "update")
    assert caught.value.code == "invalid_payload"
    assert not caught.value.retryable


@pytest.mark.parametrize("body", ["", "  ", "lines\n\tindented\n", "# Title\n\ntext"])
def test_empty_and_multi_line_bodies_are_stored_unchanged(body: str) -> None:
    assert check_body(body, "create") == body


# ---------------------------------------------------------------------------- identities


def test_partitions_depend_on_workspace_and_tenant_and_hide_raw_ids() -> None:
    names = {
        partition_name(Scope(workspace="../etc")),
        partition_name(Scope(workspace="../etc", tenant_id="a")),
        partition_name(Scope(workspace="../etc", tenant_id="b")),
        partition_name(Scope(workspace="other")),
    }
    assert len(names) == 4
    assert all(name and name.startswith("ws-") and "etc" not in name for name in names)
    assert partition_name(Scope(workspace="w", user_id="u")) == partition_name(Scope(workspace="w"))
    assert partition_name(Scope(tenant_id="a")) is None


def test_idempotent_ids_are_stable_per_partition() -> None:
    assert derived_document_id("p1", "k") == derived_document_id("p1", "k")
    assert derived_document_id("p1", "k") != derived_document_id("p2", "k")
    assert new_document_id() != new_document_id()


def test_workspace_revisions_cover_ids_and_revisions() -> None:
    assert workspace_revision([]) == workspace_revision([])
    assert workspace_revision([]).startswith("documents:")


# ---------------------------------------------------------------------------- search text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=500))
def test_any_query_text_is_a_valid_fts_query(query: str) -> None:
    expression = match_expression(query)
    if expression is None:
        assert not any(char.isalnum() for char in query)
        return
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE VIRTUAL TABLE t USING fts5(title, body)")
        connection.execute("INSERT INTO t VALUES ('a title', 'some body text')")
        connection.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@given(st.integers(min_value=0, max_value=100_000), st.integers(min_value=0, max_value=200))
def test_the_cover_is_a_count_and_fits(count: int, limit: int) -> None:
    text = cover(count, limit)
    assert len(text) <= limit
    wordings = (
        r"(This workspace has no documents yet\.|no documents"
        r"|\d+ Markdown documents? in this workspace; search to read (it|them)\.|\d+ documents?)?"
    )
    assert re.fullmatch(wordings, text)


@given(st.text(), st.integers(min_value=0, max_value=300))
def test_excerpts_never_exceed_their_limit(text: str, limit: int) -> None:
    cut = excerpt(text, limit)
    assert len(cut) <= limit
    assert cut == text or len(text) > limit


# ---------------------------------------------------------------------------- the workspace


def test_reading_a_workspace_that_never_existed_creates_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    assert workspace.state(_idle()).documents == {}
    assert workspace.search('"x"', {"doc-a": "r"}, 5, _idle()) == []
    assert workspace.read("doc-a", _idle()) is None
    assert not (tmp_path / "ws").exists()


def test_an_index_of_another_schema_is_rebuilt(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "Kept", "the grebe")
    with closing(sqlite3.connect(workspace.index.path)) as connection:
        connection.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
        connection.commit()
    fresh = _workspace(tmp_path / "ws")
    assert _titles_found(fresh, "grebe") == ["Kept"]
    with closing(sqlite3.connect(workspace.index.path)) as connection:
        assert connection.execute("SELECT value FROM meta").fetchall() == [("1",)]


def test_a_silently_inconsistent_full_text_index_is_found_and_rebuilt(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "Kept", "the grebe dives")
    # the stored text no longer matches the full-text index, and no query raises
    with closing(sqlite3.connect(workspace.index.path)) as connection:
        connection.execute("UPDATE passages_content SET c1 = 'unrelated words' WHERE id = 1")
        connection.commit()
    inode = os.stat(workspace.index.path).st_ino
    fresh = _workspace(tmp_path / "ws")
    state = fresh.state(_idle())
    pinned = {key: record.revision for key, record in state.documents.items()}
    hits = fresh.search('"grebe"', pinned, 5, _idle())
    assert [hit.excerpt for hit in hits] == ["the grebe dives"]
    assert os.stat(workspace.index.path).st_ino != inode  # swapped for a rebuilt file
    with closing(sqlite3.connect(workspace.index.path)) as connection:
        connection.execute("INSERT INTO passages (passages) VALUES ('integrity-check')")


def test_a_rebuild_indexes_every_file_and_removes_stale_temporaries(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    for number in range(3):
        _create(workspace, f"Doc {number}", "the avocet")
    stale = workspace.documents / f".mnemon-{'ab' * 16}.tmp"
    stale.write_bytes(b"half a write")
    users = workspace.documents / ".tmp-crashed"  # not a name this Source gives its files
    users.write_bytes(b"the user's")
    workspace.index.path.write_bytes(b"garbage")
    workspace._rebuild()
    with closing(sqlite3.connect(workspace.index.path)) as connection:
        assert connection.execute("SELECT count(*) FROM documents").fetchone() == (3,)
    assert not stale.exists()
    assert users.read_bytes() == b"the user's"


def test_symlinks_and_huge_files_are_not_documents(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "Real", "the dunlin")
    secret = tmp_path / "secret.md"
    secret.write_text("the dunlin secret", encoding="utf-8")
    (workspace.documents / "linked.md").symlink_to(secret)
    with (workspace.documents / "huge.md").open("wb") as stream:
        stream.truncate(16 * 1024 * 1024 + 1)
    scan = scan_documents(workspace.documents)
    assert (len(scan.files), scan.skipped) == (1, 2)
    assert _titles_found(workspace, "dunlin") == ["Real"]
    assert workspace.state(_idle()).skipped == 2
    assert workspace.read("linked", _idle()) is None


def test_a_file_swapped_for_a_fifo_after_the_scan_is_not_read(tmp_path: Path) -> None:
    # the scan saw a regular file; by the time it is read, a FIFO with no writer stands there
    workspace = _workspace(tmp_path / "ws")
    document_id = _create(workspace, "Swapped", "text")
    path = workspace.documents / f"{document_id}.md"
    path.unlink()
    os.mkfifo(path)
    try:
        assert read_document_file(workspace.documents, document_id) is None
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_something_planted_at_the_index_path_is_never_followed(
    tmp_path: Path, planted: str
) -> None:
    workspace = _workspace(tmp_path / "ws")
    _create(workspace, "Kept", "the godwit")
    elsewhere = tmp_path / "elsewhere.sqlite3"
    elsewhere.write_bytes(b"someone else's file")
    elsewhere.chmod(0o644)
    workspace.index.path.unlink()
    if planted == "symlink":
        workspace.index.path.symlink_to(elsewhere)
    else:
        os.mkfifo(workspace.index.path)
    assert _titles_found(_workspace(tmp_path / "ws"), "godwit") == ["Kept"]
    # rebuilt over it, and what the link pointed at was neither read, written nor chmod-ed
    assert stat.S_ISREG(os.lstat(workspace.index.path).st_mode)
    assert stat.S_IMODE(os.lstat(workspace.index.path).st_mode) == 0o600
    assert elsewhere.read_bytes() == b"someone else's file"
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o644


def test_fences_are_checked_inside_the_lock(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    document_id = _create(workspace, "Fenced", "v1")
    state = workspace.state(_idle())
    revision = state.documents[document_id].revision
    with pytest.raises(RevisionConflict, match="the workspace is at"):
        workspace.create(
            new_document_id(), "New", "b", expected_revision="documents:0", abandon=_idle()
        )
    outcome = workspace.update(
        document_id,
        title=None,
        body="v2",
        document_revision_expected=revision,
        expected_revision=state.revision,
        accept_applied=False,
        abandon=_idle(),
    )
    with pytest.raises(RevisionConflict, match=f"document {document_id} is at"):
        workspace.update(
            document_id,
            title=None,
            body="v3",
            document_revision_expected=revision,
            expected_revision=None,
            accept_applied=False,
            abandon=_idle(),
        )
    retried = workspace.update(
        document_id,
        title=None,
        body="v2",
        document_revision_expected=revision,
        expected_revision=None,
        accept_applied=True,
        abandon=_idle(),
    )
    assert not retried.written
    assert retried.record == outcome.record


def test_an_abandoned_write_writes_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path / "ws")
    gone = threading.Event()
    gone.set()
    with pytest.raises(SourceError) as caught:
        workspace.create(new_document_id(), "T", "B", expected_revision=None, abandon=gone)
    assert caught.value.code == "cancelled"
    assert caught.value.nothing_written
    assert workspace.state(_idle()).documents == {}


_WRITER = """
import sys, threading
from pathlib import Path
from mnemon_source_documents._config import DocumentsSettings
from mnemon_source_documents._files import new_document_id
from mnemon_source_documents._workspace import Workspace

folder, who, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
workspace = Workspace(folder, DocumentsSettings(root=folder.parent), {})
for number in range(count):
    workspace.create(
        new_document_id(), f"{who} {number}", f"words proc{who}x{number} here",
        expected_revision=None, abandon=threading.Event(),
    )
    if number % 5 == 0:
        workspace.state(threading.Event())
"""


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    processes = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), str(who), "15"])
        for who in range(4)
    ]
    for process in processes:
        assert process.wait(timeout=50) == 0
    workspace = _workspace(folder)
    state = workspace.state(_idle())
    assert sorted(record.title for record in state.documents.values()) == sorted(
        f"{who} {number}" for who in range(4) for number in range(15)
    )
    assert _titles_found(workspace, "proc3x14") == ["3 14"]
    assert _titles_found(workspace, "proc0x0") == ["0 0"]
    assert not [name for name in os.listdir(folder / "documents") if not name.endswith(".md")]


def test_the_package_imports_where_there_is_no_fcntl() -> None:
    # as on Windows: the lock is mnemon.sdk.storage's (portalocker), imported only when it is taken
    code = "import sys; sys.modules['fcntl'] = None; import mnemon_source_documents"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
