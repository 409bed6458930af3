"""The SDK for Sources that keep many files, read users' files or read concurrently.

Special files (FIFOs, sockets, folders, links) where a regular file belongs, shared locks,
temporaries of a file another library writes and of every file of a folder, optional memory
text, and fences passing through `guarded_call`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from mnemon import RevisionConflict, SourceError
from mnemon.sdk import check_memory_text, guarded_call
from mnemon.sdk import memory_text_schema as text_schema
from mnemon.sdk.storage import (
    hold_lock,
    open_private,
    open_regular,
    remove_leftovers,
    remove_leftovers_in,
    temporary_path,
    tighten_file,
    write_atomically,
)

HEX16 = "0123456789abcdef"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@contextlib.contextmanager
def planted(path: Path, kind: str) -> Iterator[None]:
    """Something other than a regular file at `path`: a link, FIFO, socket or folder."""
    listener = None
    if kind == "symlink":
        target = path.with_name("target")
        target.write_bytes(b"keep me")
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    else:
        path.mkdir()
    try:
        yield
    finally:
        if listener is not None:
            listener.close()


KINDS = ["symlink", "fifo", "socket", "folder"]


@pytest.mark.parametrize("kind", KINDS)
def test_only_a_regular_file_is_ever_opened(tmp_path: Path, kind: str) -> None:
    # a FIFO with no writer would block a plain open() for ever: it is refused at once
    path = tmp_path / "store.lock"
    with planted(path, kind):
        for open_it in (
            lambda: open_regular(path),
            lambda: open_private(path),
            lambda: open_private(path, os.O_RDWR | os.O_CREAT),
            lambda: tighten_file(path),
        ):
            with pytest.raises(SourceError) as caught:
                open_it()
            assert caught.value.code == "unsafe-path"
            assert caught.value.nothing_written
            assert str(tmp_path) not in str(caught.value)  # a folder can carry a secret
            assert "'store.lock'" in str(caught.value)
        with pytest.raises(SourceError) as caught, hold_lock(path, 1):
            pass
        assert caught.value.code == "unsafe-path"
    if kind == "symlink":
        assert (tmp_path / "target").read_bytes() == b"keep me"


def test_a_users_file_is_read_without_changing_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(b"mine")
    path.chmod(0o644)
    descriptor = open_regular(path)
    with os.fdopen(descriptor, "rb") as stream:
        assert stream.read() == b"mine"
    assert mode(path) == 0o644
    os.close(open_private(path))
    assert mode(path) == 0o600
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "absent.md")


def test_shared_holders_read_together_and_keep_writers_out(tmp_path: Path) -> None:
    lock = tmp_path / "store.lock"
    with hold_lock(lock, 1, shared=True), hold_lock(lock, 0.05, shared=True):
        with pytest.raises(SourceError) as caught, hold_lock(lock, 0.05):
            pass
        assert caught.value.code == "timeout"
    with hold_lock(lock, 1):
        with pytest.raises(SourceError) as caught, hold_lock(lock, 0.05, shared=True):
            pass
        assert caught.value.code == "timeout"
    with hold_lock(lock, 0.05):  # every holder let go
        pass


def test_a_temporary_another_library_writes_is_a_leftover_remove_leftovers_knows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "index.sqlite3"
    first, second = temporary_path(path), temporary_path(path)
    assert first != second
    assert first.parent == tmp_path
    os.close(open_private(first, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    assert mode(first) == 0o600
    assert remove_leftovers(path) == 1
    assert not first.exists()


def test_leftovers_of_every_file_of_a_folder_are_removed_and_nothing_else(
    tmp_path: Path,
) -> None:
    ours = [f".a.md.{HEX16}.tmp", f".b.c.md.{'f' * 16}.tmp"]
    for name in ours:
        (tmp_path / name).write_bytes(b"half")
    theirs = [
        f".a.txt.{HEX16}.tmp",  # not a file the glob names
        f".a.md.{HEX16.upper()}.tmp",
        f".a.md.{HEX16[:15]}.tmp",
        f".a.md.{HEX16}.tmpx",
        f"a.md.{HEX16}.tmp",
        f"..{HEX16}.tmp",
        "a.md",
    ]
    for name in theirs:
        (tmp_path / name).write_bytes(b"a user's file")
    (tmp_path / f".d.md.{HEX16}.tmp").mkdir()  # named like one, but a folder
    (tmp_path / f".e.md.{HEX16}.tmp").symlink_to(tmp_path / "a.md")
    assert remove_leftovers_in(tmp_path, "*.md") == 2
    expected = {*theirs, f".d.md.{HEX16}.tmp", f".e.md.{HEX16}.tmp"}
    assert {p.name for p in tmp_path.iterdir()} == expected
    assert remove_leftovers_in(tmp_path / "absent") == 0


def test_a_folder_named_like_a_leftover_never_breaks_a_write(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    (tmp_path / f".store.json.{HEX16}.tmp").mkdir()
    write_atomically(path, b"{}")
    assert remove_leftovers(path) == 0
    assert (tmp_path / f".store.json.{HEX16}.tmp").is_dir()


def test_unpaired_surrogates_are_not_memory_text() -> None:
    with pytest.raises(SourceError, match=r"^body: contains an unpaired surrogate \(U\+DC00\)$"):
        check_memory_text("half \udc00 pair", max_characters=40, field="body")
    # a character outside the BMP is not a surrogate in Python
    assert check_memory_text("🙂", max_characters=40) == "🙂"


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_optional_memory_text_may_be_blank(text: str) -> None:
    with pytest.raises(SourceError, match="must not be blank"):
        check_memory_text(text, max_characters=10)
    assert check_memory_text(text, max_characters=10, allow_blank=True) == text
    schema = {"type": "object", "properties": {"t": text_schema(10, allow_blank=True)}}
    assert jsonschema.Draft202012Validator(schema).is_valid({"t": text})
    strict = {"type": "object", "properties": {"t": text_schema(10)}}
    assert not jsonschema.Draft202012Validator(strict).is_valid({"t": text})


@pytest.mark.parametrize("text", ["a\x00", "a\u202e", "a\u2028", "x" * 11])
def test_optional_memory_text_keeps_every_other_rule(text: str) -> None:
    with pytest.raises(SourceError):
        check_memory_text(text, max_characters=10, allow_blank=True)
    schema = {"type": "object", "properties": {"t": text_schema(10, allow_blank=True)}}
    assert not jsonschema.Draft202012Validator(schema).is_valid({"t": text})


async def test_a_fence_the_call_checked_passes_through_guarded_call() -> None:
    def fenced() -> None:
        raise RevisionConflict("revision conflict: the store is at r2, not r1")

    with pytest.raises(RevisionConflict, match="the store is at r2"):
        await guarded_call(fenced, subject="the store write")
