"""The SQLite FTS5 index of one workspace: a derived cache, verified and rebuilt from the files.

The index records, per document, the stat of the file version it was built from; whoever
finds the index disagreeing with the files (or damaged, or missing) repairs it under the
workspace's exclusive lock. Nothing in it is ever the only copy of anything.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from mnemon.sdk import SourceError
from mnemon.sdk.storage import open_private, temporary_path, tighten_file

from ._files import FileStat

__all__ = [
    "DocumentIndex",
    "DocumentRecord",
    "Hit",
    "IndexDamaged",
    "IndexedDocument",
    "apply_changes",
    "match_expression",
    "records",
    "search",
]

SCHEMA_VERSION = "1"
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE documents ("
    " n INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " title TEXT NOT NULL,"
    " revision TEXT NOT NULL,"
    " size INTEGER NOT NULL,"
    " mtime_ns INTEGER NOT NULL,"
    " inode INTEGER NOT NULL)",
    "CREATE VIRTUAL TABLE passages USING fts5("
    "title, body, tokenize = 'porter unicode61 remove_diacritics 2')",
)
# a title match weighs more than a body match
_RANK = "bm25(passages, 4.0, 1.0)"
_SEARCH = (
    "SELECT d.id, d.title, d.revision, snippet(passages, 1, '', '', '…', ?), "
    f"{_RANK} FROM passages JOIN documents AS d ON d.n = passages.rowid "
    f"WHERE passages MATCH ? ORDER BY {_RANK}, d.id"
)
_MAX_TERMS = 32
_SNIPPET_TOKENS = 64
_SIDE_FILES = ("-wal", "-shm", "-journal")


class IndexDamaged(Exception):
    """The index is missing, fails its checks, or has another schema: rebuild it."""


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """One document as indexed: handle, title, revision and the file version it came from."""

    id: str
    title: str
    revision: str
    stat: FileStat


@dataclass(frozen=True, slots=True)
class Hit:
    """One search hit: a document, its excerpt and its BM25 score (higher is better)."""

    id: str
    title: str
    revision: str
    excerpt: str
    score: float


@dataclass(frozen=True, slots=True)
class IndexedDocument:
    """What the index stores for one document version."""

    record: DocumentRecord
    body: str


def match_expression(query: str) -> str | None:
    """An FTS5 query matching any of the words of `query`, or None when it has none.

    Every word is quoted as a phrase (inner quotes doubled), so FTS5 operators and syntax in
    user text (`OR`, `NEAR`, `*`, `"`, `:`, parentheses) are searched for, never executed.
    """
    terms = []
    # FTS5 reads the expression as a C string: a NUL would end it inside a quoted phrase
    for word in query.replace("\x00", " ").split():
        if any(char.isalnum() for char in word):
            terms.append('"' + word.replace('"', '""') + '"')
        if len(terms) == _MAX_TERMS:
            break
    return " OR ".join(terms) or None


class DocumentIndex:
    """The index file of one workspace; every call opens and closes its own connection.

    `stamps` remembers, per index file, the stat it had when this process last verified or
    wrote it: a file changed by anyone else is verified again before it is trusted.
    """

    def __init__(
        self, path: Path, stamps: MutableMapping[str, FileStat], busy_timeout: float
    ) -> None:
        self.path = path
        self._stamps = stamps
        self._busy_timeout = busy_timeout

    def stamp(self) -> FileStat | None:
        """The index file's stat now, or None when it is missing."""
        return self._stat()

    def verified_stamp(self) -> FileStat | None:
        """The stat the index file had when this process last verified or wrote it."""
        return self._stamps.get(str(self.path))

    def _stat(self) -> FileStat | None:
        try:
            return FileStat.of(os.stat(self.path))
        except FileNotFoundError:
            return None

    def _connect(self, path: Path, *, journal: str = "WAL") -> sqlite3.Connection:
        connection = sqlite3.connect(
            f"{path.as_uri()}?mode=rw",
            uri=True,
            timeout=self._busy_timeout,
            isolation_level=None,
        )
        try:
            connection.execute(f"PRAGMA journal_mode = {journal}")
            # the files are the source of truth: the cache need not survive a power cut
            connection.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            connection.close()
            raise
        return connection

    @contextlib.contextmanager
    def open(self) -> Iterator[sqlite3.Connection]:
        """A connection on the verified index.

        Raises:
            IndexDamaged: the index is missing, fails its checks or has another schema.
            sqlite3.DatabaseError: the index broke while in use.
        """
        try:
            # private whatever made them; a symlink or FIFO in their place is never followed
            if not tighten_file(self.path):
                raise IndexDamaged("missing")
            for suffix in _SIDE_FILES:
                tighten_file(Path(f"{self.path}{suffix}"))
        except SourceError as exc:
            if exc.code != "unsafe-path":
                raise
            raise IndexDamaged("not a regular file") from exc
        try:
            connection = self._connect(self.path)
        except sqlite3.DatabaseError as exc:
            raise IndexDamaged("cannot open") from exc
        try:
            if self._stamps.get(str(self.path)) != self._stat():
                _verify(connection)
            yield connection
        finally:
            connection.close()
        # closing the last connection checkpoints the log into the file: stamp what we left
        stamp = self._stat()
        if stamp is not None:
            self._stamps[str(self.path)] = stamp

    def rebuild(self, documents: Iterable[IndexedDocument]) -> None:
        """Build a fresh index beside the old one and swap it in (exclusive lock held).

        The new file is built without a journal, so a builder killed mid-way leaves only the
        temporary itself, which `remove_leftovers` knows; it takes the WAL mode once in place.
        """
        temporary = temporary_path(self.path)
        try:
            # created private first: SQLite gives its -wal and -shm the mode of this file
            os.close(open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            connection = self._connect(temporary, journal="OFF")
            try:
                connection.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA:
                    connection.execute(statement)
                connection.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
                )
                for document in documents:
                    _insert(connection, document)
                connection.execute("COMMIT")
            finally:
                connection.close()
            # a log left by the old file must never be replayed onto the new one
            for suffix in _SIDE_FILES:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            os.replace(temporary, self.path)
        finally:
            temporary.unlink(missing_ok=True)
        # the WAL mode is set while the exclusive lock keeps every other connection away
        self._connect(self.path).close()
        stamp = self._stat()
        if stamp is not None:
            self._stamps[str(self.path)] = stamp


def records(connection: sqlite3.Connection) -> dict[str, DocumentRecord]:
    """Every indexed document, by id."""
    rows = connection.execute(
        "SELECT id, title, revision, size, mtime_ns, inode FROM documents"
    ).fetchall()
    return {
        row[0]: DocumentRecord(row[0], row[1], row[2], FileStat(row[3], row[4], row[5]))
        for row in rows
    }


def apply_changes(
    connection: sqlite3.Connection,
    upserts: Iterable[IndexedDocument],
    removals: Iterable[str] = (),
) -> None:
    """Insert or replace documents and remove others, in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for document_id in removals:
            _delete(connection, document_id)
        for document in upserts:
            _delete(connection, document.record.id)
            _insert(connection, document)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def search(
    connection: sqlite3.Connection,
    expression: str,
    pinned: Mapping[str, str],
    wanted: int,
) -> list[Hit]:
    """Up to `wanted` best hits among documents pinned at exactly their indexed revision."""
    hits: list[Hit] = []
    cursor = connection.execute(_SEARCH, (_SNIPPET_TOKENS, expression))
    try:
        for document_id, title, revision, excerpt, rank in cursor:
            # a document created or changed after the grant was pinned is not this View's
            if pinned.get(document_id) != revision:
                continue
            hits.append(Hit(document_id, title, revision, excerpt or "", -float(rank)))
            if len(hits) >= wanted:
                break
    finally:
        cursor.close()
    return hits


def _verify(connection: sqlite3.Connection) -> None:
    try:
        check = connection.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            raise IndexDamaged("quick_check failed")
        version = connection.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if version is None or version[0] != SCHEMA_VERSION:
            raise IndexDamaged("another schema")
        # FTS5's own check: the full-text index agrees with the text it indexes
        connection.execute("INSERT INTO passages (passages) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        raise IndexDamaged("check failed") from exc


def _delete(connection: sqlite3.Connection, document_id: str) -> None:
    row = connection.execute("SELECT n FROM documents WHERE id = ?", (document_id,)).fetchone()
    if row is not None:
        connection.execute("DELETE FROM passages WHERE rowid = ?", (row[0],))
        connection.execute("DELETE FROM documents WHERE n = ?", (row[0],))


def _insert(connection: sqlite3.Connection, document: IndexedDocument) -> None:
    record = document.record
    cursor = connection.execute(
        "INSERT INTO documents (id, title, revision, size, mtime_ns, inode) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.title,
            record.revision,
            record.stat.size,
            record.stat.mtime_ns,
            record.stat.inode,
        ),
    )
    connection.execute(
        "INSERT INTO passages (rowid, title, body) VALUES (?, ?, ?)",
        (cursor.lastrowid, record.title, document.body),
    )
