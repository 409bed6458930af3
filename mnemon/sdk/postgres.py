"""PostgreSQL plumbing for Sources and Providers that keep memory there: pools, errors, logs.

Every first-party store on PostgreSQL uses these, and a third-party one gets them for free:

- `check_connection_string(dsn)` checks a libpq connection string or `postgresql://` URI at
  mount, and fails as `DefinitionError` naming the key, never quoting the string (it may
  hold a password).
- `open_connection_pool(...)` and `open_async_connection_pool(...)` make psycopg_pool's
  pools the same way for blocking and async code: connections in autocommit (transactions
  are explicit), `synchronous_commit = on` so a commit is flushed before a receipt may say
  `committed`, an optional `statement_timeout`, a connection that sat idle in the pool for
  a second or more checked before it is lent (one broken by a server restart is replaced
  instead of failing a call; one handed back a moment ago is not pinged, which would cost a
  round trip per call), and the pool's log records that quote the server's address kept
  below INFO.
- `classify_database_error(exc)` maps a driver or pool failure to a `SourceError` code
  (`timeout`, `unavailable`, `forbidden`, `unauthorized`, `provider_error`), so a store can
  raise its own error with a message of its own and never the driver's text.

psycopg 3 and psycopg_pool are imported only when these are called: install the `postgres`
extra of the core distribution (`mnemon-runtime[postgres]`), or a plugin's own extra.
"""

from .._postgres import DatabaseErrorCode as DatabaseErrorCode
from .._postgres import check_connection_string as check_connection_string
from .._postgres import classify_database_error as classify_database_error
from .._postgres import open_async_connection_pool as open_async_connection_pool
from .._postgres import open_connection_pool as open_connection_pool
from .._postgres import quiet_pool_logs as quiet_pool_logs

__all__ = [
    "DatabaseErrorCode",
    "check_connection_string",
    "classify_database_error",
    "open_async_connection_pool",
    "open_connection_pool",
    "quiet_pool_logs",
]

# tracebacks and reprs name the public module, where callers import these from
for _export in (
    check_connection_string,
    classify_database_error,
    open_async_connection_pool,
    open_connection_pool,
    quiet_pool_logs,
):
    _export.__module__ = __name__
del _export
