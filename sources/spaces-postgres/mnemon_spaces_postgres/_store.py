"""The connection pool to one PostgreSQL schema: opened lazily, migrated once, honest errors.

The pool (psycopg_pool) is made on first use, so the factory does no I/O. Every connection is
set up with the configured `statement_timeout` and `synchronous_commit = on`, and is checked
before it is lent, so a connection broken by a server restart is replaced instead of failing
a call. Failures map to the Provider SDK's codes, never carrying the driver's text (which can
quote the connection string).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
import psycopg.errors
from mnemon_source_spaces import ProviderError
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout, TooManyRequests

from ._schema import SchemaMismatch, ensure_schema
from ._settings import PostgresSettings

__all__ = ["SchemaPool", "status_reason", "store_error"]

_log = logging.getLogger(__name__)
#: how long `status()` waits for a connection: it runs every turn and must stay cheap
STATUS_WAIT = 2.0


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


class _UnknownTextSearch(Exception):
    """`text_search_config` names no configuration installed in the database."""


def store_error(exc: BaseException, pool: AsyncConnectionPool[Any] | None = None) -> ProviderError:
    """The `ProviderError` a failure maps to (the driver's text is not copied)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, SchemaMismatch):
        return ProviderError("schema_mismatch", "the database's schema is newer than this code")
    if isinstance(exc, _UnknownTextSearch):
        return ProviderError("unavailable", "text_search_config names no installed configuration")
    if isinstance(exc, PoolTimeout | TooManyRequests):
        # every connection busy is exhaustion (a timeout); no connection at all is an outage
        if pool is not None and pool.get_stats().get("pool_size", 0) >= pool.max_size:
            return ProviderError("timeout", "every pooled connection stayed busy")
        return ProviderError("unavailable", "the database cannot be reached")
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return ProviderError("timeout", "the statement ran past statement_timeout")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return ProviderError("forbidden", "the database role may not do this")
    if isinstance(exc, psycopg.errors.InvalidAuthorizationSpecification):
        return ProviderError("unauthorized", "the database refused the credentials")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError):
        return ProviderError("unavailable", "the database cannot be reached")
    return ProviderError("provider_error", "the database failed")


def status_reason(error: ProviderError) -> str:
    """A coded, non-sensitive reason for a status report."""
    if error.code == "schema_mismatch":
        return "schema-mismatch"
    if error.code == "timeout":
        return "store-busy"
    if "text_search_config" in str(error):
        return "unknown-text-search-config"
    if error.code in ("unauthorized", "forbidden"):
        return "store-refused"
    if error.code == "unavailable":
        return "store-unreachable"
    return "store-failed"


_QUIETED: set[str] = set()


def _quiet_pool_logs(name: str) -> None:
    if name not in _QUIETED:
        _QUIETED.add(name)
        logging.getLogger("psycopg.pool").addFilter(_QuietPool(name))


class SchemaPool:
    """Connections to one database, its schema made current before the first is lent."""

    def __init__(self, settings: PostgresSettings) -> None:
        self._settings = settings
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._opening = anyio.Lock()
        self._migrated = False
        self._closed = False
        #: whether a committed write survives a crash: fsync and synchronous_commit are on
        self.durable = True

    def __repr__(self) -> str:
        return f"SchemaPool(schema={self._settings.schema!r}, closed={self._closed})"

    async def _configure(self, connection: AsyncConnection[Any]) -> None:
        await connection.set_autocommit(True)  # transactions are explicit: conn.transaction()
        milliseconds = max(1, round(self._settings.statement_timeout * 1000))
        await connection.execute(f"SET statement_timeout = {milliseconds:d}")
        # `committed` is only said once the commit is flushed to the server's disk
        await connection.execute("SET synchronous_commit = on")

    async def _opened(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        if self._closed:
            raise ProviderError("unavailable", "the provider is disposed")
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                settings = self._settings
                pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
                    settings.connection_string(),
                    min_size=settings.pool_min,
                    max_size=settings.pool_max,
                    timeout=settings.pool_timeout,
                    kwargs={"connect_timeout": max(2, math.ceil(settings.pool_timeout))},
                    configure=self._configure,
                    check=AsyncConnectionPool.check_connection,
                    name="mnemon-spaces-postgres",
                    open=False,
                )
                _quiet_pool_logs("mnemon-spaces-postgres")
                await pool.open(wait=False)
                self._pool = pool
        return self._pool

    async def _migrate(self, connection: AsyncConnection[Any]) -> None:
        if self._migrated:
            return
        namespace, _, name = self._settings.text_search_config.rpartition(".")
        # looked up, not cast: a cast of an unknown name would be an error in the transaction
        cursor = await connection.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.cfgnamespace WHERE c.cfgname = %s "
            "AND (n.nspname = %s OR (%s = '' AND pg_catalog.pg_ts_config_is_visible(c.oid)))), "
            "current_setting('fsync'), current_setting('synchronous_commit')",
            (name, namespace, namespace),
        )
        row = await cursor.fetchone()
        if row is None or not row[0]:
            raise _UnknownTextSearch()
        self.durable = row[1] == "on" and row[2] in ("on", "remote_apply", "remote_write")
        await ensure_schema(connection, self._settings.schema)
        self._migrated = True

    @asynccontextmanager
    async def connection(self, *, wait: float | None = None) -> AsyncIterator[AsyncConnection[Any]]:
        """Lend one connection (schema current) for the body; failures become ProviderError.

        Raises:
            ProviderError: `timeout` (pool exhausted, statement timeout), `unavailable` (no
                server, disposed), `schema_mismatch`, or `provider_error`.
        """
        pool = await self._opened()
        try:
            async with pool.connection(timeout=wait) as connection:
                await self._migrate(connection)
                yield connection
        except ProviderError:
            raise
        except (psycopg.Error, PoolTimeout, SchemaMismatch, _UnknownTextSearch, OSError) as exc:
            _log.debug("a PostgreSQL call failed: %s", type(exc).__name__)
            raise store_error(exc, pool) from None

    async def aclose(self) -> None:
        """Close the pool (idempotent); later calls fail as `unavailable`."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            with anyio.CancelScope(shield=True):
                await pool.close(timeout=1.0)
