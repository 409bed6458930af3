"""Storage primitives for Sources that keep files: private, atomic, locked, never fooled by links.

Every first-party Source that writes files uses these, and a third-party Source gets them for
free:

- `private_folder(path)` makes a folder (and the parents it has to make) mode 0700 whatever
  the umask, and tightens an existing one.
- `open_private(path, flags)` opens a file with `O_NOFOLLOW`, so a symbolic link planted where
  a store file belongs is refused (`SourceError` code `unsafe-path`), and makes it 0600.
- `write_atomically(path, data)` replaces a file with new bytes in one step: a private
  temporary file in the same folder, fsync, rename, fsync of the folder. Readers see the old
  bytes or the new ones, never a mix, even if the process is killed.
- `remove_leftovers(path)` deletes the temporaries a writer killed inside `write_atomically`
  left beside `path` (and only those); call it while holding the file's lock.
- `hold_lock(path, timeout)` holds a cross-process lock on a lock file (portalocker: works on
  every platform Python supports) and fails as `SourceError` code `timeout` when another
  writer keeps it longer than `timeout` seconds.

Everything here blocks: call it from a worker thread (`mnemon.guarded_call`). The lock needs
the `portalocker` package, which the `storage` extra of the core distribution installs.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._errors import SourceError

__all__ = [
    "PRIVATE_FILE_MODE",
    "PRIVATE_FOLDER_MODE",
    "hold_lock",
    "open_private",
    "private_folder",
    "remove_leftovers",
    "tighten_file",
    "write_atomically",
]

PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700
# never follow a link planted where a store file belongs; no descriptor leaks to children
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TEMPORARY = ".{name}.{token}.tmp"
_FIRST_DELAY = 0.001
_LONGEST_DELAY = 0.02


def _unsafe(path: Path) -> SourceError:
    # the path is for the host developer; a Source never puts this text in a View
    return SourceError(
        "unsafe-path",
        f"{path} is a symbolic link where a store file belongs; it is not followed and "
        "nothing was written (remove the link)",
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


def open_private(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open `path` without following a link and make it 0600; returns the descriptor.

    `flags` are `os.open` flags (add `os.O_CREAT` to create it, created 0600).

    Raises:
        SourceError: `unsafe-path` when `path` is a symbolic link.
        OSError: anything else, such as `FileNotFoundError`.
    """
    try:
        descriptor = os.open(path, flags | _NO_FOLLOW, PRIVATE_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path) from None
        raise
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
        SourceError: `unsafe-path` when `path` is a symbolic link.
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
    temporary = path.with_name(_TEMPORARY.format(name=path.name, token=secrets.token_hex(8)))
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
    removed = 0
    prefix, suffix = f".{path.name}.", ".tmp"
    for candidate in path.parent.glob(f".{_glob_escape(path.name)}.*.tmp"):
        token = candidate.name[len(prefix) : -len(suffix)]
        if len(token) == 16 and all(c in "0123456789abcdef" for c in token):
            candidate.unlink(missing_ok=True)
            removed += 1
    if earlier_names is not None:
        with suppress(FileNotFoundError):  # no folder yet: nothing was ever written
            for candidate in path.parent.iterdir():
                if candidate.name != path.name and earlier_names.fullmatch(candidate.name):
                    candidate.unlink(missing_ok=True)
                    removed += 1
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


@contextmanager
def hold_lock(
    path: Path, timeout: float, *, abandoned: threading.Event | None = None
) -> Iterator[None]:
    """Hold an exclusive cross-process lock on the lock file `path` for the `with` block.

    The lock file is created 0600 (never through a link). Waiting backs off from 1 ms to
    20 ms between attempts. Closing the file releases the lock, so a killed holder never
    leaves it held.

    Args:
        path: the lock file (made if missing; its content is never used).
        timeout: seconds to wait for another holder before giving up.
        abandoned: set by the caller when it no longer waits (it was cancelled); the wait
            then stops with `SourceError` code `cancelled`, and nothing was done.

    Raises:
        SourceError: `timeout` (another writer held the lock for `timeout` seconds; nothing
            was written), `cancelled` (`abandoned` was set), `unsafe-path` (a link).
        OSError: the lock file cannot be opened.
    """
    import portalocker  # the `storage` extra; imported only by Sources that lock files

    descriptor = open_private(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(descriptor, "r+b") as handle:
        deadline = time.monotonic() + timeout
        delay = _FIRST_DELAY
        while True:
            if abandoned is not None and abandoned.is_set():
                raise SourceError("cancelled", "the caller stopped waiting for the lock")
            try:
                portalocker.lock(
                    handle, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
                )
                break
            except portalocker.exceptions.LockException:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SourceError(
                    "timeout",
                    f"the store stayed locked by another writer for {timeout:g} s; "
                    "nothing was written",
                    nothing_written=True,
                )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _LONGEST_DELAY)
        try:
            yield
        finally:
            portalocker.unlock(handle)
