"""Partition files on disk: one JSON document per scope partition.

Files are read without a lock and written with `mnemon.sdk.storage` (private, atomic, under a
cross-process lock). Everything here blocks; the Source calls it through `guarded_call`,
one whole transaction per worker-thread call, so a cancelled caller never leaves the file
lock held. A symbolic link planted in place of a file is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mnemon.sdk import ScopePartition, SourceError
from mnemon.sdk.storage import (
    hold_lock,
    private_folder,
    remove_leftovers,
    tighten_file,
    write_atomically,
)

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
    "Partition",
    "ReadCache",
    "Snapshot",
    "damaged_error",
    "link_error",
    "load",
    "load_missing",
    "read",
    "transact",
]

# far above any memory_limit_bytes: a bigger file was not written by this Source
MAX_FILE_BYTES = 64 * 1024 * 1024
# how long after its last change a file's stat is trusted to show the next change: longer
# than the coarsest common file system clock (FAT's two seconds; most are far finer)
_SETTLED_NS = 2_000_000_000
# never follow a link planted where the store file belongs; no descriptor leaks to children
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


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
    """One scope partition of one Source instance and the files that hold it.

    The files are named `scope-<first 32 hex of the partition's key>`: the key is the SHA-256
    of the canonical JSON of the partition's ids, so which ids are present counts, and the
    file records its partition so a mismatch is caught as damage.
    """

    scope: tuple[tuple[str, str], ...]
    name: str
    data: Path
    lock: Path

    @classmethod
    def of(cls, directory: Path, partition: ScopePartition) -> Partition:
        """The files of `partition` in the instance's data folder."""
        name = partition.folder_name("scope-", 32)
        return cls(
            tuple(partition.values.items()),
            name,
            directory / f"{name}.json",
            directory / f"{name}.lock",
        )

    @property
    def directory(self) -> Path:
        """The instance's data folder."""
        return self.data.parent

    @property
    def earlier_temporaries(self) -> re.Pattern[str]:
        """The names the writer before `mnemon.sdk.storage` gave its temporaries (`mkstemp`'s)."""
        return re.compile(rf"\.{re.escape(self.data.name)}\.[a-z0-9_]+\.tmp")


def load(partition: Partition) -> Snapshot:
    """Read the partition as it is now (a missing file is an empty document).

    Raises:
        Damaged: the file is not a valid document of this partition.
        OSError: the file cannot be read.
    """
    try:
        descriptor = os.open(partition.data, os.O_RDONLY | _NO_FOLLOW)
    except FileNotFoundError:
        return load_missing(partition)
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


def load_missing(partition: Partition) -> Snapshot:
    """What `load` reads for a partition that has no file: the empty document."""
    return Snapshot(empty_document(partition.scope), revision_of(None, 0), 0)


def read(partition: Partition) -> Snapshot | Damaged:
    """`load`, with a damaged file returned rather than raised (for `guarded_call`).

    Raises:
        OSError: the file cannot be read.
    """
    try:
        return load(partition)
    except Damaged as exc:
        return exc


_MISSING = (-1, 0, 0, 0, 0)


def _identity(path: Path) -> tuple[int, int, int, int, int] | None:
    """What changes whenever a regular file is rewritten: size, mtime, ctime, inode, device.

    `_MISSING` when there is no file; None when it cannot be told (not a regular file, or
    the stat failed otherwise): such a file is always read.
    """
    try:
        status = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return _MISSING
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (
        status.st_size,
        status.st_mtime_ns,
        status.st_ctime_ns,
        status.st_ino,
        status.st_dev,
    )


class ReadCache:
    """The snapshot last read from each partition file, reused while the file is unchanged.

    A file is read again when its size, mtime, ctime, inode or device differ from the read
    the snapshot came from. Only a file that had not changed for `_SETTLED_NS` before it was
    read is kept: a change within the same tick of the file system's clock would leave its
    times as they were. Safe to use from several worker threads.
    """

    def __init__(self, kept: int, kept_bytes: int) -> None:
        """Keep at most `kept` snapshots whose documents take at most `kept_bytes` in all."""
        self._kept = kept
        self._kept_bytes = kept_bytes
        self._bytes = 0  # the documents' sizes, summed over what is kept
        self._lock = threading.Lock()
        self._known: OrderedDict[str, tuple[tuple[int, int, int, int, int], Snapshot]] = (
            OrderedDict()
        )
        self._empties: OrderedDict[str, Snapshot] = OrderedDict()

    def _empty(self, partition: Partition) -> Snapshot:
        # the same object each time, so facts built from it can be reused too
        with self._lock:
            empty = self._empties.get(partition.name)
            if empty is None:
                empty = load_missing(partition)
                self._empties[partition.name] = empty
                while len(self._empties) > self._kept:
                    self._empties.popitem(last=False)
        return empty

    def read(self, partition: Partition) -> Snapshot | Damaged:
        """`read(partition)`, without reading a file that is as it was at its last read.

        Raises:
            OSError: the file cannot be read.
        """
        before = _identity(partition.data)
        if before == _MISSING:
            return self._empty(partition)
        if before is not None:
            with self._lock:
                known = self._known.get(partition.name)
            if known is not None and known[0] == before:
                return known[1]
        started = time.time_ns()
        result = read(partition)
        if (
            before is not None
            and isinstance(result, Snapshot)
            and started - max(before[1], before[2]) >= _SETTLED_NS
            and _identity(partition.data) == before  # not replaced while it was read
        ):
            with self._lock:
                replaced = self._known.pop(partition.name, None)
                if replaced is not None:
                    self._bytes -= replaced[1].size
                self._known[partition.name] = (before, result)
                self._bytes += result.size
                # bounded in count and in bytes; the least recently read go first
                while len(self._known) > self._kept or self._bytes > self._kept_bytes:
                    _, (_, dropped) = self._known.popitem(last=False)
                    self._bytes -= dropped.size
        return result


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
            `schema_mismatch` (the file is damaged, or a link; it is left exactly as it is),
            `runtime-unsafe-path` (the lock file is a symbolic link) or `cancelled`
            (`abandoned` was set before the write began; nothing was written).
        OSError: the file or its folder cannot be read or written.
    """
    # the folder holds what the agent remembers about people: private, whatever the umask
    private_folder(partition.directory)
    try:
        with hold_lock(partition.lock, lock_timeout, abandoned=abandoned):
            return _locked(partition, step, abandoned)
    except SourceError as exc:
        if exc.code == "unsafe-path" and os.path.islink(partition.lock):
            raise link_error(partition.lock) from None
        raise


def _locked(
    partition: Partition, step: Callable[[Snapshot], Applied], abandoned: threading.Event
) -> tuple[Snapshot, Applied]:
    # a file restored by hand with looser permissions is made private at the next write,
    # even one that is refused and leaves the content as it is; a link is left to load()
    if not os.path.islink(partition.data):
        tighten_file(partition.data)
    # a writer killed mid-write leaves its temporary file; only the lock holder writes one
    remove_leftovers(partition.data, earlier_names=partition.earlier_temporaries)
    try:
        current = load(partition)
    except Damaged as exc:
        raise damaged_error(partition, exc.problem) from None
    applied = step(current)
    if applied.document is None or applied.encoded is None:
        return current, applied
    if abandoned.is_set():
        raise SourceError("cancelled", "the caller stopped waiting; nothing was written")
    write_atomically(partition.data, applied.encoded)
    after = Snapshot(
        applied.document,
        revision_of(applied.encoded, applied.document.sequence),
        capped_size(applied.document),
    )
    return after, applied
