"""mnemon.sdk.storage: private folders and files, atomic replace, leftovers, the cross-process lock."""

from __future__ import annotations

import multiprocessing
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemon import SourceError
from mnemon.sdk.storage import (
    hold_lock,
    open_private,
    private_folder,
    remove_leftovers,
    tighten_file,
    write_atomically,
)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_folders_and_files_are_private_whatever_the_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    folder = private_folder(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == mode(folder) == 0o700
    write_atomically(folder / "store.json", b"{}")
    assert mode(folder / "store.json") == 0o600
    loose = folder / "restored.json"
    loose.write_bytes(b"{}")
    os.chmod(loose, 0o644)
    assert tighten_file(loose)
    assert mode(loose) == 0o600
    assert not tighten_file(folder / "absent.json")
    os.chmod(folder, 0o755)
    private_folder(folder)  # an existing folder is tightened
    assert mode(folder) == 0o700


def test_links_planted_where_store_files_belong_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"keep me")
    for planted in ("store.json", "store.lock"):
        (tmp_path / planted).symlink_to(target)
    with pytest.raises(SourceError) as caught:
        write_atomically(tmp_path / "store.json", b"{}")
    assert caught.value.code == "unsafe-path"
    assert caught.value.nothing_written
    with pytest.raises(SourceError, match="symbolic link"), hold_lock(tmp_path / "store.lock", 1):
        pass
    with pytest.raises(SourceError):
        open_private(tmp_path / "store.json")
    assert target.read_bytes() == b"keep me"
    (tmp_path / "folder-link").symlink_to(tmp_path)
    with pytest.raises(SourceError, match="symbolic link"):
        private_folder(tmp_path / "folder-link")


def test_an_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    write_atomically(path, b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.json"]


def _killed_mid_write(path: str) -> None:
    # what a writer killed between writing its temporary and renaming it leaves behind
    real_replace = os.replace

    def die(*args: object) -> None:
        os._exit(9)

    os.replace = die  # type: ignore[assignment]
    try:
        write_atomically(Path(path), b"half")
    finally:
        os.replace = real_replace


def test_leftovers_of_a_killed_writer_are_removed_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    write_atomically(path, b"committed")
    process = multiprocessing.get_context("fork").Process(target=_killed_mid_write, args=(path,))
    process.start()
    process.join(10)
    assert process.exitcode == 9
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1
    lookalikes = [".store.json.notes.tmp", ".store.json.0123456789abcdeg.tmp", "store.json.tmp"]
    for name in lookalikes:
        (tmp_path / name).write_bytes(b"a user's file")
    assert remove_leftovers(path) == 1
    assert path.read_bytes() == b"committed"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store.json", *lookalikes])


def test_leftovers_an_earlier_writer_named_its_own_way_are_swept_when_asked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.json"
    path.write_bytes(b"committed")
    # what tempfile.mkstemp(prefix=".store.json.", suffix=".tmp") left before a port
    earlier = tmp_path / ".store.json.k1ll_3d9.tmp"
    earlier.write_bytes(b"half")
    others = [".other.json.k1ll_3d9.tmp", "notes.tmp"]
    for name in others:
        (tmp_path / name).write_bytes(b"a user's file")
    assert remove_leftovers(path) == 0
    assert earlier.exists()
    names = re.compile(r"\.store\.json\.[a-z0-9_]+\.tmp")
    assert remove_leftovers(path, earlier_names=names) == 1
    assert not earlier.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store.json", *others])
    # the file itself is never removed, whatever the pattern; a missing folder is no error
    assert remove_leftovers(path, earlier_names=re.compile(r".*")) == len(others)
    assert path.read_bytes() == b"committed"
    assert remove_leftovers(tmp_path / "absent" / "x.json", earlier_names=names) == 0


def _hold(path: str, ready: object, release: object) -> None:
    with hold_lock(Path(path), 5):
        ready.set()  # type: ignore[attr-defined]
        release.wait(10)  # type: ignore[attr-defined]


def test_the_lock_excludes_another_process_and_times_out_honestly(tmp_path: Path) -> None:
    lock = tmp_path / "store.lock"
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(lock, ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        with pytest.raises(SourceError) as caught, hold_lock(lock, 0.05):
            pass
        assert caught.value.code == "timeout"
        assert caught.value.nothing_written
    finally:
        release.set()
        holder.join(10)
    with hold_lock(lock, 1):  # released when the holder let go
        assert mode(lock) == 0o600


def test_an_abandoned_wait_stops_before_anything_is_done(tmp_path: Path) -> None:
    lock = tmp_path / "store.lock"
    abandoned = threading.Event()
    entered = []
    with hold_lock(lock, 1):
        abandoned.set()
        with pytest.raises(SourceError) as caught, hold_lock(lock, 5, abandoned=abandoned):
            entered.append(True)
    assert caught.value.code == "cancelled"
    assert entered == []
