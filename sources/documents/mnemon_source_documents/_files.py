"""The workspace folder on disk: partition names, document files, atomic writes, the lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mnemon import Scope, SourceError

__all__ = [
    "DOCUMENT_ID_PATTERN",
    "MAX_FILE_BYTES",
    "Abandoned",
    "FileStat",
    "NotRegularFile",
    "Scan",
    "create_private_file",
    "derived_document_id",
    "document_path",
    "is_document_id",
    "locked",
    "make_private_folders",
    "new_document_id",
    "partition_name",
    "read_document_file",
    "remove_stale_temporaries",
    "scan_documents",
    "temporary_path",
    "tighten_file",
    "tighten_folders",
    "write_atomically",
]

#: the stem of a document file, which is also the document's handle
DOCUMENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_DOCUMENT_ID = re.compile(DOCUMENT_ID_PATTERN)
_SUFFIX = ".md"
#: files larger than this (placed by hand) are not indexed; ours are far smaller
MAX_FILE_BYTES = 16 * 1024 * 1024
# the only names this Source gives its temporary files (a document being written, an index
# being rebuilt, and SQLite's side files of the latter); nothing else is ever removed as one
_TEMPORARY = re.compile(r"\.mnemon-[0-9a-f]{32}\.tmp(?:-wal|-shm|-journal)?")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# never follow a link, never wait for a FIFO's writer
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC


class NotRegularFile(Exception):
    """Something other than a regular file (a symlink, FIFO, socket, device) is at a path."""


class Abandoned(Exception):
    """The caller stopped waiting (cancelled or timed out) before anything was written."""


@dataclass(frozen=True, slots=True)
class FileStat:
    """What identifies one version of a file cheaply: size, modification time, inode."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, status: os.stat_result) -> FileStat:
        """The stat of `status`."""
        return cls(status.st_size, status.st_mtime_ns, status.st_ino)


def partition_name(scope: Scope) -> str | None:
    """The folder name of the scope's workspace partition, or None without a workspace.

    The tenant, when present, is part of the partition: the same workspace name under two
    tenants (or with and without one) never shares documents. Raw ids never reach the disk.
    """
    if scope.workspace is None:
        return None
    identity = json.dumps(
        {"tenant_id": scope.tenant_id, "workspace": scope.workspace}, sort_keys=True
    )
    return "ws-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def new_document_id() -> str:
    """A fresh, random document id (never derived from the title)."""
    return "doc-" + secrets.token_hex(12)


def derived_document_id(partition: str, idempotency_key: str) -> str:
    """The document id a retried create with the same idempotency key lands on."""
    seed = f"{partition}\x00{idempotency_key}".encode()
    return "doc-" + hashlib.sha256(seed).hexdigest()[:24]


def is_document_id(value: str) -> bool:
    """Whether `value` is a well-formed document id (and so a safe file stem)."""
    return bool(_DOCUMENT_ID.match(value))


def document_path(folder: Path, document_id: str) -> Path:
    """The file of one document; `document_id` must be well-formed."""
    if not is_document_id(document_id):
        raise ValueError("malformed document id")
    return folder / f"{document_id}{_SUFFIX}"


@dataclass(frozen=True, slots=True)
class Scan:
    """The document files of a folder, and how many files named like documents were skipped."""

    files: dict[str, FileStat]
    #: entries named like a document that are not served: symlinks, FIFOs, sockets, devices,
    #: folders, files over MAX_FILE_BYTES
    skipped: int = 0


def scan_documents(folder: Path) -> Scan:
    """Every document file in `folder` with its stat (regular files only, no symlinks)."""
    found: dict[str, FileStat] = {}
    skipped = 0
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return Scan(found)
    with entries:
        for entry in entries:
            name = entry.name
            if not name.endswith(_SUFFIX) or not is_document_id(name[: -len(_SUFFIX)]):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while we looked
            if stat.S_ISREG(status.st_mode) and status.st_size <= MAX_FILE_BYTES:
                found[name[: -len(_SUFFIX)]] = FileStat.of(status)
            else:
                skipped += 1
    return Scan(found, skipped)


def read_document_file(folder: Path, document_id: str) -> tuple[bytes, FileStat] | None:
    """The bytes of one document and the stat of exactly those bytes, or None if absent.

    Anything but a regular file (a symlink, FIFO, socket or device named like a document) is
    treated as absent: it is opened without following links and without blocking, so a FIFO
    with no writer cannot park the thread that holds the workspace lock.
    """
    path = document_path(folder, document_id)
    try:
        handle = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        # ELOOP: a symlink; ENXIO: a socket or a device with nothing behind it
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            return None
        raise
    with os.fdopen(handle, "rb") as stream:
        status = os.fstat(stream.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_FILE_BYTES:
            return None
        raw = stream.read(MAX_FILE_BYTES + 1)
    if len(raw) != status.st_size:
        return None  # changed while being read: the next scan sees the new version
    return raw, FileStat.of(status)


def _sync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _make_private_folder(folder: Path) -> None:
    # the mode is set again after mkdir: the umask may have narrowed it (0o000 is possible)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        return
    os.chmod(folder, 0o700)


def make_private_folders(folder: Path) -> None:
    """Create `folder` and any missing parents at 0700; existing folders are left as they are."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        _make_private_folder(candidate)


def tighten_folders(root: Path, folder: Path) -> None:
    """Make `folder` and the folders between `root` and it (both included) exactly 0700.

    `folder` must be `root` or lie inside it; missing folders are created, at 0700.
    """
    make_private_folders(folder)
    inside = folder.relative_to(root)
    for relative in (inside, *inside.parents):
        path = root / relative
        if stat.S_IMODE(os.stat(path).st_mode) != 0o700:
            os.chmod(path, 0o700)


def tighten_file(path: Path) -> bool:
    """Make an existing regular file 0600, never following a symlink at `path`.

    Returns:
        False when nothing is at `path`, True when a regular file is there (now 0600).

    Raises:
        NotRegularFile: something other than a regular file stands at `path`.
    """
    try:
        handle = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise NotRegularFile() from None
        raise
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile()
        if stat.S_IMODE(status.st_mode) != 0o600:
            os.fchmod(handle, 0o600)
    finally:
        os.close(handle)
    return True


def temporary_path(folder: Path) -> Path:
    """A fresh name for a temporary file in `folder`, one `remove_stale_temporaries` knows."""
    return folder / f".mnemon-{secrets.token_hex(16)}.tmp"


def create_private_file(path: Path) -> int:
    """Create `path` (it must not exist) readable and writable by its owner only.

    The mode is set explicitly, so it is 0600 whatever the process's umask.
    """
    handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600)
    try:
        os.fchmod(handle, 0o600)
    except BaseException:
        os.close(handle)
        raise
    return handle


def write_atomically(path: Path, data: bytes) -> FileStat:
    """Replace `path` with `data` durably (temporary file, fsync, rename, fsync the folder).

    The file is 0600 whatever the umask; its folder, when it has to be made, 0700.
    """
    make_private_folders(path.parent)
    temporary = temporary_path(path.parent)
    handle = create_private_file(temporary)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return FileStat.of(os.stat(path, follow_symlinks=False))


def remove_stale_temporaries(folder: Path) -> None:
    """Remove temporary files a killed writer left (call only under the exclusive lock).

    Only regular files named exactly as `temporary_path` names them (or SQLite's side files
    of one) are removed: a user's `.tmp-notes` or `draft.tmp` is never touched.
    """
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
        for entry in entries:
            if _TEMPORARY.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def _unsafe_lock() -> SourceError:
    return SourceError(
        "unsafe-lock",
        "documents: the workspace lock file is not a regular file (a symlink, FIFO or "
        "folder stands at its place); it is never followed or used",
        kind="terminal",
    )


def _open_lock(lock_file: Path) -> int:
    """The lock file's descriptor; whatever stands at its path is never followed."""
    try:
        handle = os.open(lock_file, _LOCK_FLAGS, 0o600)
    except OSError as exc:
        # ELOOP: a symlink; ENXIO: a socket; EISDIR: a folder
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV):
            raise _unsafe_lock() from None
        raise
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            raise _unsafe_lock()
        if stat.S_IMODE(status.st_mode) != 0o600:
            os.fchmod(handle, 0o600)  # private whatever the umask, and tightened if it was not
    except BaseException:
        os.close(handle)
        raise
    return handle


@contextlib.contextmanager
def locked(
    lock_file: Path, *, exclusive: bool, timeout: float, abandon: threading.Event
) -> Iterator[None]:
    """Hold the workspace lock across processes (flock): shared to read, exclusive to write.

    Waits by polling so that a caller who stopped waiting (`abandon` set) or a lock held too
    long ends the wait instead of parking a thread forever.

    Raises:
        Abandoned: `abandon` was set while waiting.
        SourceError: `timeout` (transient), the lock stayed taken for `timeout` seconds;
            `unsafe-lock` (terminal), something other than a regular file (such as a
            symlink) stands at the lock path.
    """
    handle = _open_lock(lock_file)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            if abandon.is_set():
                raise Abandoned()
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SourceError(
                        "timeout",
                        "documents: the workspace stayed locked by another writer",
                        nothing_written=True,
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
        yield
    finally:
        os.close(handle)  # closing the descriptor releases the lock
