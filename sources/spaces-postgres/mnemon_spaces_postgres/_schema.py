"""The Provider's schema, versioned in its own table, migrated at mount under an advisory lock.

Each migration is a list of statements that only add (tables, columns, indexes): a
migration never destroys data. Several hosts starting at once take the same transaction-level
advisory lock, so exactly one of them migrates and the others find the work done. A database
whose version is newer than `CURRENT_VERSION` is refused: this code would misread it.
"""

from __future__ import annotations

from psycopg import AsyncConnection, sql

__all__ = ["CURRENT_VERSION", "SchemaMismatch", "ensure_schema"]

CURRENT_VERSION = 1

_V1 = (
    """CREATE TABLE {schema}.memories (
        parent text NOT NULL,
        id text NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        text text NOT NULL,
        tags text[] NOT NULL DEFAULT '{{}}',
        entities text[] NOT NULL DEFAULT '{{}}',
        created_at timestamptz NOT NULL,
        idempotency_key text,
        search tsvector NOT NULL,
        PRIMARY KEY (parent, id)
    )""",
    "CREATE UNIQUE INDEX memories_idempotency ON {schema}.memories (parent, idempotency_key) "
    "WHERE idempotency_key IS NOT NULL",
    "CREATE INDEX memories_newest ON {schema}.memories (parent, seq)",
    "CREATE INDEX memories_search ON {schema}.memories USING gin (search)",
    """CREATE TABLE {schema}.entities (
        parent text NOT NULL,
        key text NOT NULL,
        memory text NOT NULL,
        name text NOT NULL,
        PRIMARY KEY (parent, key, memory),
        FOREIGN KEY (parent, memory) REFERENCES {schema}.memories (parent, id) ON DELETE CASCADE
    )""",
    "CREATE INDEX entities_memory ON {schema}.entities (parent, memory)",
    """CREATE TABLE {schema}.links (
        parent text NOT NULL,
        source text NOT NULL,
        target text NOT NULL,
        relation text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (parent, source, target, relation),
        FOREIGN KEY (parent, source) REFERENCES {schema}.memories (parent, id) ON DELETE CASCADE,
        FOREIGN KEY (parent, target) REFERENCES {schema}.memories (parent, id) ON DELETE CASCADE
    )""",
    "CREATE INDEX links_target ON {schema}.links (parent, target)",
)

#: statements taking the schema from version N - 1 to version N
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1}


class SchemaMismatch(Exception):
    """The database holds a schema version newer than this code reads."""


def _lock_key(schema: str) -> str:
    return f"mnemon-spaces-postgres:{schema}"


async def ensure_schema(connection: AsyncConnection[object], schema: str) -> None:
    """Create or migrate `schema` to `CURRENT_VERSION`, in one transaction.

    Raises:
        SchemaMismatch: the database holds a newer version.
        psycopg.Error: the database could not be read or written.
    """
    name = sql.Identifier(schema)
    async with connection.transaction():
        # one host migrates; the others wait here and then find the version current
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_lock_key(schema),)
        )
        await connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        await connection.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_version "
                "(version integer NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())"
            ).format(name)
        )
        cursor = await connection.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_version").format(name)
        )
        row = await cursor.fetchone()
        version = int(row[0]) if row is not None else 0  # type: ignore[index]
        if version > CURRENT_VERSION:
            raise SchemaMismatch(f"the database has schema version {version}")
        while version < CURRENT_VERSION:
            version += 1
            for statement in MIGRATIONS[version]:
                await connection.execute(sql.SQL(statement).format(schema=name))
            await connection.execute(
                sql.SQL("INSERT INTO {}.schema_version (version) VALUES (%s)").format(name),
                (version,),
            )
