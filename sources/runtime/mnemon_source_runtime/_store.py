"""Partition files on disk: one JSON document per scope partition.

Files are read without a lock and written atomically (temporary file, fsync, rename, fsync
of the folder) under a cross-process file lock. Everything here blocks; the Source calls it
through `run_blocking`, one whole transaction per worker-thread call, so a cancelled caller
never leaves the file lock held. Files are private (0600, folders 0700) whatever the umask,
and a symbolic link planted in place of a file is refused, never followed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from mnemon import SourceError

from ._document import (
    Applied,
    Damaged,
    Document,
    capped_size,
    damaged_revision,
    decode,
    empty_document,
    revision_of,
)

__all__ = [
    "MAX_FILE_BYTES",
    "Abandoned",
    "Partition",
    "Snapshot",
    "damaged_error",
    "link_error",
    "load",
    "partition_of",
    "transact",
]

# far above any memory_limit_bytes: a bigger file was not written by this Source
MAX_FILE_BYTES = 64 * 1024 * 1024
_FIRST_DELAY = 0.001
_LONGEST_DELAY = 0.02
_FOLDER_MODE = 0o700
_FILE_MODE = 0o600
# never follow a link planted where a store file belongs; no descriptor leaks to children
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One exact state of a partition: its document, revision and capped size in bytes.

    `size` is what `memory_limit_bytes` applies to (`capped_size`), not the file's length.
    """

    document: Document
    revision: str
    size: int


@dataclass(frozen=True, slots=True)
class Partition:
    """One scope partition of one Source instance and the files that hold it."""

    scope: tuple[tuple[str, str], ...]
    name: str
    data: Path
    lock: Path

    @property
    def directory(self) -> Path:
        """The instance's data folder."""
        return self.data.parent


def partition_of(directory: Path, scope: Mapping[str, str]) -> Partition:
    """The partition for the given scope values; its file name is a digest of them.

    The digest covers the canonical JSON of the values by key, so which keys are present
    counts: `{"user_id": "ada"}` and `{"tenant_id": "acme", "user_id": "ada"}` never share
    a file, and the file records its partition so a mismatch is caught as damage.
    """
    pairs = tuple(sorted(scope.items()))
    digest = hashlib.sha256(orjson.dumps(dict(pairs), option=orjson.OPT_SORT_KEYS)).hexdigest()
    name = f"scope-{digest[:32]}"
    return Partition(pairs, name, directory / f"{name}.json", directory / f"{name}.lock")


def load(partition: Partition) -> Snapshot:
    """Read the partition as it is now (a missing file is an empty document).

    Raises:
        Damaged: the file is not a valid document of this partition.
        OSError: the file cannot be read.
    """
    try:
        descriptor = os.open(partition.data, os.O_RDONLY | _NO_FOLLOW)
    except FileNotFoundError:
        return Snapshot(empty_document(partition.scope), revision_of(None, 0), 0)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        target = os.fsencode(os.readlink(partition.data))
        raise Damaged(
            "the file is a symbolic link; it is not followed", damaged_revision(b"link:" + target)
        ) from None
    with os.fdopen(descriptor, "rb") as stream:
        raw = stream.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise Damaged(f"the file is larger than {MAX_FILE_BYTES} bytes", damaged_revision(raw))
    try:
        document = decode(raw, partition.scope)
    except Damaged as exc:
        raise Damaged(exc.problem, damaged_revision(raw)) from None
    return Snapshot(document, revision_of(raw, document.sequence), capped_size(document))


def damaged_error(partition: Partition, problem: str) -> SourceError:
    """The error for a damaged partition file; its text is for the host developer only."""
    return SourceError(
        "schema_mismatch",
        f"runtime file {partition.data} is damaged ({problem}); it is kept as it is and "
        "nothing is written to it until it is repaired or removed",
    )


def link_error(path: Path) -> SourceError:
    """The error for a symbolic link found where the store keeps a file of its own."""
    return SourceError(
        "runtime-unsafe-path",
        f"runtime store file {path} is a symbolic link; it is not followed and nothing was "
        "written (remove the link)",
    )


class Abandoned(Exception):
    """The caller gave up (it was cancelled) before the write began; nothing was written."""


def transact(
    partition: Partition,
    step: Callable[[Snapshot], Applied],
    lock_timeout: float,
    abandoned: threading.Event,
) -> tuple[Snapshot, Applied]:
    """Read, change and write the partition while holding its file lock.

    `step` gets the current snapshot and returns what to write (`Applied.encoded` is None
    when there is nothing to write); it may raise to write nothing. Once `abandoned` is set
    the transaction stops at its next check, at the latest just before the write.

    Raises:
        SourceError: `timeout` (the lock stayed busy for `lock_timeout` seconds),
            `schema_mismatch` (the file is damaged, or a link; it is left exactly as it is)
            or `runtime-unsafe-path` (the lock file is a symbolic link).
        Abandoned: `abandoned` was set before the write began.
        OSError: the file or its folder cannot be read or written.
    """
    deadline = time.monotonic() + lock_timeout
    _prepare_folder(partition.directory)
    try:
        descriptor = os.open(partition.lock, os.O_RDWR | os.O_CREAT | _NO_FOLLOW, _FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_error(partition.lock) from None
        raise
    try:
        _make_private(descriptor)
        _lock(descriptor, deadline, lock_timeout, abandoned)
        _tighten_data(partition)
        # a writer killed mid-write leaves its temporary file; only the lock holder writes one
        for leftover in partition.directory.glob(f".{partition.data.name}.*.tmp"):
            leftover.unlink(missing_ok=True)
        try:
            current = load(partition)
        except Damaged as exc:
            raise damaged_error(partition, exc.problem) from None
        applied = step(current)
        if applied.document is None or applied.encoded is None:
            return current, applied
        if abandoned.is_set():
            raise Abandoned
        _write_atomically(partition, applied.encoded)
        after = Snapshot(
            applied.document,
            revision_of(applied.encoded, applied.document.sequence),
            capped_size(applied.document),
        )
        return after, applied
    finally:
        os.close(descriptor)  # closing the descriptor releases the lock


def _prepare_folder(directory: Path) -> None:
    # the folder holds what the agent remembers about people: private, whatever the umask;
    # folders made here are private too, an existing data_dir is the operator's to set
    missing = []
    folder = directory
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=_FOLDER_MODE, exist_ok=True)  # another writer may make it first
        os.chmod(folder, _FOLDER_MODE)
    if stat.S_IMODE(directory.stat().st_mode) != _FOLDER_MODE:
        os.chmod(directory, _FOLDER_MODE)


def _make_private(descriptor: int) -> None:
    if stat.S_IMODE(os.fstat(descriptor).st_mode) != _FILE_MODE:
        os.fchmod(descriptor, _FILE_MODE)


def _tighten_data(partition: Partition) -> None:
    # a file restored by hand with looser permissions is made private at the next write,
    # even one that is refused and leaves the content as it is
    try:
        descriptor = os.open(partition.data, os.O_RDONLY | _NO_FOLLOW)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return  # load() reports the link as damage; it is never followed
        raise
    try:
        _make_private(descriptor)
    finally:
        os.close(descriptor)


def _lock(
    descriptor: int, deadline: float, lock_timeout: float, abandoned: threading.Event
) -> None:
    delay = _FIRST_DELAY
    while True:
        if abandoned.is_set():
            raise Abandoned
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SourceError(
                "timeout",
                f"the runtime store stayed locked by another writer for {lock_timeout} s; "
                "nothing was written",
                nothing_written=True,
            )
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _LONGEST_DELAY)


def _write_atomically(partition: Partition, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(
        prefix=f".{partition.data.name}.", suffix=".tmp", dir=partition.directory
    )
    try:
        _make_private(handle)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, partition.data)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(partition.directory, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
