"""One workspace partition: its document files and index, read and written under its lock.

Everything here blocks (files, the lock, sqlite3): the Source calls it through
`guarded_call`. Readers hold the lock shared, writers and index repairs hold it exclusive,
across threads and processes alike.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
import stat as stat_module
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mnemon.sdk import RevisionConflict, SourceError
from mnemon.sdk.storage import (
    hold_lock,
    private_folder,
    remove_leftovers,
    remove_leftovers_in,
    write_atomically,
)

from ._config import DocumentsSettings
from ._files import (
    MAX_FILE_BYTES,
    FileStat,
    document_path,
    read_document_file,
    remove_legacy_temporaries,
    scan_documents,
)
from ._index import (
    DocumentIndex,
    DocumentRecord,
    Hit,
    IndexDamaged,
    IndexedDocument,
    apply_changes,
    records,
    search,
)
from ._markdown import document_revision, parse_document, render_document

__all__ = [
    "Document",
    "VerifiedState",
    "Workspace",
    "WorkspaceState",
    "WriteOutcome",
    "workspace_revision",
]

_T = TypeVar("_T")
#: what a read does with the reconciled index: (connection, indexed documents, files skipped)
Use = Callable[[sqlite3.Connection, dict[str, DocumentRecord], int], _T]


#: workspaces whose last state is kept for cheap reuse, per Source runtime
_VERIFIED_KEPT = 64
_VERIFIED_LOCK = threading.Lock()
#: how long after its last change a folder's mtime is trusted to show the next one: longer
#: than the coarsest common file system clock (FAT's two seconds; most are far finer)
_SETTLED_NS = 2_000_000_000


def workspace_revision(documents: Iterable[DocumentRecord]) -> str:
    """The revision of a workspace: a digest of its document ids and their revisions."""
    lines = sorted(f"{record.id} {record.revision}" for record in documents)
    return "documents:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


@dataclass(frozen=True)
class WorkspaceState:
    """The documents of a workspace as they are now (index reconciled with the files)."""

    documents: Mapping[str, DocumentRecord]
    #: files named like documents that are not served (symlinks, FIFOs, devices, huge files)
    skipped: int = 0

    @functools.cached_property
    def revision(self) -> str:
        """The workspace revision of this state (computed once: a state never changes)."""
        return workspace_revision(self.documents.values())


@dataclass(slots=True)
class VerifiedState:
    """A state this process read from an index that agreed with exactly these files.

    `folder` is the stat of `documents/` taken before the scan that found `files`, at wall
    clock `scanned_ns` and monotonic `scanned_at`; `order` is the order of the rolling
    re-check, and `cursor` where the next turn's re-check begins.
    """

    files: Mapping[str, FileStat]
    index: FileStat
    state: WorkspaceState
    folder: FileStat | None = None
    scanned_ns: int = 0
    scanned_at: float = 0.0
    order: tuple[str, ...] = ()
    cursor: int = 0


@dataclass(frozen=True, slots=True)
class Document:
    """One document read in full."""

    record: DocumentRecord
    body: str


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """A durable write: the document as written and the workspace revision after it."""

    record: DocumentRecord
    revision: str
    #: False when the document already was exactly as asked (an idempotent retry)
    written: bool


def _stat(path: Path) -> FileStat | None:
    try:
        return FileStat.of(os.stat(path))
    except OSError:
        return None


def _agrees(indexed: Mapping[str, DocumentRecord], files: Mapping[str, FileStat]) -> bool:
    return indexed.keys() == files.keys() and all(
        indexed[key].stat == stat for key, stat in files.items()
    )


class Workspace:
    """The folder of one workspace partition: `documents/*.md`, `index.sqlite3`, `.lock`."""

    def __init__(
        self,
        folder: Path,
        settings: DocumentsSettings,
        stamps: MutableMapping[str, FileStat],
        verified: MutableMapping[str, VerifiedState] | None = None,
    ) -> None:
        self.folder = folder
        self.documents = folder / "documents"
        self.index = DocumentIndex(folder / "index.sqlite3", stamps, settings.lock_timeout)
        self._lock_file = folder / ".lock"
        self._settings = settings
        # the last state read per workspace folder, reused while files and index are unchanged
        self._verified: MutableMapping[str, VerifiedState] = {} if verified is None else verified

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool, abandon: threading.Event) -> Iterator[None]:
        """Hold the workspace lock: shared to read, exclusive to write or repair.

        Raises:
            SourceError: `timeout` (the lock stayed taken), `cancelled` (the caller stopped
                waiting; nothing was written), `unsafe-lock` (something other than a regular
                file stands at the lock's path; it is never followed or used).
        """
        root = self._settings.root
        # this instance's folders are private, whatever the umask and whatever made them before
        for folder in (root, root / "workspaces", self.folder):
            private_folder(folder)
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(
                    hold_lock(
                        self._lock_file,
                        self._settings.lock_timeout,
                        abandoned=abandon,
                        shared=not exclusive,
                    )
                )
            except SourceError as exc:
                if exc.code != "unsafe-path":
                    raise
                raise SourceError(
                    "unsafe-lock",
                    "documents: the workspace lock file is not a regular file (a symlink, "
                    "FIFO or folder stands at its place); it is never followed or used",
                    kind="terminal",
                ) from None
            yield

    # ------------------------------------------------------------------ reads

    def state(self, abandon: threading.Event, *, fresh: bool = False) -> WorkspaceState:
        """The documents as they are now; repairs the index first if it disagrees.

        Unless `fresh`, when the `documents/` folder, the index file and the document files
        re-checked this turn are exactly as this runtime last verified them, the state read
        then is reused without a scan, the lock or a connection (see the README, "Freshness").

        Raises:
            SourceError: `timeout` (the lock stayed taken), `cancelled` (the caller stopped
                waiting), `unsafe-lock`, or `provider_error` (the index cannot be rebuilt).
        """
        key = str(self.folder)
        known = self._verified.get(key)
        if known is not None and not fresh and self._unchanged(known):
            return known.state
        if not self.folder.is_dir():
            return WorkspaceState({})  # nothing was ever written here: create nothing
        # taken before the scan: a change made while it runs moves the folder past this stat
        scanned_ns, scanned_at = time.time_ns(), time.monotonic()
        folder = _stat(self.documents)
        with self._locked(exclusive=False, abandon=abandon):
            # when nothing moved and the index is the very file this process last verified,
            # no connection is opened
            scan = scan_documents(self.documents)
            if (
                known is not None
                and known.files == scan.files
                and known.state.skipped == scan.skipped
                and known.index == self.index.stamp()
                and known.index == self.index.verified_stamp()
            ):
                self._keep(
                    key,
                    VerifiedState(
                        known.files,
                        known.index,
                        known.state,
                        folder,
                        scanned_ns,
                        scanned_at,
                        known.order,
                        known.cursor,
                    ),
                )
                return known.state
        state = self._consult(
            lambda connection, found, skipped: WorkspaceState(found, skipped), abandon
        )
        stamp = self.index.verified_stamp()
        if stamp is not None:
            files = {key: record.stat for key, record in state.documents.items()}
            self._keep(
                key,
                VerifiedState(
                    files, stamp, state, folder, scanned_ns, scanned_at, tuple(sorted(files))
                ),
            )
        return state

    def _keep(self, key: str, verified: VerifiedState) -> None:
        with _VERIFIED_LOCK:  # worker threads of several turns share the mapping
            self._verified.pop(key, None)
            self._verified[key] = verified
            while len(self._verified) > _VERIFIED_KEPT:  # the least recently read go
                del self._verified[next(iter(self._verified))]

    def _unchanged(self, known: VerifiedState) -> bool:
        """Whether a verified state still holds, by a few stats (no scan, lock or connection).

        Adding, removing or renaming a file in `documents/` moves the folder's mtime; a write
        through this Source does too (it renames into place), and a rebuilt index is another
        file. An edit in place moves only that file's stat: `recheck_files_per_turn` files
        are re-checked per turn, in turn, and every `rescan_seconds` the folder is scanned.
        """
        settings = self._settings
        if time.monotonic() - known.scanned_at >= settings.rescan_seconds:
            return False
        folder = known.folder
        if folder is None or _stat(self.documents) != folder:
            return False
        # a change in the same tick of the file system's clock as the last scan would leave
        # the mtime as it was: a folder changed that recently is scanned until it settles
        if known.scanned_ns - folder.mtime_ns < _SETTLED_NS:
            return False
        stamp = self.index.stamp()
        if stamp != known.index or stamp != self.index.verified_stamp():
            return False
        return self._rechecked(known, settings.recheck_files_per_turn)

    def _rechecked(self, known: VerifiedState, count: int) -> bool:
        order = known.order
        count = min(count, len(order))
        if count == 0:
            return True
        with _VERIFIED_LOCK:
            start = known.cursor
            known.cursor = (start + count) % len(order)
        folder = str(self.documents)
        for index in range(start, start + count):
            document_id = order[index % len(order)]
            try:
                status = os.stat(os.path.join(folder, document_id + ".md"), follow_symlinks=False)
            except OSError:
                return False
            if (
                not stat_module.S_ISREG(status.st_mode)
                or status.st_size > MAX_FILE_BYTES
                or FileStat.of(status) != known.files[document_id]
            ):
                return False
        return True

    def search(
        self, expression: str, pinned: Mapping[str, str], wanted: int, abandon: threading.Event
    ) -> list[Hit]:
        """The best `wanted` hits among documents pinned at their current revision.

        Raises:
            SourceError: as for `state`.
        """
        if not self.folder.is_dir() or not pinned:
            return []
        return self._consult(
            lambda connection, found, skipped: search(connection, expression, pinned, wanted),
            abandon,
        )

    def read(self, document_id: str, abandon: threading.Event) -> Document | None:
        """One document as it is on disk now, or None when this workspace has no such one.

        Raises:
            SourceError: as for `state`.
        """
        if not self.folder.is_dir():
            return None
        with self._locked(exclusive=False, abandon=abandon):
            loaded = self._load(document_id)
        return None if loaded is None else Document(loaded.record, loaded.body)

    def _consult(self, use: Use[_T], abandon: threading.Event) -> _T:
        with self._locked(exclusive=False, abandon=abandon):
            scan = scan_documents(self.documents)
            try:
                with self.index.open() as connection:
                    indexed = records(connection)
                    if _agrees(indexed, scan.files):
                        return use(connection, indexed, scan.skipped)
            except (IndexDamaged, sqlite3.DatabaseError):
                pass  # repaired below, under the exclusive lock
        with self._locked(exclusive=True, abandon=abandon):
            return self._repaired(use)

    # ------------------------------------------------------------------ repair

    def _repaired(self, use: Use[_T]) -> _T:
        """`use` on an index that agrees with the files (exclusive lock held)."""
        try:
            return self._reconciled(use)
        except (IndexDamaged, sqlite3.DatabaseError):
            pass
        try:
            self._rebuild()
            return self._reconciled(use)
        except (IndexDamaged, sqlite3.DatabaseError, OSError) as exc:
            raise SourceError(
                "provider_error", "documents: the search index cannot be rebuilt"
            ) from exc

    def _reconciled(self, use: Use[_T]) -> _T:
        scan = scan_documents(self.documents)
        files = scan.files
        with self.index.open() as connection:
            indexed = records(connection)
            if not _agrees(indexed, files):
                removed = [key for key in indexed if key not in files]
                upserts = []
                for key, stat in files.items():
                    if key in indexed and indexed[key].stat == stat:
                        continue
                    loaded = self._load(key)
                    if loaded is not None:
                        upserts.append(loaded)
                    elif key in indexed:
                        removed.append(key)
                apply_changes(connection, upserts, removed)
                indexed = records(connection)
            return use(connection, indexed, scan.skipped)

    def _load(self, document_id: str) -> IndexedDocument | None:
        found = read_document_file(self.documents, document_id)
        if found is None:
            return None
        raw, stat = found
        parsed = parse_document(raw, document_id)
        record = DocumentRecord(document_id, parsed.title, document_revision(raw), stat)
        return IndexedDocument(record, parsed.body)

    def _all_documents(self) -> Iterator[IndexedDocument]:
        # streamed: a rebuild never holds every body in memory at once
        for document_id in sorted(scan_documents(self.documents).files):
            loaded = self._load(document_id)
            if loaded is not None:
                yield loaded

    def _remove_leftovers(self) -> None:
        # what a writer killed mid-write left; only an exclusive lock holder writes temporaries
        remove_leftovers(self.index.path)
        remove_leftovers_in(self.documents, "*.md")
        for folder in (self.folder, self.documents):
            remove_legacy_temporaries(folder)

    def _rebuild(self) -> None:
        self._remove_leftovers()
        self.index.rebuild(self._all_documents())

    def _index_quietly(self, document: IndexedDocument) -> None:
        try:
            with self.index.open() as connection:
                apply_changes(connection, [document])
        except (IndexDamaged, sqlite3.DatabaseError):
            pass  # the file is committed; the next reader repairs the index from it

    # ------------------------------------------------------------------ writes

    def _current(self, expected: str | None) -> dict[str, DocumentRecord]:
        documents = self._repaired(lambda connection, found, skipped: found)
        if expected is not None:
            current = workspace_revision(documents.values())
            if current != expected:
                raise RevisionConflict(
                    f"revision conflict: the workspace is at {current}, not {expected}"
                )
        return documents

    def _check_size(self, data: bytes, action: str) -> None:
        limit = self._settings.max_document_bytes
        if len(data) > limit:
            raise SourceError(
                "invalid_payload",
                f"documents {action}: the document would be {len(data)} bytes; "
                f"the limit is {limit} (max_document_bytes)",
            )

    def _commit(
        self,
        document_id: str,
        title: str,
        body: str,
        data: bytes,
        documents: Mapping[str, DocumentRecord],
        abandon: threading.Event,
    ) -> WriteOutcome:
        if abandon.is_set():  # the caller is gone: nothing has been written yet
            raise SourceError("cancelled", "documents: the caller stopped waiting")
        if not self.documents.is_dir():
            private_folder(self.documents)  # one that exists keeps the mode its owner chose
        path = document_path(self.documents, document_id)
        write_atomically(path, data)
        stat = FileStat.of(os.stat(path, follow_symlinks=False))
        record = DocumentRecord(document_id, title, document_revision(data), stat)
        self._index_quietly(IndexedDocument(record, body))
        after = {**documents, document_id: record}
        return WriteOutcome(record, workspace_revision(after.values()), written=True)

    def create(
        self,
        document_id: str,
        title: str,
        body: str,
        *,
        expected_revision: str | None,
        abandon: threading.Event,
    ) -> WriteOutcome:
        """Write a new document durably (title and body already checked).

        A `document_id` that exists already is an idempotent retry when its content is the
        same, and an error otherwise.

        Raises:
            RevisionConflict: `expected_revision` is not the workspace's current revision.
            SourceError: `invalid_payload` (too large, or a reused idempotency key),
                `documents-capacity` (the workspace is full), `timeout`, `provider_error`,
                `cancelled` (the caller stopped waiting; nothing was written).
        """
        data = render_document(title, body)
        self._check_size(data, "create")
        with self._locked(exclusive=True, abandon=abandon):
            self._remove_leftovers()
            documents = self._current(expected_revision)
            existing = documents.get(document_id)
            if existing is not None or document_path(self.documents, document_id).exists():
                found = read_document_file(self.documents, document_id)
                if existing is not None and found is not None and found[0] == data:
                    return WriteOutcome(existing, workspace_revision(documents.values()), False)
                raise SourceError(
                    "invalid_payload",
                    "documents create: this idempotency key was used for another document",
                )
            if len(documents) >= self._settings.max_documents:
                raise SourceError(
                    "documents-capacity",
                    f"documents create: the workspace holds {len(documents)} documents, its "
                    f"limit (max_documents)",
                    kind="terminal",
                )
            return self._commit(document_id, title, body, data, documents, abandon)

    def update(
        self,
        document_id: str,
        *,
        title: str | None,
        body: str | None,
        document_revision_expected: str | None,
        expected_revision: str | None,
        accept_applied: bool,
        abandon: threading.Event,
    ) -> WriteOutcome:
        """Replace the title and/or body of a document, fenced by its revision.

        `accept_applied` treats a stale revision as success when the document already reads
        exactly as asked (a retried write with the same idempotency key).

        Raises:
            RevisionConflict: the document (or the workspace) moved past the expected revision.
            SourceError: `not_found`, `invalid_payload` (too large), `timeout`,
                `provider_error`, `cancelled` (the caller stopped waiting; nothing was
                written).
        """
        with self._locked(exclusive=True, abandon=abandon):
            self._remove_leftovers()
            documents = self._current(expected_revision)
            found = read_document_file(self.documents, document_id)
            if found is None or document_id not in documents:
                raise SourceError(
                    "not_found", f"documents update: no document {document_id!r} here"
                )
            raw, _ = found
            current = parse_document(raw, document_id)
            new_title = current.title if title is None else title
            new_body = current.body if body is None else body
            data = render_document(new_title, new_body)
            self._check_size(data, "update")
            revision = document_revision(raw)
            if document_revision_expected is not None and revision != document_revision_expected:
                if accept_applied and raw == data:
                    return WriteOutcome(
                        documents[document_id], workspace_revision(documents.values()), False
                    )
                raise RevisionConflict(
                    f"revision conflict: document {document_id} is at {revision}, "
                    f"not {document_revision_expected}"
                )
            if data == raw:  # already exactly as asked: nothing to write
                return WriteOutcome(
                    documents[document_id], workspace_revision(documents.values()), False
                )
            return self._commit(document_id, new_title, new_body, data, documents, abandon)
