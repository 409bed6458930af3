"""Rows of the SQLite store: writing a memory with its index entries, reading rows back.

Every function here runs inside a transaction the caller opened; a row is written with its
FTS5 entry (inserted here; deleted and updated by trigger), its entity counts, its term
counts and its namespace counters, or not at all.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import orjson
from pydantic import ValidationError

from ._provider import Memory
from ._sqlite_layout import (
    COUNTER_SPAN,
    IN_SLOT,
    MAX_SLOT,
    STORE_SLOT,
    created_at_text,
    created_at_value,
    document_terms,
    pack_terms,
    record_term_counts,
    record_terms,
)

__all__ = [
    "MEMORY_COLUMNS",
    "NewMemory",
    "delete_memory",
    "insert_full_text",
    "insert_memories",
    "insert_memory",
    "json_list",
    "memory_from_row",
    "namespace_slot",
]

_log = logging.getLogger("mnemon_source_spaces.sqlite")
# rows do not repeat their parent's name: their slot (`seq >> 40`) names it in `namespaces`
MEMORY_COLUMNS = (
    "m.seq, (SELECT n.parent FROM namespaces n WHERE n.slot = m.seq >> 40), m.id, m.text, "
    "m.tags, m.entities, m.created_at, m.tokens"
)


class SlotsExhausted(Exception):
    """The store has numbered as many parents as its rowid layout allows."""


def namespace_slot(connection: sqlite3.Connection, parent: str, *, create: bool) -> int | None:
    """The slot numbering `parent`, made on first write when `create` is set.

    Raises:
        SlotsExhausted: no slot is left for a new parent.
    """
    row = connection.execute("SELECT slot FROM namespaces WHERE parent = ?", (parent,)).fetchone()
    if row is not None:
        return int(row[0])
    if not create:
        return None
    highest = connection.execute("SELECT max(slot) FROM namespaces").fetchone()[0] or 0
    if highest >= MAX_SLOT:
        raise SlotsExhausted
    slot = int(highest) + 1
    connection.execute("INSERT INTO namespaces (slot, parent) VALUES (?, ?)", (slot, parent))
    return slot


def json_list(raw: Any) -> list[str]:
    """The strings of a stored JSON list; an empty list for anything else."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return []
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return []


@dataclass(frozen=True, slots=True)
class NewMemory:
    """One memory to insert: what a write chose for it, before it has a rowid."""

    memory_id: str
    text: str
    tags: Sequence[str]
    entities: Sequence[str]
    created_at: str
    idempotency: bytes | None


def insert_memory(
    connection: sqlite3.Connection,
    *,
    parent: str,
    memory_id: str,
    text: str,
    tags_json: str,
    entities: Sequence[str],
    created_at: str,
    idempotency: bytes | None,
) -> int:
    """Insert one memory with its entities and counts; return its rowid.

    Raises:
        SlotsExhausted: no slot is left for a new parent.
        sqlite3.IntegrityError: the id or idempotency digest exists in `parent` already.
    """
    new = NewMemory(memory_id, text, json_list(tags_json), entities, created_at, idempotency)
    return insert_memories(connection, parent, [new])[0]


def insert_memories(
    connection: sqlite3.Connection,
    parent: str,
    memories: Sequence[NewMemory],
    *,
    slot: int | None = None,
    full_text: list[tuple[Any, ...]] | None = None,
) -> list[int]:
    """Insert memories of one parent, in order (the last is the newest); return their rowids.

    The rows, entities and FTS entries go in with one prepared statement each; term counts
    and namespace counters are summed over the batch and written once. `slot` is the
    parent's when the caller looked it up in this transaction already.

    Raises:
        SlotsExhausted: no slot (or no rowid in the parent's range) is left.
        sqlite3.IntegrityError: an id or idempotency digest exists in `parent` already.
    """
    if not memories:
        return []
    if slot is None:  # not known to the caller, or a parent's first write: numbered now
        slot = namespace_slot(connection, parent, create=True)
        assert slot is not None
    # the batch's rowids are taken from the parent's counter, which moves on past them
    (end,) = connection.execute(
        "UPDATE namespaces SET next_counter = next_counter + ? WHERE slot = ? "
        "RETURNING next_counter",
        (len(memories), slot),
    ).fetchone()
    if end > COUNTER_SPAN:
        raise SlotsExhausted  # the caller's transaction is rolled back with the counter
    counter = end - len(memories)
    first = slot * COUNTER_SPAN + counter
    counted = [document_terms(m.text, m.tags, m.entities) for m in memories]
    # iterating a memory's counts gives its distinct terms: one C loop counts the batch's
    numbers = record_term_counts(connection, slot, Counter(chain.from_iterable(counted)))
    rows = []
    mentions: dict[str, list[Any]] = {}
    total = 0
    for seq, memory, counts in zip(
        range(first, first + len(memories)), memories, counted, strict=True
    ):
        length = round(sum(counts.values()))
        total += length
        rows.append(
            (
                seq,
                memory.memory_id,
                memory.text,
                _labels_json(memory.tags),
                _labels_json(memory.entities),
                created_at_value(memory.created_at),
                memory.idempotency,
                length,
                pack_terms(counts, numbers),
            )
        )
        if memory.entities:
            for key, name in _entity_keys(memory.entities).items():
                _count_mention(mentions, key, name)
    connection.executemany(
        "INSERT INTO memories (seq, id, text, tags, entities, created_at, "
        "idempotency_key, tokens, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    entries = [(row[0], row[2], row[3], row[4]) for row in rows]
    if full_text is not None:  # the caller inserts them with other parents' entries
        full_text += entries
    else:
        insert_full_text(connection, entries)
    record_entities(connection, slot, mentions)
    # the parent's and the store's counts in one statement
    connection.execute(
        "UPDATE namespaces SET documents = documents + ?, tokens = tokens + ? WHERE slot IN (?, ?)",
        (len(memories), total, slot, STORE_SLOT),
    )
    return [row[0] for row in rows]


def insert_full_text(connection: sqlite3.Connection, entries: list[tuple[Any, ...]]) -> None:
    """Insert FTS entries `(rowid, text, tags, entities)` in one statement, in rowid order.

    FTS5 writes the terms it buffered as a new segment (merged later) whenever a statement
    ends or a rowid comes below the last one, so entries of many parents go in together,
    in ascending rowid order: one segment for the transaction instead of one per parent.
    """
    # not by trigger: a trigger's statement savepoint makes FTS5 flush its buffer every row
    in_order = sorted(entries, key=lambda entry: int(entry[0]))
    connection.executemany(
        "INSERT INTO memories_fts (rowid, text, tags, entities) VALUES (?, ?, ?, ?)", in_order
    )


def _entity_keys(names: Sequence[str]) -> dict[str, str]:
    # a memory counts once per entity key; the first spelling of it stands for it
    keys: dict[str, str] = {}
    for name in names:
        keys.setdefault(entity_key(name), name)
    return keys


def _count_mention(mentions: dict[str, list[Any]], key: str, name: str) -> None:
    held = mentions.get(key)
    if held is None:
        mentions[key] = [name, 1]
    else:
        held[0] = min(held[0], name)
        held[1] += 1


def record_entities(
    connection: sqlite3.Connection, slot: int, mentions: dict[str, list[Any]]
) -> None:
    """Add new mentions of entities in `slot`: `{key: [name, memories]}`.

    One row per (parent, entity) holds how many memories mention it and the first of its
    spellings in code point order (as `min()` orders them), so the entity index is read
    without counting and a batch changes one row per entity, not one per mention.
    """
    if not mentions:
        return
    connection.execute(
        "INSERT INTO entities (slot, key, name, memories) "
        "SELECT ?, key, json_extract(value, '$[0]'), json_extract(value, '$[1]') "
        "FROM json_each(?) WHERE true "
        "ON CONFLICT (slot, key) DO UPDATE SET name = min(name, excluded.name), "
        "memories = memories + excluded.memories",
        (slot, orjson.dumps(mentions, option=orjson.OPT_SORT_KEYS).decode()),
    )


def delete_memory(connection: sqlite3.Connection, parent: str, memory_id: str) -> bool:
    """Delete one memory with its entities, links and counts; False when there is none."""
    row = connection.execute(
        f"SELECT m.seq, m.text, m.tags, m.entities, m.tokens FROM memories m "
        f"WHERE {IN_SLOT} AND m.id = ?",
        (namespace_slot(connection, parent, create=False), memory_id),
    ).fetchone()
    if row is None:
        return False
    seq, text, tags, entities, length = row
    slot = seq // COUNTER_SPAN
    connection.execute("DELETE FROM memories WHERE seq = ?", (seq,))
    names = json_list(entities)
    keys = [(slot, key) for key in _entity_keys(names)]
    connection.executemany(
        "UPDATE entities SET memories = memories - 1 WHERE slot = ? AND key = ?", keys
    )
    connection.executemany(
        "DELETE FROM entities WHERE slot = ? AND key = ? AND memories <= 0", keys
    )
    connection.execute(
        "DELETE FROM links WHERE parent = ? AND (source = ? OR target = ?)",
        (parent, memory_id, memory_id),
    )
    counts = document_terms(text, json_list(tags), names)
    record_terms(connection, slot, counts, -1)
    connection.executemany(
        "UPDATE namespaces SET documents = max(documents - 1, 0), "
        "tokens = max(tokens - ?, 0) WHERE slot = ?",
        [(length, slot), (length, STORE_SLOT)],
    )
    return True


def _labels_json(labels: Sequence[str]) -> str:
    # most memories have no tags or entities: skip the encoder for them
    return orjson.dumps(list(labels)).decode() if labels else "[]"


def entity_key(name: str) -> str:
    """How entities are compared: case-folded, whitespace collapsed."""
    return " ".join(name.casefold().split())


def memory_from_row(row: Sequence[Any]) -> Memory | None:
    """A `Memory` from a row in `MEMORY_COLUMNS` order, or None when the row is malformed.

    Malformed rows (written by something else, or damaged) are skipped, never returned.
    """
    _, parent, memory_id, text, tags, entities, created_at, _ = row[:8]
    try:
        return Memory(
            parent=parent,
            id=memory_id,
            text=text,
            tags=_strict_list(tags),
            entities=_strict_list(entities),
            created_at=created_at_text(created_at),
        )
    except (ValidationError, ValueError, TypeError):
        _log.debug("skipped a malformed memory row")
        return None


def _strict_list(raw: Any) -> tuple[str, ...]:
    if raw == "[]":  # most memories have no tags or entities
        return ()
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, list):
        raise ValueError("not a JSON list")
    return tuple(value)
