"""Storage primitives for Sources that keep files: private, atomic, locked, never fooled by links.

The public face is `mnemon.sdk.storage`, which documents these.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._blocking import waiting
from ._errors import SourceError

__all__ = [
    "PRIVATE_FILE_MODE",
    "PRIVATE_FOLDER_MODE",
    "hold_lock",
    "open_private",
    "open_regular",
    "private_folder",
    "remove_leftovers",
    "remove_leftovers_in",
    "switch_to_wal",
    "temporary_path",
    "tighten_file",
    "write_atomically",
]

PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700
# never follow a link planted where a store file belongs, never wait for a FIFO's other end;
# no descriptor leaks to children
_NO_FOLLOW = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)
# what open() says when it meets a link (ELOOP), a socket or device (ENXIO, ENODEV, EOPNOTSUPP)
# or a folder opened for writing (EISDIR) where a regular file belongs
_NOT_A_FILE = {errno.ELOOP, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP, errno.EISDIR}
_TEMPORARY = ".{name}.{token}.tmp"
_FIRST_DELAY = 0.001
_LONGEST_DELAY = 0.02


def _unsafe(path: Path, what: str = "a symbolic link") -> SourceError:
    # the name only: an absolute path can carry a secret, and the message reaches logs
    return SourceError(
        "unsafe-path",
        f"{path.name!r} is {what} where a regular file belongs; it is not followed or used "
        "and nothing was written (remove it)",
        nothing_written=True,
    )


def private_folder(path: Path) -> Path:
    """Make `path` (and any parent that does not exist yet) a folder only its owner can use.

    Folders made here are 0700 whatever the umask; an existing `path` is tightened to 0700.
    Existing parents are left as the operator set them.

    Raises:
        SourceError: `unsafe-path` when `path` is a symbolic link.
        OSError: the folder cannot be made.
    """
    missing = []
    folder = path
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        with suppress(FileExistsError):  # another writer made it first
            made.mkdir(mode=PRIVATE_FOLDER_MODE)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise _unsafe(path)
    if stat.S_IMODE(info.st_mode) != PRIVATE_FOLDER_MODE:
        os.chmod(path, PRIVATE_FOLDER_MODE)
    return path


def open_regular(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open the regular file `path`, never following a link or blocking; returns the descriptor.

    Whatever else stands at `path` (a symbolic link, FIFO, socket, device or folder) is
    refused without being used, and opening never waits for a FIFO's writer. The file's mode
    is left as it is (a file created with `os.O_CREAT` is 0600).

    Raises:
        SourceError: `unsafe-path` when something other than a regular file is at `path`.
        OSError: anything else, such as `FileNotFoundError`.
    """
    try:
        descriptor = os.open(path, flags | _NO_FOLLOW, PRIVATE_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path) from None
        if exc.errno in _NOT_A_FILE:
            raise _unsafe(path, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _unsafe(path, "not a regular file")
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def open_private(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open the regular file `path` as `open_regular` does and make it 0600.

    `flags` are `os.open` flags (add `os.O_CREAT` to create it, created 0600).

    Raises:
        SourceError: `unsafe-path` when something other than a regular file is at `path`.
        OSError: anything else, such as `FileNotFoundError`.
    """
    descriptor = open_regular(path, flags)
    try:
        fchmod = getattr(os, "fchmod", None)  # POSIX; elsewhere modes mean nothing
        if fchmod is not None and stat.S_IMODE(os.fstat(descriptor).st_mode) != PRIVATE_FILE_MODE:
            fchmod(descriptor, PRIVATE_FILE_MODE)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def tighten_file(path: Path) -> bool:
    """Make an existing file 0600 (a file restored by hand may be looser); False if absent.

    Raises:
        SourceError: `unsafe-path` when something other than a regular file is at `path`.
    """
    try:
        descriptor = open_private(path)
    except FileNotFoundError:
        return False
    os.close(descriptor)
    return True


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step that survives a crash at any point.

    The bytes go to a private temporary file beside `path`, are flushed to disk, and the
    temporary is renamed over `path`; then the folder itself is flushed so the rename is
    durable. A crash leaves the old file or the new one, plus at worst a temporary that
    `remove_leftovers` deletes.

    Raises:
        SourceError: `unsafe-path` when `path` is a symbolic link.
        OSError: the file cannot be written.
    """
    if os.path.islink(path):
        raise _unsafe(path)
    temporary = temporary_path(path)
    descriptor = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def temporary_path(path: Path) -> Path:
    """A fresh name beside `path` for a temporary that will be renamed over `path`.

    For a file another library writes (SQLite building a new database, say): create it
    private (`open_private` with `os.O_CREAT | os.O_EXCL`), let the library fill it, then
    `os.replace` it over `path`. It is the name `write_atomically` uses, so
    `remove_leftovers(path)` deletes it when its writer was killed.
    """
    return path.with_name(_TEMPORARY.format(name=path.name, token=secrets.token_hex(8)))


def _sync_folder(folder: Path) -> None:
    if os.name != "posix":
        return  # folders cannot be opened for fsync elsewhere; the rename is the best we have
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def remove_leftovers(path: Path, *, earlier_names: re.Pattern[str] | None = None) -> int:
    """Delete the temporaries an interrupted `write_atomically(path, ...)` left; their count.

    Only names `write_atomically` makes for `path` (`.<name>.<16 hex>.tmp`) are touched, never
    a user's file that merely looks similar. Call it while holding the file's lock, so no
    live writer's temporary is removed.

    Args:
        path: the file `write_atomically` replaces.
        earlier_names: the whole names the Source's own earlier writer gave its temporaries
            beside `path`, if they differ (a Source moving onto `write_atomically` keeps
            sweeping what its previous version left); files in the folder matching it are
            removed too.
    """
    removed = _remove_temporaries(path.parent, lambda name: name == path.name)
    if earlier_names is not None:
        with suppress(FileNotFoundError):  # no folder yet: nothing was ever written
            for candidate in os.scandir(path.parent):
                if (
                    candidate.name != path.name
                    and earlier_names.fullmatch(candidate.name)
                    and candidate.is_file(follow_symlinks=False)
                ):
                    with suppress(FileNotFoundError):
                        os.unlink(candidate.path)
                        removed += 1
    return removed


def remove_leftovers_in(folder: Path, names: str = "*") -> int:
    """Delete the temporaries interrupted writes left for any file of `folder`; their count.

    As `remove_leftovers`, for every file whose name matches the glob `names` (`"*.md"`: the
    temporaries of any Markdown file), for a folder holding one file per record. Folders,
    links and other entries that merely carry such a name are left alone.
    """
    return _remove_temporaries(folder, lambda name: fnmatch.fnmatchcase(name, names))


def _remove_temporaries(folder: Path, wanted: Callable[[str], bool]) -> int:
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(".tmp")):
            continue
        target, _, token = name[1:-4].rpartition(".")
        if (
            target
            and len(token) == 16
            and all(c in "0123456789abcdef" for c in token)
            and wanted(target)
            and entry.is_file(follow_symlinks=False)
        ):
            with suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed += 1
    return removed


def switch_to_wal(connection: sqlite3.Connection, timeout: float) -> None:
    """Put the SQLite database of `connection` in WAL mode, waiting for other processes.

    While another connection holds the file's lock, SQLite refuses the switch at once
    ("database is locked") without calling its busy handler, so of several processes opening
    a new database together all but one would fail. This tries again, backing off from 1 ms
    to 20 ms, for up to `timeout` seconds.

    Raises:
        sqlite3.OperationalError: the file stayed locked past `timeout`, or any other
            failure of the switch (raised at once).
    """
    deadline = time.monotonic() + timeout
    delay = _FIRST_DELAY
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, _LONGEST_DELAY)


@contextmanager
def hold_lock(
    path: Path,
    timeout: float,
    *,
    abandoned: threading.Event | None = None,
    shared: bool = False,
    longest_pause: float = _LONGEST_DELAY,
) -> Iterator[None]:
    """Hold a cross-process lock on the lock file `path` for the `with` block.

    The lock is exclusive, or `shared` with other shared holders (readers) while no one holds
    it exclusively. The lock file is created 0600 (never through a link, nor used when
    something other than a regular file stands there). Waiting backs off from 1 ms to
    `longest_pause` (20 ms unless given) between attempts. Closing the file releases the
    lock, so a killed holder never leaves it held.

    Args:
        path: the lock file (made if missing; its content is never used).
        timeout: seconds to wait for another holder before giving up.
        abandoned: set by the caller when it no longer waits (it was cancelled); the wait
            then stops with `SourceError` code `cancelled`, and nothing was done.
        shared: take the lock shared (to read) instead of exclusive (to write).
        longest_pause: the longest pause between two attempts, in seconds: shorter for a
            lock held briefly and often, so that a waiter is not passed over for long.

    Raises:
        SourceError: `timeout` (another writer held the lock for `timeout` seconds; nothing
            was written), `cancelled` (`abandoned` was set), `unsafe-path` (a link, FIFO,
            socket or folder at `path`).
        OSError: the lock file cannot be opened.
    """
    import portalocker  # the `storage` extra; imported only by Sources that lock files

    mode = portalocker.LockFlags.SHARED if shared else portalocker.LockFlags.EXCLUSIVE
    descriptor = open_private(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(descriptor, "r+b") as handle:

        def locked() -> bool:
            if abandoned is not None and abandoned.is_set():
                raise SourceError("cancelled", "the caller stopped waiting for the lock")
            try:
                portalocker.lock(handle, mode | portalocker.LockFlags.NON_BLOCKING)
            except portalocker.exceptions.LockException:
                return False
            return True

        if not locked():
            with waiting():  # another holds it: this thread waits, it does not compute
                deadline = time.monotonic() + timeout
                delay = min(_FIRST_DELAY, longest_pause)
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SourceError(
                            "timeout",
                            f"the store stayed locked by another writer for {timeout:g} s; "
                            "nothing was written",
                            nothing_written=True,
                        )
                    time.sleep(min(delay, remaining))
                    delay = min(delay * 2, longest_pause)
                    if locked():
                        break
        try:
            yield
        finally:
            portalocker.unlock(handle)
