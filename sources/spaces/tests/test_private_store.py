"""The SQLite store is private: 0600 files and 0700 folders, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from spaces_kit import ADA, open_spaces, recall, remember, scope_turn, texts

STORE_FILES = ("spaces.sqlite3", "spaces.sqlite3-wal", "spaces.sqlite3-shm")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask-022", "umask-000"])
def permissive_umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


async def _write_and_check(home: Path, folder: Path, **extra: object) -> None:
    async with await open_spaces(home, **extra) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "a private thought")
        assert "a private thought" in texts(await recall(turn, "private"))
        await turn.release()
        # while the store is open SQLite keeps its -wal and -shm beside it
        modes = {name: _mode(folder / name) for name in STORE_FILES}
    assert modes == dict.fromkeys(STORE_FILES, 0o600)


async def test_a_new_store_and_its_folders_are_private(
    tmp_path: Path, permissive_umask: int
) -> None:
    home = tmp_path / "home"
    folder = home / "sources" / "spaces" / "spaces"
    await _write_and_check(home, folder)
    for made in (home, home / "sources", home / "sources" / "spaces", folder):
        assert _mode(made) == 0o700, made


async def test_an_existing_readable_store_is_tightened_when_opened(
    tmp_path: Path, permissive_umask: int
) -> None:
    home = tmp_path / "home"
    folder = home / "sources" / "spaces" / "spaces"
    await _write_and_check(home, folder)
    # as an earlier version left it: readable by every local user
    folder.chmod(0o755)
    (folder / "spaces.sqlite3").chmod(0o644)
    for name in STORE_FILES[1:]:
        (folder / name).write_bytes(b"")
        (folder / name).chmod(0o644)
    await _write_and_check(home, folder)
    assert _mode(folder) == 0o700


async def test_a_configured_path_is_private_and_its_existing_folder_is_left_alone(
    tmp_path: Path, permissive_umask: int
) -> None:
    shared = tmp_path / "srv"
    shared.mkdir()
    shared.chmod(0o755)
    nested = shared / "memory" / "store"
    await _write_and_check(
        tmp_path, nested, provider={"type": "sqlite", "path": str(nested / "spaces.sqlite3")}
    )
    assert _mode(shared / "memory") == 0o700
    assert _mode(nested) == 0o700
    assert _mode(shared) == 0o755, "the operator's own folder is not changed"


async def test_the_store_needs_no_posix_only_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as on Windows: no O_NOFOLLOW, no fchmod; the store still opens, writes and reads
    monkeypatch.delattr(os, "O_NOFOLLOW")
    monkeypatch.delattr(os, "fchmod")
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "written without POSIX calls")
        assert texts(await recall(turn, "POSIX")) == ["written without POSIX calls"]
        await turn.release()
