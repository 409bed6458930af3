"""The SQLite store's schema, versioned with `PRAGMA user_version`, and its migrations.

Version 10 (current) stamps each vector row with the store's vector clock at its write
(`vector_clock`, moved by every write of vectors; `vectors_stamp` indexes the stamps), so a
search that read a partition's vectors reads only the rows written since, not the partition.
Opening a version 9 store stamps its rows 0 (read before any search) and adds the clock;
opening a version 8 store adds the vector tables as they are now, empty.

Version 9 keeps vectors: `vector_spaces` registers each space the store keeps
vectors of (its `id@version` with the model, dimensions and metric, which never change under
one identity), `vectors` holds each memory's segment vectors (float16, keyed by the memory's
rowid, so one parent's vectors are one rowid range) and `vector_versions` counts each
parent's vector changes, so a cached search matrix knows when it is stale. Deleting a memory
deletes its vectors (a trigger).

Version 8 makes a memory row smaller: no parent's name (the slot in its rowid
names the parent in `namespaces`), the creation time as microseconds (an integer, see
`_sqlite_layout.created_at_value`) and the term counts packed by term number (each term's
store-wide `terms` row holds its number; see `_sqlite_layout.pack_terms`). Entity rows
become one row per parent and entity with its count of memories, instead of one per
mention. Opening a version 7 store numbers its terms, rebuilds the memory rows (same
rowids, ids, texts, tags, entities, times and keys; the FTS5 index is kept as it is) and
counts the entity rows, in one transaction.

Version 7 keys entity rows by the parent's slot instead of its name (the same
saving for the largest random-keyed table). Opening a version 6 store copies the entity rows
into the new table, in one transaction.

Version 6 keys the id and idempotency indexes by the parent's slot (`seq >> 40`,
see `_sqlite_layout`) instead of repeating the parent's name in every entry: the indexes are
less than half the size, and a batch's random idempotency digests change half as many
pages. Opening a version 5 store rebuilds the two indexes, in one transaction; no row changes.

Version 5 keeps an idempotency key as the first 16 bytes of its SHA-256, a blob
(it was the whole digest in hex: four times the bytes, in the row and in its index).
Opening a version 4 store converts every stored digest in place, in one transaction.

Version 4 keeps the FTS5 index without positions or columns (`detail = none`:
recall matches single terms and scores candidates from their stored counts, so it never
needs them) and no index of entity rows by memory (a memory's entities are deleted by
their keys). Opening a version 3 store drops that index and rebuilds the FTS5 index from
the rows, in one transaction.

Version 3 numbers a parent's memories oldest first (new rows are appended, see
`_sqlite_layout`), keeps each memory's weighted term counts beside it (`memories.terms`, see
`_sqlite_layout.encode_terms`) so recall scores a candidate without tokenising it again, and
writes FTS5 entries itself rather than by an insert trigger. Opening a version 2 store
renumbers its rows in place (ids, texts and every other column are kept), fills the counts
from each memory's text, tags and entities and rebuilds the FTS5 index, in one transaction.

Version 2 lays memories out so one parent's rows are one rowid range (see
`_sqlite_layout`): FTS5 filters a parent by that range without touching other parents, and
`terms` keeps exact document frequencies so ranking never scans a posting list.

Version 1 was the first layout: memories keyed by (parent, id) and an FTS5 index over their
text only (the migration test writes it out by hand). Opening a version 1 store migrates it
in place (straight to the current version), in one transaction, keeping every memory, its
id, tags, creation time and idempotency key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ._sqlite_layout import (
    COUNTER_SPAN,
    DIGEST_BYTES,
    MAX_NUMBER,
    NUMBER_BYTES,
    STORE_SLOT,
    created_at_value,
    document_terms,
    encode_terms,
    idempotency_digest,
    pack_terms,
    term_numbers,
)
from ._sqlite_rows import insert_memory
from ._text import STOPWORDS  # one writer of rows for new and migrated data

__all__ = ["CURRENT_VERSION", "SchemaMismatch", "ensure_schema"]

CURRENT_VERSION = 10
MIGRATION_BATCH = 2_000

SCHEMA = """
CREATE TABLE namespaces (
    slot INTEGER PRIMARY KEY,
    parent TEXT NOT NULL UNIQUE,
    next_counter INTEGER NOT NULL DEFAULT 0,
    documents INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0
);
INSERT INTO namespaces (slot, parent) VALUES (0, '*');
CREATE TABLE memories (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    created_at NOT NULL,
    idempotency_key BLOB,
    tokens INTEGER NOT NULL DEFAULT 0,
    terms BLOB
);
CREATE UNIQUE INDEX memories_id ON memories (seq >> 40, id);
CREATE UNIQUE INDEX memories_idempotency ON memories (seq >> 40, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text, tags, entities,
    content = 'memories', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2',
    detail = none
);
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, entities)
    VALUES ('delete', old.seq, old.text, old.tags, old.entities);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text, tags, entities ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, entities)
    VALUES ('delete', old.seq, old.text, old.tags, old.entities);
    INSERT INTO memories_fts (rowid, text, tags, entities)
    VALUES (new.seq, new.text, new.tags, new.entities);
END;
CREATE TABLE terms (
    slot INTEGER NOT NULL,
    term TEXT NOT NULL,
    documents INTEGER NOT NULL,
    number INTEGER,
    PRIMARY KEY (slot, term)
) WITHOUT ROWID;
CREATE TABLE entities (
    slot INTEGER NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    memories INTEGER NOT NULL,
    PRIMARY KEY (slot, key)
) WITHOUT ROWID;
CREATE TABLE links (
    parent TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    relation TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (parent, source, target, relation)
) WITHOUT ROWID;
CREATE INDEX links_target ON links (parent, target);
CREATE TABLE vector_spaces (
    slot INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    metric TEXT NOT NULL
);
CREATE TABLE vectors (
    seq INTEGER NOT NULL,
    space INTEGER NOT NULL,
    segment INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    vector BLOB NOT NULL,
    stamp INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (seq, space, segment)
) WITHOUT ROWID;
CREATE INDEX vectors_stamp ON vectors (stamp);
CREATE TABLE vector_versions (
    slot INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE vector_clock (stamp INTEGER NOT NULL);
INSERT INTO vector_clock (stamp) VALUES (0);
CREATE TRIGGER vectors_ad AFTER DELETE ON memories BEGIN
    DELETE FROM vectors WHERE seq = old.seq;
    UPDATE vector_versions SET version = version + 1 WHERE slot = old.seq >> 40;
END;
"""


class SchemaMismatch(Exception):
    """The file is not a spaces store this version can open (newer, or something else)."""


def ensure_schema(connection: sqlite3.Connection) -> None:
    """Create or migrate the schema inside one write transaction.

    Raises:
        SchemaMismatch: the file holds a newer version, or tables that are not a spaces store.
        sqlite3.Error: the file could not be read or written.
    """
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version == CURRENT_VERSION:
        return
    if version > CURRENT_VERSION:
        raise SchemaMismatch(f"the store has schema version {version}")
    connection.execute("BEGIN IMMEDIATE")
    try:
        # another process may have migrated while this one waited for the lock
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise SchemaMismatch("the file holds tables that are not a spaces store")
            _run_script(connection, SCHEMA)
        elif version > CURRENT_VERSION:
            raise SchemaMismatch(f"the store has schema version {version}")
        else:
            while version < CURRENT_VERSION:
                version = MIGRATIONS[version](connection)
        connection.execute(f"PRAGMA user_version = {CURRENT_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _run_script(connection: sqlite3.Connection, script: str) -> None:
    # executescript() would commit the open transaction; run statement by statement instead
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            connection.execute(statement)
            statement = ""


def _migrate_1(connection: sqlite3.Connection) -> int:
    """Version 1 -> 3: slots and rowid ranges, tags and entities indexed, terms, links."""
    for statement in (
        "DROP TRIGGER IF EXISTS memories_ai",
        "DROP TRIGGER IF EXISTS memories_ad",
        "DROP TABLE IF EXISTS memories_fts",
        "DROP INDEX IF EXISTS memories_idempotency",
        "ALTER TABLE memories RENAME TO memories_v1",
    ):
        connection.execute(statement)
    _run_script(connection, SCHEMA)
    rows = connection.execute(
        "SELECT parent, id, text, tags, created_at, idempotency_key FROM memories_v1 "
        "ORDER BY parent, created_at, id"
    ).fetchall()
    for parent, memory_id, text, tags, created_at, key in rows:
        insert_memory(
            connection,
            parent=parent,
            memory_id=memory_id,
            text=text,
            tags_json=tags,
            entities=(),
            created_at=created_at,
            idempotency=idempotency_digest(key) if key else None,
        )
    connection.execute("DROP TABLE memories_v1")
    return CURRENT_VERSION


def _migrate_2_to_3(connection: sqlite3.Connection) -> int:
    """Version 2 -> 3: rowids ascending with age reversed, term counts, FTS5 rebuilt."""
    # the old trigger re-indexes a row on any update; the new one only when indexed text changes
    connection.execute("DROP TRIGGER IF EXISTS memories_au")
    connection.execute("DROP TRIGGER IF EXISTS memories_ai")
    connection.execute("ALTER TABLE memories ADD COLUMN terms TEXT")
    _run_script(connection, _UPDATE_TRIGGER)
    # position p from the top of a slot's range becomes position p from its bottom; an old
    # position is near 2**40 and a new one near 0, so no row takes a rowid still in use
    span = COUNTER_SPAN
    renumbered = f"(seq / {span}) * {span} + ({span - 1} - seq % {span})"
    connection.execute(f"UPDATE memories SET seq = {renumbered}")
    connection.execute(f"UPDATE entities SET seq = {renumbered}")
    last = -1
    while True:
        rows = connection.execute(
            "SELECT seq, text, tags, entities FROM memories WHERE seq > ? ORDER BY seq LIMIT ?",
            (last, MIGRATION_BATCH),
        ).fetchall()
        if not rows:
            # version 4's index is built straight from the renumbered rows
            _rebuild_fts(connection)
            connection.execute("DROP INDEX IF EXISTS entities_memory")
            return 4
        connection.executemany(
            "UPDATE memories SET terms = ? WHERE seq = ?",
            [
                (encode_terms(document_terms(text, _labels(tags), _labels(entities))), seq)
                for seq, text, tags, entities in rows
            ],
        )
        last = rows[-1][0]


def _migrate_4_to_5(connection: sqlite3.Connection) -> int:
    """Version 4 -> 5: idempotency digests from 64 hex characters to 16 bytes."""
    rows = connection.execute(
        "SELECT seq, idempotency_key FROM memories WHERE typeof(idempotency_key) = 'text'"
    ).fetchall()
    converted = []
    for seq, digest in rows:
        try:
            converted.append((bytes.fromhex(digest)[:DIGEST_BYTES], seq))
        except ValueError:  # not a digest this store wrote: it is kept as it is
            continue
    connection.executemany("UPDATE memories SET idempotency_key = ? WHERE seq = ?", converted)
    return 5


def _migrate_5_to_6(connection: sqlite3.Connection) -> int:
    """Version 5 -> 6: the id and idempotency indexes keyed by slot, not by parent name."""
    connection.execute("DROP INDEX IF EXISTS memories_id")
    connection.execute("DROP INDEX IF EXISTS memories_idempotency")
    start = SCHEMA.index("CREATE UNIQUE INDEX memories_id")
    end = SCHEMA.index("CREATE VIRTUAL TABLE memories_fts")
    _run_script(connection, SCHEMA[start:end])
    return 6


_ENTITIES_V7 = """
CREATE TABLE entities (
    slot INTEGER NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (slot, key, seq)
) WITHOUT ROWID;
"""


def _migrate_6_to_7(connection: sqlite3.Connection) -> int:
    """Version 6 -> 7: entity rows keyed by slot, not by parent name (every row kept)."""
    connection.execute("ALTER TABLE entities RENAME TO entities_v6")
    _run_script(connection, _ENTITIES_V7)
    connection.execute(
        # a memory's slot is in its rowid; (key, seq) is unique already, so nothing collides
        f"INSERT INTO entities (slot, key, seq, name) SELECT seq / {COUNTER_SPAN}, key, seq, "
        "name FROM entities_v6 ORDER BY 1, 2, 3"
    )
    connection.execute("DROP TABLE entities_v6")
    return 7


def _migrate_7_to_8(connection: sqlite3.Connection) -> int:
    """Version 7 -> 8: numbered terms, compact memory rows, entity rows counted per entity."""
    # the rows are copied under their own rowids, so the FTS5 index stays as it is; the
    # triggers and indexes go with the old table and are made again for the new one
    for statement in (
        "DROP TRIGGER IF EXISTS memories_ad",
        "DROP TRIGGER IF EXISTS memories_au",
        "DROP INDEX IF EXISTS memories_id",
        "DROP INDEX IF EXISTS memories_idempotency",
        "ALTER TABLE memories RENAME TO memories_v7",
        "ALTER TABLE entities RENAME TO entities_v7",
    ):
        connection.execute(statement)
    for first, last in (
        ("CREATE TABLE memories", "CREATE VIRTUAL TABLE memories_fts"),
        ("CREATE TRIGGER memories_ad", "CREATE TABLE terms"),
        ("CREATE TABLE entities", "CREATE TABLE links"),
    ):
        _run_script(connection, SCHEMA[SCHEMA.index(first) : SCHEMA.index(last)])
    # version 7 counted every term exactly: each store-wide row gets its number
    connection.execute("ALTER TABLE terms ADD COLUMN number INTEGER")
    connection.execute(
        "UPDATE terms SET number = numbered.number FROM (SELECT term, "
        "row_number() OVER (ORDER BY term) - 1 AS number FROM terms WHERE slot = ?) AS numbered "
        "WHERE terms.slot = ? AND terms.term = numbered.term",
        (STORE_SLOT, STORE_SLOT),
    )
    connection.execute(
        "UPDATE namespaces SET next_counter = (SELECT count(*) FROM terms WHERE slot = ?) "
        "WHERE slot = ?",
        (STORE_SLOT, STORE_SLOT),
    )
    last_seq = -1
    while True:
        rows = connection.execute(
            "SELECT seq, id, text, tags, entities, created_at, idempotency_key, tokens "
            "FROM memories_v7 WHERE seq > ? ORDER BY seq LIMIT ?",
            (last_seq, MIGRATION_BATCH),
        ).fetchall()
        if not rows:
            break
        counted = [document_terms(row[2], _labels(row[3]), _labels(row[4])) for row in rows]
        numbered = term_numbers(connection, {term for counts in counted for term in counts})
        numbers = {
            term: number.to_bytes(NUMBER_BYTES, "big")
            for term, number in numbered.items()
            if number < MAX_NUMBER
        }
        numbers.update(dict.fromkeys(STOPWORDS, b""))
        connection.executemany(
            "INSERT INTO memories (seq, id, text, tags, entities, created_at, idempotency_key, "
            "tokens, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    *row[:5],
                    created_at_value(row[5]) if isinstance(row[5], str) else row[5],
                    *row[6:8],
                    pack_terms(counts, numbers),
                )
                for row, counts in zip(rows, counted, strict=True)
            ],
        )
        last_seq = rows[-1][0]
    connection.execute("DROP TABLE memories_v7")
    connection.execute(
        "INSERT INTO entities (slot, key, name, memories) "
        "SELECT slot, key, min(name), count(*) FROM entities_v7 GROUP BY slot, key"
    )
    connection.execute("DROP TABLE entities_v7")
    return 8


def _migrate_3_to_4(connection: sqlite3.Connection) -> int:
    """Version 3 -> 4: an FTS5 index without positions, no entity index by memory."""
    connection.execute("DROP INDEX IF EXISTS entities_memory")
    _rebuild_fts(connection)
    return 4


def _rebuild_fts(connection: sqlite3.Connection) -> None:
    """Recreate the FTS5 table (and its triggers) as the current schema has it, from the rows."""
    for trigger in ("memories_ai", "memories_ad", "memories_au"):
        connection.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    connection.execute("DROP TABLE IF EXISTS memories_fts")
    start = SCHEMA.index("CREATE VIRTUAL TABLE memories_fts")
    end = SCHEMA.index("CREATE TABLE terms")
    _run_script(connection, SCHEMA[start:end])
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")


def _labels(raw: object) -> list[str]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return []
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


_UPDATE_TRIGGER = SCHEMA[SCHEMA.index("CREATE TRIGGER memories_au") :].split("END;")[0] + "END;\n"


def _migrate_8_to_10(connection: sqlite3.Connection) -> int:
    """Version 8 -> 10: the vector tables as they are now, empty (no memory row changes)."""
    _run_script(connection, SCHEMA[SCHEMA.index("CREATE TABLE vector_spaces") :])
    return 10


def _migrate_9_to_10(connection: sqlite3.Connection) -> int:
    """Version 9 -> 10: each vector row's write stamp, and the store's vector clock."""
    connection.execute("ALTER TABLE vectors ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0")
    start = SCHEMA.index("CREATE INDEX vectors_stamp")
    _run_script(connection, SCHEMA[start : SCHEMA.index("CREATE TABLE vector_versions")])
    start = SCHEMA.index("CREATE TABLE vector_clock")
    _run_script(connection, SCHEMA[start : SCHEMA.index("CREATE TRIGGER vectors_ad")])
    return 10


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], int]] = {
    1: _migrate_1,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
    6: _migrate_6_to_7,
    7: _migrate_7_to_8,
    8: _migrate_8_to_10,
    9: _migrate_9_to_10,
}
