"""The SQLite Provider passes the Provider suite, and keeps its storage promises."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from mnemon_source_spaces import SQLITE_PROVIDER
from mnemon_source_spaces.testing import ProviderConformance

STORE = "store.sqlite3"


class TestSqliteProvider(ProviderConformance):
    provider = SQLITE_PROVIDER
    secrets: ClassVar[Mapping[str, str]] = {"token": "sqlite-token-never-used-7d2c"}
    stall_timeout = 3.0

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / STORE), "busy_timeout_ms": 1_000}

    def corrupt(self, directory: Path, configuration: Mapping[str, Any], parent: str) -> bool:
        connection = sqlite3.connect(directory / STORE, isolation_level=None)
        try:
            slot = connection.execute(
                "SELECT slot FROM namespaces WHERE parent = ?", (parent,)
            ).fetchone()[0]
            base = slot * (1 << 40)
            rows = [
                (
                    base + 10,
                    "bad-tags",
                    "apple with tags that are not JSON",
                    "not json",
                    "[]",
                    "2024-01-01T00:00:00+00:00",
                ),
                (
                    base + 11,
                    "bad id with spaces",
                    "apple under a malformed id",
                    "[]",
                    "[]",
                    "2024-01-01T00:00:00+00:00",
                ),
                (base + 12, "bad-time", "apple written yesterday", "[]", "[]", "yesterday"),
                (
                    base + 13,
                    "bad-entities",
                    "apple with entity soup",
                    "[]",
                    '{"x": 1}',
                    "2024-01-01T00:00:00+00:00",
                ),
                (base + 14, "bad-text", "", "[]", "[]", "2024-01-01T00:00:00+00:00"),
            ]
            connection.executemany(
                "INSERT INTO memories (seq, id, text, tags, entities, created_at, tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, 3)",
                [
                    (seq, memory_id, text, tags, entities, created)
                    for seq, memory_id, text, tags, entities, created in rows
                ],
            )
            connection.execute(
                "INSERT INTO entities (slot, key, name, memories) VALUES (?, 'bad\x01', 'bad\x01name', 1)",
                (base >> 40,),
            )
            connection.execute(
                "INSERT INTO links (parent, source, target, relation, created_at) "
                "VALUES (?, 'm-1', 'bad id with spaces', 'related', '2024-01-01T00:00:00+00:00')",
                (parent,),
            )
        finally:
            connection.close()
        return True

    @contextmanager
    def stall(self, directory: Path, configuration: Mapping[str, Any]) -> Iterator[None]:
        # another writer holds the store's write lock for the whole block
        connection = sqlite3.connect(directory / STORE, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            yield
            connection.execute("ROLLBACK")
        finally:
            connection.close()
