"""The workspace folder on disk: partition names, document ids and files, old leftovers.

Opening, writing, locking and cleaning up files is `mnemon.sdk.storage`'s; this module knows what
the documents Source keeps where.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from mnemon.sdk import Scope, ScopePartition, SourceError, scope_partition
from mnemon.sdk.storage import open_regular

__all__ = [
    "DOCUMENT_ID_PATTERN",
    "MAX_FILE_BYTES",
    "FileStat",
    "Scan",
    "derived_document_id",
    "document_path",
    "is_document_id",
    "new_document_id",
    "partition_name",
    "read_document_file",
    "remove_legacy_temporaries",
    "scan_documents",
]

#: the stem of a document file, which is also the document's handle
DOCUMENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_DOCUMENT_ID = re.compile(DOCUMENT_ID_PATTERN)
_SUFFIX = ".md"
#: files larger than this (placed by hand) are not indexed; ours are far smaller
MAX_FILE_BYTES = 16 * 1024 * 1024
# the names versions before mnemon.sdk.storage gave their temporaries (a document being written,
# an index being rebuilt, and SQLite's side files of the latter): a store written by one of
# them may still hold some after a crash
_LEGACY_TEMPORARY = re.compile(r"\.mnemon-[0-9a-f]{32}\.tmp(?:-wal|-shm|-journal)?")


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
    partition = scope_partition(scope, ["workspace"])
    if partition is None:
        return None
    name = _NAMES.get(partition.key)
    if name is None:
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        name = _NAMES[partition.key] = _folder_name(partition)
    return name


# folder names already derived, by partition key: every turn asks for one
_NAMES: dict[str, str] = {}
_NAMES_KEPT = 4_096


def _folder_name(partition: ScopePartition) -> str:
    # named as stores were named before `ScopePartition.key` existed, so they are still found
    identity = json.dumps(
        {
            "tenant_id": partition.values.get("tenant_id"),
            "workspace": partition.values["workspace"],
        },
        sort_keys=True,
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
        # a user's file: its mode is left as it is
        handle = open_regular(path)
    except FileNotFoundError:
        return None
    except SourceError as exc:
        if exc.code == "unsafe-path":
            return None
        raise
    with os.fdopen(handle, "rb") as stream:
        status = os.fstat(stream.fileno())
        if status.st_size > MAX_FILE_BYTES:
            return None
        raw = stream.read(MAX_FILE_BYTES + 1)
    if len(raw) != status.st_size:
        return None  # changed while being read: the next scan sees the new version
    return raw, FileStat.of(status)


def remove_legacy_temporaries(folder: Path) -> None:
    """Remove temporaries an earlier version's killed writer left (exclusive lock held).

    Only regular files named exactly as earlier versions named them (`.mnemon-<32 hex>.tmp`,
    or SQLite's side files of one) are removed: a user's `.tmp-notes` is never touched.
    """
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
        for entry in entries:
            if _LEGACY_TEMPORARY.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
