"""PostgreSQL for mnemon's `spaces` Source: the `postgres` Provider, shared by many hosts.

Mount the package itself, with the Provider chosen in the configuration:
`await host.mount(mnemon_spaces_postgres, instance_id="spaces", config={"provider":
{"type": "postgres", "dsn": "..."}})`. The Source is the `spaces` Source with both the
SQLite and the PostgreSQL Providers (`mnemon_testing.postgres` starts a private server for
tests).
"""

from ._plugin import SPACES_SOURCE as SPACES_SOURCE
from ._plugin import apply as apply
from ._plugin import memory_plugin as memory_plugin
from ._provider import POSTGRES_PROVIDER as POSTGRES_PROVIDER
from ._provider import PostgresProvider as PostgresProvider

__all__ = ["POSTGRES_PROVIDER", "SPACES_SOURCE", "PostgresProvider", "apply", "memory_plugin"]
