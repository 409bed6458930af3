"""Connections to one SQLite store file: WAL, a busy timeout, a pool, honest errors.

Connections are made lazily in worker threads and handed to one thread at a time. One given
back is kept for the next call (its page cache and parsed schema stay warm) up to
`MAX_IDLE`, which is above the number of worker threads that can hold one at once (anyio's
default limit is 40): under load a store keeps as many connections as were lent at the
busiest moment instead of opening and closing one per call. Beyond the `KEEP_WARM` given
back last, a connection left idle for `IDLE_SECONDS` is closed when another one comes back,
so a burst does not keep its connections (and their page caches) for good. Every one is
closed by `close()` or when it is given back after `close()`.

Writers take turns before they ask SQLite for the file's write lock. Those of one process
queue, and one of them at a time writes the queue's requests together (group commit). Then
one writer per process takes a lock file beside the store (`<store>-writers`), tried again
every millisecond: without it, a writer that meets another process's transaction waits in
SQLite's busy handler, which sleeps up to 100 ms between tries, however soon the other
transaction ends, and with several host processes on one store that made the slowest writes
many times the typical one. Threads waiting for either turn say so (`mnemon.sdk.waiting()`),
so the reads queued behind them get threads of their own. The lock file only orders
writers; SQLite's own locking still decides, so a process that does not take it (an older
version, the `sqlite3` shell) is still waited for through the busy timeout.

Memories are private: the store file (and SQLite's `-wal` and `-shm` beside it, which take
its mode) is 0600 and the folders made for it are 0700, whatever the umask; an existing
store with wider modes is tightened the first time it is opened.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from mnemon.sdk import SourceError, storage, waiting

from ._provider import ProviderError
from ._sqlite_schema import CURRENT_VERSION, SchemaMismatch, ensure_schema

__all__ = ["StoreConnections", "make_private", "store_error", "store_reason"]

MAX_IDLE = 64  # see the module's docstring: never below the worker threads' limit
KEEP_WARM = 4
IDLE_SECONDS = 60.0
WRITERS_SUFFIX = "-writers"  # the lock file writers of every process take turns on
# a write holds the turn for a millisecond or two: a waiter tries again every millisecond, or
# a process whose writers keep coming would pass the turn among them while the other sleeps
WRITERS_PAUSE = 0.001
GROUP_LIMIT = 64  # requests written in one transaction by `write_together`
_R = TypeVar("_R")
_T = TypeVar("_T")
STORE_SUFFIXES = ("", "-wal", "-shm", "-journal", WRITERS_SUFFIX)
_FILE_LOCKS: dict[str, tuple[threading.Lock, threading.Lock]] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _file_locks(path: Path) -> tuple[threading.Lock, threading.Lock]:
    """The (schema, write) locks of one store file, shared by every pool of this process.

    Two runtimes of one Source may use the same file at once (a generation draining while
    its successor serves); they must take turns with each other, not only with themselves.
    """
    key = str(path.resolve())
    with _FILE_LOCKS_GUARD:
        if key not in _FILE_LOCKS:
            _FILE_LOCKS[key] = (threading.Lock(), threading.Lock())
        return _FILE_LOCKS[key]


def make_private(path: Path, *, own_folder: bool) -> None:
    """Make the store at `path` private: 0600 files, 0700 folders made for it.

    The file is created 0600 before SQLite opens it, so SQLite's `-wal` and `-shm` (which
    copy the database file's mode) are 0600 too. `own_folder` says the folder is this
    Source's own data folder, which is narrowed to 0700 when it already exists; a folder an
    operator chose for a configured `path` is only created, never changed.

    Raises:
        SourceError: `unsafe-path` when the Source's own folder is a symbolic link.
        OSError: the folder or file cannot be created or changed.
    """
    if own_folder or not os.path.lexists(path.parent):
        storage.private_folder(path.parent)
    with suppress(FileExistsError):
        os.close(storage.open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    for suffix in STORE_SUFFIXES:
        part = path.with_name(path.name + suffix)
        # an operator's link is left alone: its target is theirs to secure
        if part.is_file() and not part.is_symlink():
            storage.tighten_file(part)


def store_error(exc: BaseException) -> ProviderError:
    """The `ProviderError` a failure of the store maps to (its text is not copied)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, SourceError):  # mnemon.sdk.storage refused a symbolic link
        return ProviderError("unavailable", "the store's folder or file is a symbolic link")
    if isinstance(exc, SchemaMismatch):
        return ProviderError("schema_mismatch", "the store's schema is not one this version reads")
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            return ProviderError("timeout", "the store stayed locked past the busy timeout")
        if "unable to open" in text or "readonly" in text or "disk i/o" in text:
            return ProviderError("unavailable", "the store file cannot be opened or written")
    if isinstance(exc, sqlite3.DatabaseError):
        text = str(exc).lower()
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return ProviderError("unavailable", "the store file is damaged")
    if isinstance(exc, OSError):
        return ProviderError("unavailable", "the store's folder cannot be created or read")
    return ProviderError("provider_error", "the store failed")


def store_reason(exc: BaseException) -> str:
    """A coded, non-sensitive reason for a status report."""
    error = store_error(exc)
    if error.code == "schema_mismatch":
        return "schema-mismatch"
    if error.code == "timeout":
        return "store-busy"
    if "damaged" in str(error):
        return "damaged-store"
    if error.code == "unavailable":
        return "store-unreachable"
    return "store-failed"


class _Queued(Generic[_R, _T]):
    """One request waiting for the write turn, and what became of it."""

    __slots__ = ("error", "lead", "request", "result", "settled", "taken")

    def __init__(self, request: _R) -> None:
        self.request = request
        self.taken = False  # a writer holding the turn has it (set under the queue lock)
        self.lead = False  # it is this request's caller's turn to write (set under the lock)
        # set once the request is written (or failed), or when its caller is to lead
        self.settled = threading.Event()
        self.result: _T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> _T:
        if self.error is not None:
            raise self.error
        if self.result is None:  # the writer holding the turn was interrupted mid-way
            raise ProviderError("provider_error", "the write was interrupted")
        return self.result


class StoreConnections:
    """A pool of connections to one store file, made and migrated on first use."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int,
        synchronous: Literal["full", "normal"],
        own_folder: bool = False,
    ) -> None:
        self.path = path
        self._own_folder = own_folder
        self._private = False
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = synchronous.upper()
        # (when it was given back, connection), the last given back last: lent from the end
        self._idle: list[tuple[float, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        # writers of this process queue here in order instead of busy-sleeping on the file lock
        self._schema_lock, self._write_lock = _file_locks(path)
        self._writers = path.with_name(path.name + WRITERS_SUFFIX)
        self._queued: deque[_Queued[Any, Any]] = deque()
        self._queue_lock = threading.Lock()
        self._leading = False  # a caller of `write_together` writes the queued requests
        self._schema_ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"StoreConnections(closed={self._closed})"

    def _open(self) -> sqlite3.Connection:
        if not self._private:
            make_private(self.path, own_folder=self._own_folder)
            self._private = True
        connection = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,  # transactions are explicit: BEGIN IMMEDIATE for writes
            check_same_thread=False,  # handed to one worker thread at a time by the pool
            cached_statements=128,
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
            # switching the journal needs the file to itself: only do it the first time
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                with self._schema_lock:
                    # of several processes opening a new store, those that meet another's
                    # schema creation or switch wait for it instead of reporting `store-busy`
                    storage.switch_to_wal(connection, self._busy_timeout_ms / 1000)
            connection.execute(f"PRAGMA synchronous = {self._synchronous}")
            self._check_schema(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        if self._schema_ready:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version == CURRENT_VERSION:
                return
        with self._schema_lock:
            ensure_schema(connection)
            self._schema_ready = True

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """Lend one connection to the calling thread.

        Raises:
            ProviderError: the pool is closed, or the store cannot be opened.
        """
        with self._lock:
            if self._closed:
                raise ProviderError("unavailable", "the provider is disposed")
            connection = self._idle.pop()[1] if self._idle else None
        if connection is None:
            try:
                connection = self._open()
            except (sqlite3.Error, OSError, SchemaMismatch, SourceError) as exc:
                raise store_error(exc) from None
        try:
            yield connection
        finally:
            if connection.in_transaction:  # only after a failure: never reuse a torn state
                with suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            now = time.monotonic()
            stale: list[sqlite3.Connection] = []
            with self._lock:
                if not self._closed and len(self._idle) < MAX_IDLE:
                    self._idle.append((now, connection))
                else:
                    stale.append(connection)
                while len(self._idle) > KEEP_WARM and self._idle[0][0] < now - IDLE_SECONDS:
                    stale.append(self._idle.pop(0)[1])
            for unused in stale:
                unused.close()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store's write turn: this process's, then the lock file shared with others.

        Raises:
            ProviderError: `timeout` when the turn does not come within the busy timeout;
                `unavailable` when the lock file cannot be made (a link stands there, say).
        """
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        with self._process_turn(deadline), self._file_turn(deadline):
            yield

    def write_together(self, request: _R, write: Callable[[list[_R]], list[_T]]) -> _T:
        """Write `request` in one transaction with the others of this pool waiting for the turn.

        Group commit: one caller at a time leads. The leader takes the process's and the
        file's turn, then writes every request queued by then (up to `GROUP_LIMIT`; taken
        once the file's turn is had, so the requests queued while another process wrote go
        in too) with `write`: one transaction, one result per request, in order. Each
        request's caller is woken with its own result; when requests are left queued, the
        caller of the first is woken to lead next. Followers wait each on its own event
        rather than on a lock passed from one to the next: every hand-over of a lock needs
        the GIL, which a busy event loop keeps for milliseconds, and a queue drained that
        way took as many milliseconds per follower. When the transaction fails for a reason
        other than the store staying locked, each request is written again on its own, so
        that one bad request fails alone.

        Raises:
            ProviderError: `timeout` when the turn does not come within the busy timeout
                (the request was not written); whatever `write` raised for this request.
        """
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        mine = _Queued[_R, _T](request)
        with self._queue_lock:
            self._queued.append(mine)
            mine.lead = not self._leading
            self._leading = True
        if not mine.lead:
            self._follow(mine, deadline)
        if mine.lead:
            try:
                with self._process_turn(deadline):  # this pool's other writes, other pools'
                    self._write_group(mine, write, deadline)
            except ProviderError:
                with self._queue_lock:
                    if not mine.taken:  # nobody writes it now: the caller hears of it
                        self._queued.remove(mine)
                        raise
            finally:
                self._hand_over()
        return mine.outcome()

    def _follow(self, mine: _Queued[_R, _T], deadline: float) -> None:
        """Wait until `mine` is written or its caller is to lead (`mine.lead`).

        Raises:
            ProviderError: `timeout` when neither happens within the busy timeout.
        """
        with waiting():
            if mine.settled.wait(max(0.0, deadline - time.monotonic())):
                return
        with self._queue_lock:
            if not (mine.lead or mine.taken):  # else settled just now: lead, or collect it
                self._queued.remove(mine)
                raise ProviderError("timeout", "the store's writers stayed busy past the timeout")
        if not mine.lead:
            with waiting():  # a writer has it: the writer always finishes it
                mine.settled.wait()

    def _hand_over(self) -> None:
        """Wake the caller of the first request still queued to lead next, or stop leading."""
        with self._queue_lock:
            if not self._queued:
                self._leading = False
                return
            following = self._queued[0]
            following.lead = True
        following.settled.set()

    def _take(self, mine: _Queued[_R, _T]) -> list[_Queued[_R, _T]]:
        """`mine` and the requests queued before others, up to `GROUP_LIMIT` (queue lock held)."""
        self._queued.remove(mine)
        group = [mine]
        while self._queued and len(group) < GROUP_LIMIT:
            group.append(self._queued.popleft())
        for queued in group:
            queued.taken = True
        return group

    def _write_group(
        self, mine: _Queued[_R, _T], write: Callable[[list[_R]], list[_T]], deadline: float
    ) -> None:
        """Take the file's turn, then write `mine` with the requests queued by then.

        The group is taken once the turn is had, so the requests queued while another
        process wrote go in too. Every member taken is finished, whatever happens.
        """
        group = [mine]
        try:
            with self._file_turn(deadline):
                with self._queue_lock:
                    group = self._take(mine)
                try:
                    for queued, result in zip(
                        group, write([queued.request for queued in group]), strict=True
                    ):
                        queued.result = result
                except Exception as exc:
                    if len(group) == 1 or store_error(exc).code == "timeout":
                        for queued in group:
                            queued.error = exc
                    else:  # perhaps one request's fault: each on its own
                        for queued in group:
                            try:
                                [queued.result] = write([queued.request])
                            except Exception as alone:
                                queued.error = alone
        except Exception as exc:  # the file's turn did not come: nothing was taken
            with self._queue_lock:
                if not mine.taken:  # still queued: no later writer may write it now
                    self._queued.remove(mine)
            for queued in group:
                queued.error = exc
        finally:
            for queued in group:
                queued.settled.set()

    @contextmanager
    def _process_turn(self, deadline: float) -> Iterator[None]:
        if not self._write_lock.acquire(blocking=False):
            with waiting():  # behind this process's other writers: the thread computes nothing
                taken = self._write_lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
            if not taken:
                raise ProviderError("timeout", "the store's writers stayed busy past the timeout")
        try:
            yield
        finally:
            self._write_lock.release()

    @contextmanager
    def _file_turn(self, deadline: float) -> Iterator[None]:
        with ExitStack() as turn:
            try:
                remaining = max(0.0, deadline - time.monotonic())
                turn.enter_context(
                    storage.hold_lock(self._writers, remaining, longest_pause=WRITERS_PAUSE)
                )
            except SourceError as exc:
                if exc.code == "timeout":
                    raise ProviderError(
                        "timeout", "the store's writers stayed busy past the timeout"
                    ) from None
                raise store_error(exc) from None
            except OSError as exc:
                raise store_error(exc) from None
            yield

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back (idempotent)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, connection in idle:
            connection.close()
