"""The import ledger: the idempotency keys of the records one identity's backend has stored.

Raven's `store(session_id, messages)` cannot tell a record it has taken before from a new one,
so `records-write` keeps, per identity, a SQLite file (WAL mode) of the keys `store` took. A
key is looked up and, once `store` returned, recorded inside one write transaction that is
held across the `store` call: two processes (or two tasks) importing the same records take
turns, and never both store one key. A key is recorded only after `store` returned; a
process killed between the two leaves it unrecorded, so at worst the record is stored again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio

from mnemon.sdk import SourceError, run_blocking
from mnemon.sdk.storage import open_private, private_folder, switch_to_wal

__all__ = ["LEDGER_WAIT", "ImportLedger", "LedgerHold"]

#: seconds a batch waits for another import of the same identity before it gives up
LEDGER_WAIT = 30.0
_VERSION = 1
_FIRST_DELAY = 0.001
_LONGEST_DELAY = 0.02
_OPEN_WAIT = 5.0  # seconds opening waits for another process's lock (SQLite's busy timeout)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS imported ("
    " backend TEXT NOT NULL, key TEXT NOT NULL, stored_at TEXT NOT NULL,"
    " PRIMARY KEY (backend, key)) WITHOUT ROWID"
)


class LedgerHold:
    """The ledger held for one key: whether it is there, and whether to record it."""

    def __init__(self, present: bool) -> None:
        self.present = present
        self._record = False

    def record(self) -> None:
        """Record the key when the hold ends without an error (call it once `store` returned)."""
        self._record = True

    @property
    def recorded(self) -> bool:
        """Whether the key is to be recorded."""
        return self._record


class ImportLedger:
    """One identity's ledger file, open for one batch of `records-write`.

    Args:
        path: the ledger file (its folder is made private if missing).
        shown: how messages name the file (relative to the entry's data folder: a full path
            may carry a secret).
        backend: the entry's `backend`: keys are kept per backend, so an entry pointed at
            another backend stores the records again.
        wait: seconds to wait for another import holding the ledger.
    """

    def __init__(self, path: Path, shown: str, backend: str, *, wait: float = LEDGER_WAIT) -> None:
        self._path = path
        self.shown = shown
        self._backend = backend
        self._wait = wait
        self._connection: sqlite3.Connection | None = None

    async def __aenter__(self) -> ImportLedger:
        """Open the ledger (see `open`).

        Raises:
            SourceError: as `open` does.
        """
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the ledger."""
        await self.aclose()

    async def open(self) -> None:
        """Open the ledger, making it when it does not exist.

        Raises:
            SourceError: `ledger-damaged` (the file is not a ledger this version reads; it is
                left as it is), `unsafe-path` (a link where the file belongs), or
                `provider_error` (the folder or file cannot be made or opened).
        """
        try:
            # shielded (it waits at most SQLite's 5 s busy timeout): a cancelled caller never
            # leaves a connection open behind it
            with anyio.CancelScope(shield=True):
                self._connection = await run_blocking(_connect, self._path)
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None
        except OSError:
            raise SourceError(
                "provider_error",
                f"the import ledger {self.shown} cannot be opened; nothing was stored",
                nothing_written=True,
            ) from None

    async def aclose(self) -> None:
        """Close the ledger (what was recorded is already committed); closing twice is fine."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with anyio.CancelScope(shield=True):
                await run_blocking(connection.close)

    def _damaged(self, exc: sqlite3.DatabaseError) -> SourceError:
        """The error for what SQLite said of the ledger (its text is never copied)."""
        text = str(exc).lower()
        if isinstance(exc, sqlite3.OperationalError) and not any(
            word in text for word in ("not a database", "malformed", "corrupt")
        ):
            # the file is fine as far as anyone knows: the disk or a permission failed
            return SourceError(
                "provider_error",
                f"the import ledger {self.shown} cannot be read or written; nothing was stored",
                nothing_written=True,
            )
        newer = isinstance(exc, _NewerLedger)
        reason = "was written by a newer version" if newer else "is damaged or not a ledger"
        return SourceError(
            "ledger-damaged",
            f"the import ledger {self.shown} {reason}; it was left as it is and nothing was "
            "stored (move it aside to import again, which may store records twice)",
            kind="terminal",
            nothing_written=True,
        )

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[LedgerHold]:
        """Hold the ledger for `key`, against every other import of this identity.

        The hold says whether `key` is recorded; when the block ends without an error and
        `record()` was called, the key is recorded and committed (even if the caller is
        cancelled meanwhile). An error or a cancellation inside the block records nothing.

        Raises:
            SourceError: `timeout` (another import held the ledger for `wait` seconds;
                nothing was stored), `ledger-damaged`.
        """
        connection = self._connection
        assert connection is not None, "open the ledger with `async with` first"
        await self._begin(connection)
        try:
            try:
                # every call on the connection is shielded: none may run beside the rollback
                with anyio.CancelScope(shield=True):
                    present = await run_blocking(_contains, connection, self._backend, key)
            except sqlite3.DatabaseError as exc:
                raise self._damaged(exc) from None
            hold = LedgerHold(present)
            yield hold
        except BaseException:
            with anyio.CancelScope(shield=True):
                await run_blocking(_rollback, connection)
            raise
        # `store` returned: the key is recorded even if the caller is cancelled now
        with anyio.CancelScope(shield=True):
            try:
                await run_blocking(_finish, connection, self._backend, key, hold.recorded)
            except sqlite3.DatabaseError as exc:
                await run_blocking(_rollback, connection)
                raise self._damaged(exc) from None

    async def _begin(self, connection: sqlite3.Connection) -> None:
        """Take the ledger's write lock, waiting (cancellably) for another holder."""
        deadline = anyio.current_time() + self._wait
        delay = _FIRST_DELAY
        while True:
            # the attempt never waits (busy timeout 0); shielded, so a cancelled caller never
            # leaves a transaction open behind it
            with anyio.CancelScope(shield=True):
                try:
                    began = await run_blocking(_try_begin, connection)
                except sqlite3.DatabaseError as exc:
                    raise self._damaged(exc) from None
            if began:
                return
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise SourceError(
                    "timeout",
                    f"another import held the import ledger {self.shown} for {self._wait:g} s; "
                    "nothing was stored",
                    nothing_written=True,
                )
            await anyio.sleep(min(delay, remaining))
            delay = min(delay * 2, _LONGEST_DELAY)


class _NewerLedger(sqlite3.DatabaseError):
    """The ledger's schema version is one this version does not read."""


def _connect(path: Path) -> sqlite3.Connection:
    private_folder(path.parent)
    # made 0600 before SQLite opens it (its -wal and -shm copy the mode), never through a link
    os.close(open_private(path, os.O_RDWR | os.O_CREAT))
    connection = sqlite3.connect(
        path, timeout=_OPEN_WAIT, isolation_level=None, check_same_thread=False
    )
    try:
        # another process opening the new ledger too is waited for, not failed
        switch_to_wal(connection, _OPEN_WAIT)
        connection.execute("PRAGMA synchronous=FULL")  # a commit is on disk when it returns
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(_SCHEMA)
                connection.execute(f"PRAGMA user_version = {_VERSION}")
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        elif version != _VERSION:
            raise _NewerLedger("newer")
        connection.execute("SELECT backend, key, stored_at FROM imported LIMIT 0")
        # from now on a lock held elsewhere is waited for by `_begin`, off the thread
        connection.execute("PRAGMA busy_timeout = 0")
    except BaseException:
        connection.close()
        raise
    return connection


def _try_begin(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return False
        raise
    return True


def _contains(connection: sqlite3.Connection, backend: str, key: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM imported WHERE backend = ? AND key = ?", (backend, key)
    ).fetchone()
    return row is not None


def _finish(connection: sqlite3.Connection, backend: str, key: str, record: bool) -> None:
    if record:
        stored_at = datetime.now(UTC).isoformat(timespec="seconds")
        connection.execute(
            "INSERT OR IGNORE INTO imported (backend, key, stored_at) VALUES (?, ?, ?)",
            (backend, key, stored_at),
        )
    connection.execute("COMMIT")


def _rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        connection.execute("ROLLBACK")
