"""Partitions in PostgreSQL (`store = "postgres"`): one row per scope partition, fenced writes.

A partition is one row: its encoded document (the same bytes the file store writes, so the
revision, the byte cap and the idempotency records are exactly the file store's) and a row
version. A write reads the row, applies the change, and updates the row only if its version
is still the one it read (optimistic fencing, no lock held across the change). When another
host wrote in between, the change is applied again to the new document, until the lock
timeout; so two hosts writing the same user's facts never lose a write. A fenced write
(`expected_revision`) whose partition moved on is refused with `RevisionConflict`, as with
files. psycopg is imported only when this store is configured (the `postgres` extra).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mnemon import SourceError

from ._document import Applied, Damaged, capped_size, decode, empty_document, revision_of
from ._store import MAX_FILE_BYTES, Partition, Snapshot

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresPartitions"]

_log = logging.getLogger(__name__)

_SCHEMA_VERSION = 1
_RETRY_PAUSE = 0.005


class _QuietPool(logging.Filter):
    """Keeps psycopg_pool's records about this store's pool out of INFO+ logs.

    They quote the driver's connection errors and connections, which name the server (part
    of the `dsn`, a secret); they are passed on at DEBUG as their bare template.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return True
        ours = any(arg == self._name for arg in (record.args or ()) if isinstance(arg, str))
        if ours or record.msg in _CONNECTION_DETAIL:
            _log.debug("connection pool: %s", record.msg)
            return False
        return True


# psycopg_pool's messages quoting a connection or a connection error (whichever pool)
_CONNECTION_DETAIL = frozenset(
    {
        "error connecting in %r: %s",
        "connection failed check: %s",
        "discarding broken connection: %s",
        "discarding closed connection: %s",
    }
)


_QUIETED: set[str] = set()


def _quiet_pool_logs(name: str) -> None:
    if name not in _QUIETED:
        _QUIETED.add(name)
        logging.getLogger("psycopg.pool").addFilter(_QuietPool(name))


class PostgresPartitions:
    """The runtime store on one PostgreSQL schema; blocking, called in worker threads."""

    def __init__(self, dsn: str, schema: str, *, wait: float = 5.0, pool_max: int = 4) -> None:
        self._dsn = dsn
        self._wait = wait
        self._schema = schema
        self._pool_max = pool_max
        self._pool: ConnectionPool[Connection[Any]] | None = None
        self._guard = threading.Lock()
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresPartitions(schema={self._schema!r})"

    def _connection_pool(self) -> ConnectionPool[Connection[Any]]:
        with self._guard:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                _quiet_pool_logs("mnemon-runtime")
                self._pool = ConnectionPool(
                    self._dsn,
                    min_size=0,
                    max_size=self._pool_max,
                    timeout=self._wait,
                    kwargs={"connect_timeout": 5, "autocommit": True},
                    configure=_configure,
                    check=ConnectionPool.check_connection,
                    name="mnemon-runtime",
                    open=True,
                )
            return self._pool

    def _table(self) -> Any:
        from psycopg import sql

        return sql.SQL("{}.partitions").format(sql.Identifier(self._schema))

    def _ensure(self, connection: Connection[Any]) -> None:
        if self._ready:
            return
        from psycopg import sql

        name = sql.Identifier(self._schema)
        with connection.transaction():
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"mnemon-runtime:{self._schema}",),
            )
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.schema_version (version integer NOT NULL)"
                ).format(name)
            )
            row = connection.execute(
                sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_version").format(name)
            ).fetchone()
            version = int(row[0]) if row is not None else 0
            if version > _SCHEMA_VERSION:
                raise SourceError(
                    "schema_mismatch", "the runtime schema in PostgreSQL is newer than this code"
                )
            if version == 0:
                connection.execute(
                    sql.SQL(
                        "CREATE TABLE {}.partitions (name text PRIMARY KEY, "
                        "document bytea NOT NULL, row_version bigint NOT NULL)"
                    ).format(name)
                )
                connection.execute(
                    sql.SQL("INSERT INTO {}.schema_version (version) VALUES (%s)").format(name),
                    (_SCHEMA_VERSION,),
                )
        self._ready = True

    def _load(self, connection: Connection[Any], partition: Partition) -> tuple[Snapshot, int]:
        self._ensure(connection)
        row = connection.execute(
            self._sql("SELECT document, row_version FROM {table} WHERE name = %s"),
            (partition.name,),
        ).fetchone()
        if row is None:
            return Snapshot(empty_document(partition.scope), revision_of(None, 0), 0), 0
        raw, version = bytes(row[0]), int(row[1])
        if len(raw) > MAX_FILE_BYTES:
            raise Damaged(f"the row is larger than {MAX_FILE_BYTES} bytes", "damaged")
        document = decode(raw, partition.scope)
        return Snapshot(
            document, revision_of(raw, document.sequence), capped_size(document)
        ), version

    def _sql(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(table=self._table())

    def read(self, partition: Partition) -> Snapshot | Damaged:
        """The partition as it is now, or the damage found in its row.

        Raises:
            SourceError: `unavailable` or `timeout` (the database could not answer).
        """
        try:
            with self._connection_pool().connection() as connection:
                return self._load(connection, partition)[0]
        except Damaged as exc:
            return exc
        except Exception as exc:
            if not _is_database_error(exc):
                raise
            raise _error(exc) from None

    def transact(
        self,
        partition: Partition,
        step: Callable[[Snapshot], Applied],
        lock_timeout: float,
        abandoned: threading.Event,
    ) -> tuple[Snapshot, Applied]:
        """Read, change and write the partition, fenced by its row version.

        Raises:
            SourceError: `timeout` (other hosts kept winning for `lock_timeout` seconds;
                nothing was written), `cancelled`, `schema_mismatch` (the row is damaged),
                `unavailable`; or what `step` raises (a revision conflict, a refusal).
        """
        deadline = time.monotonic() + lock_timeout
        try:
            with self._connection_pool().connection() as connection:
                while True:
                    try:
                        current, version = self._load(connection, partition)
                    except Damaged as exc:
                        raise SourceError(
                            "schema_mismatch",
                            f"runtime partition {partition.name} is damaged in PostgreSQL "
                            f"({exc.problem}); nothing is written to it until it is repaired",
                        ) from None
                    applied = step(current)
                    if applied.document is None or applied.encoded is None:
                        return current, applied
                    if abandoned.is_set():
                        raise SourceError(
                            "cancelled", "the caller stopped waiting; nothing was written"
                        )
                    if self._write(connection, partition, version, applied.encoded):
                        after = Snapshot(
                            applied.document,
                            revision_of(applied.encoded, applied.document.sequence),
                            capped_size(applied.document),
                        )
                        return after, applied
                    # another host wrote first: apply the change again to its document
                    if time.monotonic() >= deadline:
                        raise SourceError(
                            "timeout",
                            "other hosts kept changing this partition; nothing was written",
                        )
                    time.sleep(_RETRY_PAUSE)
        except Exception as exc:
            # what the step raised (a revision conflict, a refusal) passes unchanged
            if not _is_database_error(exc):
                raise
            raise _error(exc) from None

    def _write(
        self, connection: Connection[Any], partition: Partition, version: int, encoded: bytes
    ) -> bool:
        if version == 0:
            cursor = connection.execute(
                self._sql(
                    "INSERT INTO {table} (name, document, row_version) VALUES (%s, %s, 1) "
                    "ON CONFLICT (name) DO NOTHING"
                ),
                (partition.name, encoded),
            )
        else:
            cursor = connection.execute(
                self._sql(
                    "UPDATE {table} SET document = %s, row_version = row_version + 1 "
                    "WHERE name = %s AND row_version = %s"
                ),
                (encoded, partition.name, version),
            )
        return cursor.rowcount == 1

    def close(self) -> None:
        """Close the pool (idempotent)."""
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=1.0)


def _configure(connection: Connection[Any]) -> None:
    # a write's receipt says committed only once the commit is flushed
    connection.execute("SET synchronous_commit = on")


def _is_database_error(exc: BaseException) -> bool:
    import psycopg
    from psycopg_pool import PoolTimeout

    return isinstance(exc, psycopg.Error | PoolTimeout | OSError)


def _error(exc: BaseException) -> SourceError:
    """The SourceError a database failure maps to; the driver's text is not copied."""
    import psycopg.errors
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout | psycopg.errors.QueryCanceled):
        return SourceError("timeout", "the runtime database did not answer in time")
    return SourceError("unavailable", "the runtime database cannot be reached")
