"""The connection pool to one PostgreSQL schema: opened lazily, migrated once, honest errors.

The pool (psycopg_pool) is made on first use, so the factory does no I/O. Every connection is
set up with the configured `statement_timeout` and `synchronous_commit = on`, and is checked
before it is lent, so a connection broken by a server restart is replaced instead of failing
a call. Failures map to the Provider SDK's codes, never carrying the driver's text (which can
quote the connection string).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
import psycopg.errors
from mnemon_source_spaces import ProviderError
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout, TooManyRequests

from mnemon.sdk.postgres import classify_database_error, open_async_connection_pool

from ._schema import SchemaMismatch, VectorColumn, ensure_schema, vector_column
from ._settings import PostgresSettings

__all__ = ["SchemaPool", "status_reason", "store_error"]

_log = logging.getLogger(__name__)
#: how long `status()` waits for a connection: it runs every turn and must stay cheap
STATUS_WAIT = 2.0


class _UnknownTextSearch(Exception):
    """`text_search_config` names no configuration installed in the database."""


_MESSAGES = {
    "timeout": "the database did not answer in time",
    "unavailable": "the database cannot be reached",
    "forbidden": "the database role may not do this",
    "unauthorized": "the database refused the credentials",
    "provider_error": "the database failed",
}


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
        if pool is not None and classify_database_error(exc, pool) == "timeout":
            return ProviderError("timeout", "every pooled connection stayed busy")
        return ProviderError("unavailable", _MESSAGES["unavailable"])
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return ProviderError("timeout", "the statement ran past statement_timeout")
    code = classify_database_error(exc, pool) or "provider_error"
    return ProviderError(code, _MESSAGES[code])


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
        #: what the store keeps vectors in (read at the first connection)
        self.vector_column = VectorColumn(None)

    def __repr__(self) -> str:
        return f"SchemaPool(schema={self._settings.schema!r}, closed={self._closed})"

    async def _opened(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        if self._closed:
            raise ProviderError("unavailable", "the provider is disposed")
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                settings = self._settings
                # autocommit (transactions are explicit), synchronous_commit on, the
                # statement_timeout, each connection checked before it is lent
                self._pool = await open_async_connection_pool(
                    settings.connection_string(),
                    name="mnemon-spaces-postgres",
                    min_size=settings.pool_min,
                    max_size=settings.pool_max,
                    wait=settings.pool_timeout,
                    statement_timeout=settings.statement_timeout,
                )
        return self._pool

    async def _migrate(self, connection: AsyncConnection[Any]) -> None:
        if self._migrated:
            return
        namespace, _, name = self._settings.text_search_config.rpartition(".")
        async with connection.transaction():
            # `statement_timeout` bounds each call, not this one-time step: migrating may wait
            # for another host's migration, and takes longer on a loaded server. A caller that
            # gives up still cancels it (psycopg cancels the statement), and it rolls back.
            await connection.execute("SET LOCAL statement_timeout = 0")
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
            self.vector_column = await vector_column(connection, self._settings.schema)
        _log.info("spaces-postgres vectors: %s", self.vector_column.describe())
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
