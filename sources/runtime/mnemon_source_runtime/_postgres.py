"""Partitions in PostgreSQL (`store = "postgres"`): entries, records and revisions in tables.

A scope partition is a row of `partitions` (its ids, write sequence, counters, capped size and
row version) with its user facts and agent notes as rows of `entries`, each agent's next
handle in `books`, its idempotency records in `idempotency` and the latest revisions in
`revisions`. A write reads the partition in one statement (one snapshot), applies the change
to that document exactly as the file store does (`apply_change`: the byte cap, the records),
and then, in one transaction, updates the partition's row only if its row version is still the
one it read and writes the rows that changed. The row's update takes its lock, so a second
host's write waits for the first to commit, finds the version moved on and applies its change
again to the new document (optimistic fencing, no lock held while the change is computed),
until the lock timeout: two hosts writing the same user's facts never lose a write, and the
byte cap is checked against the document the write replaces. A fenced write
(`expected_revision`) whose partition moved on is refused with `RevisionConflict`, as with
files. psycopg is imported only when this store is configured (the `postgres` extra).

Schema version 1 kept a partition as one row holding the file store's encoded document; it
is migrated forward at the first call, under an advisory lock: each document becomes rows,
and the old table stays, renamed `partitions_v1`, until an operator drops it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from mnemon.sdk import SourceError
from mnemon.sdk.postgres import (
    check_connection_string,
    classify_database_error,
    open_connection_pool,
)

from ._document import (
    Applied,
    Damaged,
    Document,
    Entry,
    KeyRecord,
    damaged_revision,
    decode,
    empty_document,
    encode,
    revision_of,
)
from ._store import MAX_FILE_BYTES, Partition, Snapshot

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["REVISIONS_KEPT", "SCHEMA_VERSION", "PostgresPartitions"]

SCHEMA_VERSION = 2
#: revisions kept per partition in `revisions`; older ones are dropped as new ones come
REVISIONS_KEPT = 1_000
_RETRY_PAUSE = 0.005
# no agent: user facts, and the notes (and records) of the scope without an agent
_NO_AGENT = ""

_TABLES = (
    """CREATE TABLE {schema}.partitions (
        name text PRIMARY KEY,
        scope jsonb NOT NULL,
        sequence bigint NOT NULL,
        next_user integer NOT NULL,
        used_bytes bigint NOT NULL,
        row_version bigint NOT NULL,
        damage text
    )""",
    """CREATE TABLE {schema}.books (
        partition text NOT NULL REFERENCES {schema}.partitions (name) ON DELETE CASCADE,
        agent_id text NOT NULL,
        next integer NOT NULL,
        PRIMARY KEY (partition, agent_id)
    )""",
    """CREATE TABLE {schema}.entries (
        partition text NOT NULL REFERENCES {schema}.partitions (name) ON DELETE CASCADE,
        target text NOT NULL CHECK (target IN ('user', 'memory')),
        agent_id text NOT NULL,
        id text NOT NULL,
        ordinal bigint NOT NULL,
        text text NOT NULL,
        importance smallint NOT NULL,
        created_at text NOT NULL,
        updated_at text NOT NULL,
        PRIMARY KEY (partition, target, agent_id, id)
    )""",
    """CREATE TABLE {schema}.idempotency (
        partition text NOT NULL REFERENCES {schema}.partitions (name) ON DELETE CASCADE,
        agent_id text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        entry_id text NOT NULL,
        sequence bigint NOT NULL,
        committed_at text NOT NULL,
        PRIMARY KEY (partition, agent_id, key)
    )""",
    """CREATE TABLE {schema}.revisions (
        partition text NOT NULL REFERENCES {schema}.partitions (name) ON DELETE CASCADE,
        sequence bigint NOT NULL,
        revision text NOT NULL,
        target text,
        operation text,
        entry_id text,
        agent_id text,
        committed_at text NOT NULL,
        PRIMARY KEY (partition, sequence)
    )""",
)

_ENTRY_JSON = (
    "json_build_object('id', e.id, 'text', e.text, 'importance', e.importance, "
    "'created_at', e.created_at, 'updated_at', e.updated_at) ORDER BY e.ordinal"
)
# the partition as the file store's document, built by the server in one statement (so one
# snapshot) and checked by the same `decode` a file is: a row edited by hand into something
# this code would misread is reported as damaged, never served
_LOAD = (
    "SELECT p.row_version, p.damage, json_build_object("
    "'format', 'mnemon-runtime/2', 'partition', p.scope, 'sequence', p.sequence, "
    "'user', json_build_object('next', p.next_user, 'entries', coalesce(("
    f"SELECT json_agg({_ENTRY_JSON}) FROM {{entries}} e "
    "WHERE e.partition = p.name AND e.target = 'user'), '[]'::json)), "
    "'notes', coalesce((SELECT json_agg(json_build_object("
    "'agent_id', nullif(b.agent_id, ''), 'next', b.next, 'entries', coalesce(("
    f"SELECT json_agg({_ENTRY_JSON}) FROM {{entries}} e WHERE e.partition = p.name "
    "AND e.target = 'memory' AND e.agent_id = b.agent_id), '[]'::json)) ORDER BY b.agent_id) "
    "FROM {books} b WHERE b.partition = p.name), '[]'::json), "
    "'recent', CASE WHEN %(records)s THEN coalesce((SELECT json_agg(json_build_object("
    "'key', r.key, 'fingerprint', r.fingerprint, 'agent_id', nullif(r.agent_id, ''), "
    "'id', r.entry_id, 'sequence', r.sequence, 'committed_at', r.committed_at) "
    "ORDER BY r.sequence, r.key) FROM {idempotency} r WHERE r.partition = p.name), '[]'::json) "
    "ELSE '[]'::json END)::text "
    "FROM {partitions} p WHERE p.name = %(name)s"
)


class _Moved(Exception):
    """Another host wrote the partition after it was read: apply the change again."""


def _snapshot(document: Document) -> Snapshot:
    # the revision digests what the View shows (the records are not part of it), so an
    # idempotent replay, which writes nothing, keeps it; the sequence makes every write new
    raw = encode(replace(document, recent=()))
    return Snapshot(document, revision_of(raw, document.sequence), len(raw))


def _agent(agent_id: str | None) -> str:
    return _NO_AGENT if agent_id is None else agent_id


class PostgresPartitions:
    """The runtime store on one PostgreSQL schema; blocking, called in worker threads."""

    def __init__(self, dsn: str, schema: str, *, wait: float = 5.0, pool_max: int = 4) -> None:
        """Check `dsn` and keep it; no connection is made before the first call.

        Raises:
            DefinitionError: `dsn` is not a connection string (it is not quoted).
        """
        check_connection_string(dsn)
        self._dsn = dsn
        self._wait = wait
        self._schema = schema
        self._pool_max = pool_max
        self._pool: ConnectionPool[Connection[Any]] | None = None
        self._guard = threading.Lock()
        self._ready = False
        self._statements: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"PostgresPartitions(schema={self._schema!r})"

    def _connection_pool(self) -> ConnectionPool[Connection[Any]]:
        with self._guard:
            if self._pool is None:
                self._pool = open_connection_pool(
                    self._dsn, name="mnemon-runtime", max_size=self._pool_max, wait=self._wait
                )
            return self._pool

    def _sql(self, text: str) -> Any:
        """`text` with `{partitions}`, `{entries}`... naming this schema's tables (cached)."""
        statement = self._statements.get(text)
        if statement is None:
            from psycopg import sql

            schema = sql.Identifier(self._schema)
            tables = ("partitions", "books", "entries", "idempotency", "revisions")
            statement = sql.SQL(text).format(
                schema=schema,
                **{
                    table: sql.SQL("{}.{}").format(schema, sql.Identifier(table))
                    for table in tables
                },
            )
            self._statements[text] = statement
        return statement

    # ------------------------------------------------------------------ schema

    def _ensure(self, connection: Connection[Any]) -> None:
        if self._ready:
            return
        from psycopg import sql

        name = sql.Identifier(self._schema)
        with connection.transaction():
            # several hosts starting at once: one migrates, the others find the work done
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
            if version > SCHEMA_VERSION:
                raise SourceError(
                    "schema_mismatch", "the runtime schema in PostgreSQL is newer than this code"
                )
            if version == 1:
                # the one-row layout: keep its table under another name, convert every row
                connection.execute(self._sql("ALTER TABLE {partitions} RENAME TO partitions_v1"))
                connection.execute(
                    self._sql(
                        "ALTER TABLE {schema}.partitions_v1 "
                        "RENAME CONSTRAINT partitions_pkey TO partitions_v1_pkey"
                    )
                )
            if version < SCHEMA_VERSION:
                for statement in _TABLES:
                    connection.execute(self._sql(statement))
                if version == 1:
                    self._convert_v1(connection)
                connection.execute(
                    sql.SQL("INSERT INTO {}.schema_version (version) VALUES (%s)").format(name),
                    (SCHEMA_VERSION,),
                )
        self._ready = True

    def _convert_v1(self, connection: Connection[Any]) -> None:
        rows = connection.execute(
            self._sql("SELECT name, document FROM {schema}.partitions_v1 ORDER BY name")
        ).fetchall()
        for name, document in rows:
            raw = bytes(document)
            try:
                body = orjson.loads(raw)
                scope = body["partition"] if isinstance(body, dict) else None
                if not isinstance(scope, dict) or not all(
                    isinstance(value, str) for value in scope.values()
                ):
                    raise Damaged("partition: expected the partition's ids")
                if len(raw) > MAX_FILE_BYTES:
                    raise Damaged(f"the row is larger than {MAX_FILE_BYTES} bytes")
                converted = decode(raw, tuple(scope.items()))
            except (orjson.JSONDecodeError, Damaged) as exc:
                problem = exc.problem if isinstance(exc, Damaged) else "the row is not JSON"
                # kept, marked: never served, never written, until an operator repairs it
                connection.execute(
                    self._sql(
                        "INSERT INTO {partitions} (name, scope, sequence, next_user, "
                        "used_bytes, row_version, damage) VALUES (%s, '{{}}', 0, 1, 0, 1, %s)"
                    ),
                    (name, f"{problem} (in partitions_v1)"),
                )
                continue
            self._write_rows(
                connection,
                name,
                empty_document(converted.partition),
                converted,
                0,
                _snapshot(converted),
                None,
            )

    # ------------------------------------------------------------------ reads

    def _load(
        self, connection: Connection[Any], partition: Partition, *, records: bool
    ) -> tuple[Snapshot, int]:
        self._ensure(connection)
        row = connection.execute(
            self._sql(_LOAD), {"name": partition.name, "records": records}
        ).fetchone()
        if row is None:
            return _snapshot(empty_document(partition.scope)), 0
        version, damage, body = int(row[0]), row[1], str(row[2]).encode()
        if damage is not None:
            raise Damaged(str(damage), damaged_revision(str(damage).encode()))
        try:
            document = decode(body, partition.scope)
        except Damaged as exc:
            raise Damaged(exc.problem, damaged_revision(body)) from None
        return _snapshot(document), version

    def read(self, partition: Partition) -> Snapshot | Damaged:
        """The partition as it is now (without its idempotency records), or its damage.

        Raises:
            SourceError: `unavailable`, `timeout` (the database could not answer) or
                `schema_mismatch` (the schema is newer than this code).
        """
        try:
            with self._connection_pool().connection() as connection:
                return self._load(connection, partition, records=False)[0]
        except Damaged as exc:
            return exc
        except Exception as exc:
            if not _is_database_error(exc):
                raise
            raise _error(exc, self._pool) from None

    # ------------------------------------------------------------------ writes

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
                nothing was written), `cancelled`, `schema_mismatch` (the partition is
                damaged), `unavailable`; or what `step` raises (a revision conflict, a
                refusal such as `runtime-capacity`).
        """
        deadline = time.monotonic() + lock_timeout
        try:
            with self._connection_pool().connection() as connection:
                while True:
                    try:
                        current, version = self._load(connection, partition, records=True)
                    except Damaged as exc:
                        raise SourceError(
                            "schema_mismatch",
                            f"runtime partition {partition.name} is damaged in PostgreSQL "
                            f"({exc.problem}); nothing is written to it until it is repaired",
                        ) from None
                    applied = step(current)
                    if applied.document is None:
                        return current, applied
                    if abandoned.is_set():
                        raise SourceError(
                            "cancelled", "the caller stopped waiting; nothing was written"
                        )
                    after = _snapshot(applied.document)
                    try:
                        with connection.transaction():
                            self._write_rows(
                                connection,
                                partition.name,
                                current.document,
                                applied.document,
                                version,
                                after,
                                applied.committed_at,
                            )
                    except _Moved:
                        pass
                    else:
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
            raise _error(exc, self._pool) from None

    def _write_rows(
        self,
        connection: Connection[Any],
        name: str,
        before: Document,
        after: Document,
        version: int,
        snapshot: Snapshot,
        committed_at: str | None,
    ) -> None:
        """Write the rows `after` changed from `before`, inside the caller's transaction.

        The write is added to the revision history when it has a `committed_at` (a
        migration's conversion is not a write).

        Raises:
            _Moved: the partition's row version is no longer `version`.
        """
        if version == 0:
            cursor = connection.execute(
                self._sql(
                    "INSERT INTO {partitions} (name, scope, sequence, next_user, used_bytes, "
                    "row_version) VALUES (%s, %s, %s, %s, %s, 1) ON CONFLICT (name) DO NOTHING"
                ),
                (
                    name,
                    orjson.dumps(dict(after.partition)).decode(),
                    after.sequence,
                    after.next_user,
                    snapshot.size,
                ),
            )
        else:
            # the fence: this row's lock is held from here to the commit, so a second writer
            # waits, then finds the version moved on
            cursor = connection.execute(
                self._sql(
                    "UPDATE {partitions} SET sequence = %s, next_user = %s, used_bytes = %s, "
                    "row_version = row_version + 1 "
                    "WHERE name = %s AND row_version = %s AND damage IS NULL"
                ),
                (after.sequence, after.next_user, snapshot.size, name, version),
            )
        if cursor.rowcount != 1:
            raise _Moved()
        change = self._write_entries(connection, name, before, after)
        self._write_records(connection, name, before.recent, after.recent)
        if committed_at is None:
            return
        target, operation, entry_id, agent_id = change or (None, None, None, None)
        connection.execute(
            self._sql(
                "INSERT INTO {revisions} (partition, sequence, revision, target, operation, "
                "entry_id, agent_id, committed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            ),
            (
                name,
                after.sequence,
                snapshot.revision,
                target,
                operation,
                entry_id,
                agent_id,
                committed_at,
            ),
        )
        connection.execute(
            self._sql("DELETE FROM {revisions} WHERE partition = %s AND sequence <= %s"),
            (name, after.sequence - REVISIONS_KEPT),
        )

    def _write_entries(
        self, connection: Connection[Any], name: str, before: Document, after: Document
    ) -> tuple[str, str, str, str | None] | None:
        """Write the entries and books that changed; returns the first change, for history."""
        change: tuple[str, str, str, str | None] | None = None
        books: list[tuple[str, str | None, tuple[Entry, ...], tuple[Entry, ...]]] = [
            ("user", None, before.user, after.user)
        ]
        agents = {notes.agent_id for notes in (*before.notes, *after.notes)}
        for agent_id in sorted(agents, key=_agent):
            old, new = before.notes_of(agent_id), after.notes_of(agent_id)
            books.append(("memory", agent_id, old.entries, new.entries))
            if old != new or agent_id not in {notes.agent_id for notes in before.notes}:
                connection.execute(
                    self._sql(
                        "INSERT INTO {books} (partition, agent_id, next) VALUES (%s, %s, %s) "
                        "ON CONFLICT (partition, agent_id) DO UPDATE SET next = EXCLUDED.next"
                    ),
                    (name, _agent(agent_id), new.next),
                )
        for target, agent_id, old_entries, new_entries in books:
            agent = _NO_AGENT if target == "user" else _agent(agent_id)
            owner = None if target == "user" else agent_id
            old_by_id = {entry.id: entry for entry in old_entries}
            new_ids = {entry.id for entry in new_entries}
            for entry in old_entries:
                if entry.id not in new_ids:
                    connection.execute(
                        self._sql(
                            "DELETE FROM {entries} WHERE partition = %s AND target = %s "
                            "AND agent_id = %s AND id = %s"
                        ),
                        (name, target, agent, entry.id),
                    )
                    change = change or (target, "remove", entry.id, owner)
            for entry in new_entries:
                if old_by_id.get(entry.id) == entry:
                    continue
                # a new entry goes after every entry of its book; a replaced one keeps its place
                connection.execute(
                    self._sql(
                        "INSERT INTO {entries} (partition, target, agent_id, id, ordinal, text, "
                        "importance, created_at, updated_at) VALUES (%(p)s, %(t)s, %(a)s, %(id)s, "
                        "(SELECT coalesce(max(ordinal), 0) + 1 FROM {entries} WHERE partition = "
                        "%(p)s AND target = %(t)s AND agent_id = %(a)s), %(text)s, %(imp)s, "
                        "%(created)s, %(updated)s) ON CONFLICT (partition, target, agent_id, id) "
                        "DO UPDATE SET text = EXCLUDED.text, importance = EXCLUDED.importance, "
                        "created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at"
                    ),
                    {
                        "p": name,
                        "t": target,
                        "a": agent,
                        "id": entry.id,
                        "text": entry.text,
                        "imp": entry.importance,
                        "created": entry.created_at,
                        "updated": entry.updated_at,
                    },
                )
                operation = "replace" if entry.id in old_by_id else "add"
                change = change or (target, operation, entry.id, owner)
        return change

    def _write_records(
        self,
        connection: Connection[Any],
        name: str,
        before: Iterable[KeyRecord],
        after: Iterable[KeyRecord],
    ) -> None:
        kept = {(_agent(record.agent_id), record.key) for record in after}
        known = {(_agent(record.agent_id), record.key) for record in before}
        for agent, key in known - kept:
            connection.execute(
                self._sql(
                    "DELETE FROM {idempotency} WHERE partition = %s AND agent_id = %s AND key = %s"
                ),
                (name, agent, key),
            )
        for record in after:
            if (_agent(record.agent_id), record.key) in known:
                continue
            # a key is one write: a record already there (from a migrated duplicate) stays
            connection.execute(
                self._sql(
                    "INSERT INTO {idempotency} (partition, agent_id, key, fingerprint, entry_id, "
                    "sequence, committed_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING"
                ),
                (
                    name,
                    _agent(record.agent_id),
                    record.key,
                    record.fingerprint,
                    record.id,
                    record.sequence,
                    record.committed_at,
                ),
            )

    def close(self) -> None:
        """Close the pool (idempotent)."""
        with self._guard:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(timeout=1.0)


def _is_database_error(exc: BaseException) -> bool:
    return classify_database_error(exc) is not None


def _error(exc: BaseException, pool: ConnectionPool[Connection[Any]] | None) -> SourceError:
    """The SourceError a database failure maps to; the driver's text is not copied."""
    code = classify_database_error(exc, pool) or "unavailable"
    if code == "timeout":
        return SourceError(code, "the runtime database did not answer in time")
    if code == "unavailable":
        return SourceError(code, "the runtime database cannot be reached")
    return SourceError(code, "the runtime database refused or failed the call")
