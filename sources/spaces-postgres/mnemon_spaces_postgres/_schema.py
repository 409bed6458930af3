"""The Provider's schema, versioned in its own table, migrated at mount under an advisory lock.

Each migration is a list of statements that only add (tables, columns, indexes): a
migration never destroys data. Several hosts starting at once take the same transaction-level
advisory lock, so exactly one of them migrates and the others find the work done. A database
whose version is newer than `CURRENT_VERSION` is refused: this code would misread it.

Version 2 adds vectors. Their column is pgvector's `vector` when the server has the extension
(created here when the role may), else float16 `bytea`; the choice is made once, when the
table is created, and read back from the catalog on every start (`VectorColumn`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from psycopg import AsyncConnection, sql

__all__ = ["CURRENT_VERSION", "SchemaMismatch", "VectorColumn", "ensure_schema", "vector_column"]

_log = logging.getLogger(__name__)

CURRENT_VERSION = 2

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

# vectors: a registry of spaces (an identity never changes model, dimensions or metric), one
# row per segment going with its memory, and a version per partition that every vector write
# or delete moves in its own transaction (a trigger for deletes, cascades included), so a
# process caching a partition's vectors knows when to read them again
_V2 = (
    """CREATE TABLE {schema}.vector_spaces (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key text NOT NULL UNIQUE,
        model text NOT NULL,
        dimensions integer NOT NULL,
        metric text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE {schema}.vectors (
        parent text NOT NULL,
        memory text NOT NULL,
        space integer NOT NULL REFERENCES {schema}.vector_spaces (id),
        segment integer NOT NULL,
        start integer NOT NULL,
        "end" integer NOT NULL,
        embedding {vector_type} NOT NULL,
        PRIMARY KEY (parent, memory, space, segment),
        FOREIGN KEY (parent, memory) REFERENCES {schema}.memories (parent, id) ON DELETE CASCADE
    )""",
    "CREATE INDEX vectors_partition ON {schema}.vectors (parent, space)",
    """CREATE TABLE {schema}.vector_versions (
        parent text PRIMARY KEY,
        version bigint NOT NULL
    )""",
    """CREATE FUNCTION {schema}.vectors_deleted() RETURNS trigger LANGUAGE plpgsql AS $body$
    BEGIN
        INSERT INTO {schema}.vector_versions AS w (parent, version) VALUES (OLD.parent, 1)
        ON CONFLICT (parent) DO UPDATE SET version = w.version + 1;
        RETURN NULL;
    END
    $body$""",
    "CREATE TRIGGER vectors_deleted AFTER DELETE ON {schema}.vectors "
    "FOR EACH ROW EXECUTE FUNCTION {schema}.vectors_deleted()",
)

#: statements taking the schema from version N - 1 to version N
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1, 2: _V2}


@dataclass(frozen=True, slots=True)
class VectorColumn:
    """What the store keeps vectors in: pgvector's type (in the extension's schema) or bytea."""

    extension_schema: str | None
    #: the extension's version, as the server reports it (said in the log, not relied on)
    extension_version: str | None = None

    @property
    def pgvector(self) -> bool:
        """Whether vectors are pgvector's `vector` (else float16 `bytea`)."""
        return self.extension_schema is not None

    @property
    def schema(self) -> sql.Identifier:
        """The schema holding pgvector's type and operators."""
        return sql.Identifier(self.extension_schema or "public")

    @property
    def type_name(self) -> sql.Composed:
        """The pgvector type, qualified: the search path may not hold its schema."""
        return sql.SQL("{}.vector").format(self.schema)

    def describe(self) -> str:
        """How vectors are kept and searched, for the log (no name, no address in it)."""
        if self.pgvector:
            return f"pgvector {self.extension_version}, searched by the server"
        # the column was chosen when the store was made: pgvector may have come since
        return "float16 bytea, searched exactly in this process (pgvector was not usable)"


async def _pgvector_schema(connection: AsyncConnection[object]) -> str | None:
    """The schema of the `vector` extension, created when available and the role may; or None."""
    # one database, one extension: stores of other schemas may be deciding at the same time
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('mnemon-spaces-postgres:pgvector', 0))"
    )
    cursor = await connection.execute(
        "SELECT installed_version FROM pg_catalog.pg_available_extensions WHERE name = 'vector'"
    )
    available = await cursor.fetchone()
    if available is None:
        return None
    if available[0] is None:  # type: ignore[index]
        try:
            async with connection.transaction():  # a savepoint: a refusal leaves the migration
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            # most often the role may not create extensions: vectors are kept without it
            _log.info("pgvector is available but could not be created (%s)", type(exc).__name__)
            return None
    cursor = await connection.execute(
        "SELECT n.nspname FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    )
    row = await cursor.fetchone()
    return None if row is None else str(row[0])  # type: ignore[index]


async def vector_column(connection: AsyncConnection[object], schema: str) -> VectorColumn:
    """The kind of column the store's vectors are in, read from the catalog."""
    cursor = await connection.execute(
        "SELECT t.typname, n.nspname, (SELECT e.extversion FROM pg_catalog.pg_extension e "
        "WHERE e.extname = 'vector') FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace "
        "WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding'",
        (sql.SQL("{}.vectors").format(sql.Identifier(schema)).as_string(connection),),
    )
    row = await cursor.fetchone()
    if row is not None and row[0] == "vector":  # type: ignore[index]
        return VectorColumn(str(row[1]), str(row[2]))  # type: ignore[index]
    return VectorColumn(None)


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
            vector_type: sql.Composable = sql.SQL("bytea")
            if version == 2:
                extension = await _pgvector_schema(connection)
                if extension is not None:
                    vector_type = VectorColumn(extension).type_name
            for statement in MIGRATIONS[version]:
                await connection.execute(
                    sql.SQL(statement).format(schema=name, vector_type=vector_type)
                )
            await connection.execute(
                sql.SQL("INSERT INTO {}.schema_version (version) VALUES (%s)").format(name),
                (version,),
            )
