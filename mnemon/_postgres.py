"""PostgreSQL plumbing for Sources and Providers that keep memory there: pools, errors, logs.

The public face is `mnemon.sdk.postgres`, which documents these.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from typing import TYPE_CHECKING, Any, Literal

from ._errors import DefinitionError

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = [
    "DatabaseErrorCode",
    "check_connection_string",
    "classify_database_error",
    "open_async_connection_pool",
    "open_connection_pool",
    "quiet_pool_logs",
]

DatabaseErrorCode = Literal["timeout", "unavailable", "forbidden", "unauthorized", "provider_error"]

_log = logging.getLogger(__name__)

# psycopg_pool's messages quoting a connection or a connection error (whichever pool)
_CONNECTION_DETAIL = frozenset(
    {
        "error connecting in %r: %s",
        "connection failed check: %s",
        "discarding broken connection: %s",
        "discarding closed connection: %s",
        "rolling back returned connection: %s",
        "closing returned connection: %s",
        "rollback failed: %s: %s. Discarding connection %s",
        "error resetting connection: %s",
    }
)
#: a connection handed back less than this many seconds ago is lent again without a ping
FRESH_SECONDS = 1.0
# when each pooled connection was last handed back (weakly: a closed one is forgotten)
_RETURNED: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()


def _handed_back(connection: object) -> None:
    _RETURNED[connection] = time.monotonic()


def _fresh(connection: object) -> bool:
    # a connection that just finished a call is alive; pinging it would cost a round trip
    # on every call, which is what made a recall cost three round trips instead of two
    returned = _RETURNED.get(connection)
    return returned is not None and time.monotonic() - returned < FRESH_SECONDS


_QUIETED: set[str] = set()


class _QuietPool(logging.Filter):
    """Keeps psycopg_pool's records about one pool out of INFO+ logs.

    They quote the driver's connection errors and connections, which name the server (part
    of the connection string, a secret); they are passed on at DEBUG as their bare template.
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


def quiet_pool_logs(name: str) -> None:
    """Keep the INFO+ records psycopg_pool writes about the pool `name` at DEBUG (idempotent).

    The pools made here do it themselves; call it for a pool you make another way.
    """
    if name not in _QUIETED:
        _QUIETED.add(name)
        logging.getLogger("psycopg.pool").addFilter(_QuietPool(name))


def check_connection_string(dsn: str, *, key: str = "dsn") -> None:
    """Check that `dsn` parses as a libpq connection string or `postgresql://` URI.

    Raises:
        DefinitionError: `"<key>: ..."`; the string itself is never quoted.
    """
    import psycopg.conninfo

    if not dsn.strip():
        raise DefinitionError(f"{key}: required, a libpq connection string or postgresql:// URI")
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # psycopg's message quotes the string, which may hold a password: never passed on
        raise DefinitionError(f"{key}: not a valid connection string") from None


def _session(statement_timeout: float | None) -> list[str]:
    # `committed` is only said once the commit is flushed to the server's disk
    statements = ["SET synchronous_commit = on"]
    if statement_timeout is not None:
        milliseconds = max(1, round(statement_timeout * 1000))
        statements.append(f"SET statement_timeout = {milliseconds:d}")
    return statements


def _connect_options(wait: float) -> dict[str, Any]:
    # libpq counts whole seconds, and 1 can fail a healthy server under load
    return {"autocommit": True, "connect_timeout": max(2, math.ceil(wait))}


def open_connection_pool(
    conninfo: str,
    *,
    name: str,
    max_size: int,
    wait: float,
    min_size: int = 0,
    statement_timeout: float | None = None,
) -> ConnectionPool[Connection[Any]]:
    """Open a blocking pool (its connections are made in the background, as needed).

    `wait` (seconds) bounds both the wait for a free connection and a new connection's
    handshake; `statement_timeout` (seconds) is set on every session when given.
    """
    from psycopg_pool import ConnectionPool

    session = _session(statement_timeout)

    def configure(connection: Connection[Any]) -> None:
        for statement in session:
            connection.execute(statement)

    def check(connection: Connection[Any]) -> None:
        if not _fresh(connection):
            ConnectionPool.check_connection(connection)

    def reset(connection: Connection[Any]) -> None:
        _handed_back(connection)

    quiet_pool_logs(name)
    return ConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=wait,
        kwargs=_connect_options(wait),
        configure=configure,
        check=check,
        reset=reset,
        name=name,
        open=True,
    )


async def open_async_connection_pool(
    conninfo: str,
    *,
    name: str,
    max_size: int,
    wait: float,
    min_size: int = 0,
    statement_timeout: float | None = None,
) -> AsyncConnectionPool[AsyncConnection[Any]]:
    """Open an async pool (it does not wait for its first connection); see the blocking one."""
    from psycopg_pool import AsyncConnectionPool

    session = _session(statement_timeout)

    async def configure(connection: AsyncConnection[Any]) -> None:
        for statement in session:
            await connection.execute(statement)

    async def check(connection: AsyncConnection[Any]) -> None:
        if not _fresh(connection):
            await AsyncConnectionPool.check_connection(connection)

    async def reset(connection: AsyncConnection[Any]) -> None:
        _handed_back(connection)

    pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
        conninfo,
        min_size=min_size,
        max_size=max_size,
        timeout=wait,
        kwargs=_connect_options(wait),
        configure=configure,
        check=check,
        reset=reset,
        name=name,
        open=False,
    )
    quiet_pool_logs(name)
    await pool.open(wait=False)
    return pool


def classify_database_error(
    exc: BaseException, pool: ConnectionPool[Any] | AsyncConnectionPool[Any] | None = None
) -> DatabaseErrorCode | None:
    """The `SourceError` code a psycopg or psycopg_pool failure means; None for anything else.

    A pool that gave no connection in time is `timeout` when every connection it may make
    was busy (exhaustion), and `unavailable` when it could not make one (the server is
    down); without `pool` it is `timeout`. A statement cancelled by `statement_timeout` or a
    lock timeout is `timeout`; a refused role or password is `forbidden` or `unauthorized`; a
    lost or refused connection is `unavailable`; any other database error is
    `provider_error`.
    """
    import psycopg
    import psycopg.errors
    from psycopg_pool import PoolTimeout, TooManyRequests

    if isinstance(exc, PoolTimeout | TooManyRequests):
        if pool is None or pool.get_stats().get("pool_size", 0) >= pool.max_size:
            return "timeout"
        return "unavailable"
    if isinstance(exc, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable):
        return "timeout"
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return "forbidden"
    if isinstance(
        exc, psycopg.errors.InvalidAuthorizationSpecification | psycopg.errors.InvalidPassword
    ):
        return "unauthorized"
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError):
        return "unavailable"
    if isinstance(exc, psycopg.Error):
        return "provider_error"
    return None
