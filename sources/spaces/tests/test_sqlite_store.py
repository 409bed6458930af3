"""The SQLite store: pragmas, schema versions and migration, ranking, derived counts."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import string
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    EntityIndexRequest,
    ForgetRequest,
    GetRequest,
    ListRequest,
    ProviderInit,
    RememberRequest,
    SearchRequest,
    StatusRequest,
)
from mnemon_source_spaces import _sqlite_search as search_module
from mnemon_source_spaces._sqlite_layout import (
    created_at_text,
    document_terms,
    encode_terms,
    packed_counts,
    packed_needles,
)
from mnemon_source_spaces._text import words

PARENT = "parent-a"
OTHER = "parent-b"

# version 1, written out by hand as the first release laid it out
SCHEMA_V1 = """
CREATE TABLE memories (
    parent TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    idempotency_key TEXT,
    PRIMARY KEY (parent, id)
);
CREATE UNIQUE INDEX memories_idempotency ON memories (parent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5 (text, content = 'memories', tokenize = 'unicode61');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
PRAGMA user_version = 1;
"""


async def open_store(path: Path, **configuration: Any) -> Any:
    return await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="k",
            data_directory=str(path.parent),
            configuration={"path": str(path), **configuration},
        )
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    adapter = await open_store(tmp_path / "store.sqlite3", synchronous="normal")
    try:
        yield adapter
    finally:
        await adapter.dispose()


# version 7's memory and entity tables, as that release laid them out
SCHEMA_V7_ROWS = """
CREATE TABLE memories (
    seq INTEGER PRIMARY KEY,
    parent TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    idempotency_key BLOB,
    tokens INTEGER NOT NULL DEFAULT 0,
    terms TEXT
);
CREATE UNIQUE INDEX memories_id ON memories (seq >> 40, id);
CREATE UNIQUE INDEX memories_idempotency ON memories (seq >> 40, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
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
CREATE TABLE entities (
    slot INTEGER NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (slot, key, seq)
) WITHOUT ROWID;
"""


def rewrite_as_version_7(path: Path) -> None:
    """Turn a closed current store into the version 7 layout holding the same data.

    What version 7 wrote: the parent's name in every row, the creation time as text, the
    term counts as `encode_terms` text and one entity row per memory and entity.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        rows = connection.execute(
            "SELECT m.seq, n.parent, m.id, m.text, m.tags, m.entities, m.created_at, "
            "m.idempotency_key, m.tokens FROM memories m JOIN namespaces n "
            "ON n.slot = m.seq >> 40 ORDER BY m.seq"
        ).fetchall()
        connection.execute("BEGIN")
        for statement in (
            # version 7 kept no vectors (version 9 added them, version 10 their clock)
            "DROP TABLE vectors",
            "DROP TABLE vector_spaces",
            "DROP TABLE vector_versions",
            "DROP TABLE vector_clock",
            "DROP TABLE memories",
            "DROP TABLE entities",
            "DELETE FROM terms WHERE documents = 0",
            "ALTER TABLE terms DROP COLUMN number",
            "UPDATE namespaces SET next_counter = 0 WHERE slot = 0",
        ):
            connection.execute(statement)
        statement = ""
        for line in SCHEMA_V7_ROWS.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                connection.execute(statement)
                statement = ""
        for seq, parent, memory_id, text, tags, entities, created, key, tokens in rows:
            names = json.loads(entities)
            counts = document_terms(text, json.loads(tags), names)
            connection.execute(
                "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, parent, memory_id, text, tags, entities, created_at_text(created), key,
                 tokens, encode_terms(counts)),
            )  # fmt: skip
            keys = {" ".join(name.casefold().split()): name for name in reversed(names)}
            connection.executemany(
                "INSERT INTO entities VALUES (?, ?, ?, ?)",
                [(seq >> 40, key, seq, name) for key, name in keys.items()],
            )
        connection.execute("PRAGMA user_version = 7")
        connection.execute("COMMIT")
    finally:
        connection.close()


def stored_counts(path: Path, memory_id: str, terms: list[str]) -> dict[str, float]:
    """The term counts a current store keeps for one memory, read back from its packing."""
    numbers = dict(query(path, "SELECT term, number FROM terms WHERE slot = 0"))
    [(packed,)] = query(path, "SELECT terms FROM memories WHERE id = ?", memory_id)
    return packed_counts(packed, packed_needles(numbers, terms))


def query(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()


async def test_the_store_uses_wal_and_records_its_schema_version(
    tmp_path: Path, store: Any
) -> None:
    await store.remember(RememberRequest(parent=PARENT, text="hello"))
    path = tmp_path / "store.sqlite3"
    assert query(path, "PRAGMA journal_mode") == [("wal",)]
    assert query(path, "PRAGMA user_version") == [(10,)]


async def test_a_version_1_store_is_migrated_in_place_keeping_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA_V1)
    connection.executemany(
        "INSERT INTO memories (parent, id, text, tags, created_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                PARENT,
                "old-1",
                "The user prefers espresso",
                '["drinks"]',
                "2023-05-01T10:00:00+00:00",
                "key-1",
            ),
            (PARENT, "old-2", "The office is in Lisbon", "[]", "2023-05-02T10:00:00+00:00", None),
            (
                OTHER,
                "old-1",
                "Another parent's espresso note",
                "[]",
                "2023-05-03T10:00:00+00:00",
                None,
            ),
        ],
    )
    connection.commit()
    connection.close()
    adapter = await open_store(path)
    try:
        status = await adapter.status(StatusRequest(parents=(PARENT, OTHER), count=True))
        assert status.availability == "ready"
        assert [(n.parent, n.memories) for n in status.namespaces] == [(PARENT, 2), (OTHER, 1)]
        page = await adapter.list(ListRequest(parent=PARENT))
        assert [(m.id, m.text, m.tags, m.created_at) for m in page.memories] == [
            ("old-2", "The office is in Lisbon", (), "2023-05-02T10:00:00+00:00"),
            ("old-1", "The user prefers espresso", ("drinks",), "2023-05-01T10:00:00+00:00"),
        ]
        found = await adapter.search(SearchRequest(parents=(PARENT,), query="espresso"))
        assert [hit.memory.id for hit in found.hits] == ["old-1"]
        again = await adapter.remember(
            RememberRequest(parent=PARENT, text="dup", idempotency_key="key-1")
        )
        assert not again.created, "the old idempotency key was lost"
        assert again.memory.id == "old-1"
    finally:
        await adapter.dispose()
    assert query(path, "PRAGMA user_version") == [(10,)]
    assert query(path, "PRAGMA integrity_check") == [("ok",)]
    assert not query(path, "SELECT name FROM sqlite_master WHERE name = 'memories_v1'")


@pytest.mark.parametrize(
    ("prepare", "reason"),
    [
        ("PRAGMA user_version = 99", "schema-mismatch"),
        ("CREATE TABLE unrelated (x)", "schema-mismatch"),
        (None, "damaged-store"),
    ],
    ids=["newer-version", "foreign-tables", "not-a-database"],
)
async def test_a_store_this_version_cannot_read_is_unavailable_and_untouched(
    tmp_path: Path, prepare: str | None, reason: str
) -> None:
    path = tmp_path / "odd.sqlite3"
    if prepare is None:
        path.write_bytes(b"\x00garbage" * 512)
    else:
        connection = sqlite3.connect(path)
        connection.execute(prepare)
        connection.commit()
        connection.close()
    before = path.read_bytes()
    adapter = await open_store(path)
    try:
        status = await adapter.status(StatusRequest())
        assert (status.availability, status.reason) == ("unavailable", reason)
        with pytest.raises(spaces_error()) as failed:
            await adapter.remember(RememberRequest(parent=PARENT, text="refused"))
        assert failed.value.code in ("schema_mismatch", "unavailable")
    finally:
        await adapter.dispose()
    if prepare is not None:
        assert query(path, "SELECT count(*) FROM sqlite_master WHERE name = 'memories'") == [(0,)]
    else:
        assert path.read_bytes() == before


def spaces_error() -> type[Exception]:
    from mnemon_source_spaces import ProviderError

    return ProviderError


async def test_rare_terms_outrank_common_ones_and_ties_go_to_the_newer(store: Any) -> None:
    for index in range(30):
        await store.remember(RememberRequest(parent=PARENT, text=f"meeting notes number {index}"))
    await store.remember(RememberRequest(parent=PARENT, text="meeting about the zeppelin budget"))
    await store.remember(RememberRequest(parent=PARENT, text="the zeppelin is grounded"))
    found = await store.search(SearchRequest(parents=(PARENT,), query="zeppelin meeting", limit=3))
    assert sorted(hit.memory.text for hit in found.hits[:2]) == [
        "meeting about the zeppelin budget",
        "the zeppelin is grounded",
    ]
    # the rare term carries the ranking: thirty "meeting" notes trail far behind
    assert found.hits[0].score >= found.hits[1].score > 0.7 > 0.1 > found.hits[2].score
    ties = await store.search(SearchRequest(parents=(PARENT,), query="notes", limit=2))
    assert [hit.memory.text for hit in ties.hits] == [
        "meeting notes number 29",
        "meeting notes number 28",
    ]


async def test_when_every_term_is_common_recall_still_finds_the_best_newest(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "SELECTIVE", 3)
    monkeypatch.setattr(search_module, "WINDOW", 5)
    for index in range(12):
        await store.remember(RememberRequest(parent=PARENT, text=f"coffee order {index}"))
    await store.remember(
        RememberRequest(parent=PARENT, text="coffee with oat milk is the usual order")
    )
    for index in range(12):
        await store.remember(RememberRequest(parent=PARENT, text=f"milk delivery {index}"))
    both = await store.search(SearchRequest(parents=(PARENT,), query="coffee milk", limit=3))
    assert both.hits[0].memory.text == "coffee with oat milk is the usual order"
    assert both.hits[0].score == 1.0
    one = await store.search(SearchRequest(parents=(PARENT,), query="milk", limit=2))
    assert [hit.memory.text for hit in one.hits] == ["milk delivery 11", "milk delivery 10"]


async def test_scores_in_one_parent_do_not_depend_on_another_parent(tmp_path: Path) -> None:
    async def scores(path: Path, noise: int) -> list[float]:
        adapter = await open_store(path, synchronous="normal")
        try:
            for text in ("the red kite flies", "a red car", "kite surfing lessons"):
                await adapter.remember(RememberRequest(parent=PARENT, text=text))
            for index in range(noise):
                await adapter.remember(
                    RememberRequest(parent=OTHER, text=f"red red red kite {index}")
                )
            found = await adapter.search(SearchRequest(parents=(PARENT,), query="red kite"))
            return [hit.score for hit in found.hits]
        finally:
            await adapter.dispose()

    assert await scores(tmp_path / "quiet.sqlite3", 0) == await scores(
        tmp_path / "noisy.sqlite3", 40
    )


async def test_forget_keeps_every_derived_count_exact(tmp_path: Path, store: Any) -> None:
    kept = await store.remember(
        RememberRequest(parent=PARENT, text="alpha beta", entities=("Ann",))
    )
    gone = await store.remember(
        RememberRequest(parent=PARENT, text="beta gamma", tags=("greek",), entities=("Ann", "Ben"))
    )
    await store.forget(ForgetRequest(parent=PARENT, id=gone.memory.id))
    path = tmp_path / "store.sqlite3"
    terms = dict(query(path, "SELECT term, documents FROM terms WHERE slot = 1"))
    assert terms == {"alpha": 1, "beta": 1, "ann": 1}
    assert query(path, "SELECT name FROM entities") == [("Ann",)]
    assert query(path, "SELECT documents FROM namespaces ORDER BY slot") == [(1,), (1,)]
    connection = sqlite3.connect(path)
    try:
        connection.execute(
            "INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)"
        )
    finally:
        connection.close()
    assert (await store.get(GetRequest(parent=PARENT, id=kept.memory.id))).memory is not None


async def test_memory_ids_and_texts_round_trip_unicode(store: Any) -> None:
    text = "Café naïve — 日本語のメモ 🙂 with {{template}} and {braces}"
    stored = await store.remember(RememberRequest(parent=PARENT, text=text, tags=("ünïcode",)))
    got = await store.get(GetRequest(parent=PARENT, id=stored.memory.id))
    assert got.memory.text == text
    found = await store.search(SearchRequest(parents=(PARENT,), query="cafe NAIVE"))
    assert [hit.memory.id for hit in found.hits] == [stored.memory.id]


async def test_a_bad_cursor_is_refused(store: Any) -> None:
    from mnemon_source_spaces import ProviderError

    with pytest.raises(ProviderError) as refused:
        await store.list(ListRequest(parent=PARENT, cursor="not-a-cursor"))
    assert refused.value.code == "invalid_payload"


async def test_a_memory_holding_every_term_is_found_even_when_bm25_alone_would_miss_it(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "SELECTIVE", 50)
    monkeypatch.setattr(search_module, "MIN_CANDIDATES", 2)
    target = "the zeppelin carried fresh milk"
    await store.remember(RememberRequest(parent=PARENT, text=target))
    # ten shorter zeppelin notes outrank it on "zeppelin" alone, the only selective term
    for index in range(10):
        await store.remember(RememberRequest(parent=PARENT, text=f"zeppelin {index}"))
    for index in range(60):
        await store.remember(RememberRequest(parent=PARENT, text=f"milk delivery {index}"))
    for index in range(400):
        await store.remember(RememberRequest(parent=PARENT, text=f"unrelated filler {index}"))
    found = await store.search(SearchRequest(parents=(PARENT,), query="zeppelin milk", limit=1))
    assert [hit.memory.text for hit in found.hits] == [target]


# version 2, as the second release laid it out (newest first within a parent's rowid range)
SCHEMA_V2 = """
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
    parent TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    idempotency_key TEXT,
    tokens INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX memories_id ON memories (parent, id);
CREATE UNIQUE INDEX memories_idempotency ON memories (parent, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text, tags, entities,
    content = 'memories', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags, entities)
    VALUES (new.seq, new.text, new.tags, new.entities);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, entities)
    VALUES ('delete', old.seq, old.text, old.tags, old.entities);
END;
CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags, entities)
    VALUES ('delete', old.seq, old.text, old.tags, old.entities);
    INSERT INTO memories_fts (rowid, text, tags, entities)
    VALUES (new.seq, new.text, new.tags, new.entities);
END;
CREATE TABLE terms (
    slot INTEGER NOT NULL,
    term TEXT NOT NULL,
    documents INTEGER NOT NULL,
    PRIMARY KEY (slot, term)
) WITHOUT ROWID;
CREATE TABLE entities (
    parent TEXT NOT NULL,
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (parent, key, seq)
) WITHOUT ROWID;
CREATE INDEX entities_memory ON entities (seq);
CREATE TABLE links (
    parent TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    relation TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (parent, source, target, relation)
) WITHOUT ROWID;
CREATE INDEX links_target ON links (parent, target);
"""


async def test_a_version_2_store_is_renumbered_and_counted_keeping_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.sqlite3"
    span = 1 << 40
    connection = sqlite3.connect(path, isolation_level=None)
    connection.executescript(SCHEMA_V2 + "PRAGMA user_version = 2;")
    connection.execute(
        "INSERT INTO namespaces (slot, parent, next_counter) VALUES (1, ?, 2)", (PARENT,)
    )
    rows = [
        # (counter, id, text, tags, entities, created_at, idempotency digest, tokens)
        (
            0,
            "old-1",
            "Café visits: café twice",
            '["Lisbon"]',
            '["Ada Lovelace"]',
            "2024-01-01T00:00:00+00:00",
            "d" * 64,
            7,
        ),
        (1, "old-2", "The office is in Lisbon", "[]", "[]", "2024-01-02T00:00:00+00:00", None, 5),
    ]
    for counter, memory_id, text, tags, entities, created, digest, tokens in rows:
        seq = span + (span - 1 - counter)
        connection.execute(
            "INSERT INTO memories (seq, parent, id, text, tags, entities, created_at, "
            "idempotency_key, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, PARENT, memory_id, text, tags, entities, created, digest, tokens),
        )
    connection.execute(
        "INSERT INTO entities VALUES (?, 'ada lovelace', ?, 'Ada Lovelace')", (PARENT, 2 * span - 1)
    )
    connection.execute("UPDATE namespaces SET documents = 2, tokens = 12 WHERE slot IN (0, 1)")
    connection.executemany(
        "INSERT INTO terms VALUES (?, ?, 1)",
        [
            (slot, term)
            for slot in (0, 1)
            for term in (
                "cafe",
                "visits",
                "twice",
                "lisbon",
                "ada",
                "lovelace",
                "the",
                "office",
                "is",
                "in",
            )
        ],
    )
    connection.close()
    adapter = await open_store(path)
    try:
        page = await adapter.list(ListRequest(parent=PARENT))
        assert [(m.id, m.text, m.tags, m.entities, m.created_at) for m in page.memories] == [
            ("old-2", "The office is in Lisbon", (), (), "2024-01-02T00:00:00+00:00"),
            (
                "old-1",
                "Café visits: café twice",
                ("Lisbon",),
                ("Ada Lovelace",),
                "2024-01-01T00:00:00+00:00",
            ),
        ]
        found = await adapter.search(SearchRequest(parents=(PARENT,), query="cafe lovelace"))
        assert [hit.memory.id for hit in found.hits] == ["old-1"]
        newer = await adapter.remember(RememberRequest(parent=PARENT, text="Lisbon again"))
        page = await adapter.list(ListRequest(parent=PARENT, limit=1))
        assert [m.id for m in page.memories] == [newer.memory.id]
    finally:
        await adapter.dispose()
    assert query(path, "PRAGMA user_version") == [(10,)]
    assert query(path, "SELECT id, seq - ? FROM memories ORDER BY seq", span) == [
        ("old-1", 0),
        ("old-2", 1),
        (newer.memory.id, 2),
    ]
    assert query(path, "SELECT slot, key, name, memories FROM entities") == [
        (1, "ada lovelace", "Ada Lovelace", 1)
    ]
    assert query(
        path, "SELECT typeof(idempotency_key), length(idempotency_key) FROM memories "
        "WHERE id = 'old-1'"
    ) == [("blob", 16)]  # fmt: skip
    terms = ["cafe", "visits", "twice", "lisbon", "ada", "lovelace", "office"]
    assert stored_counts(path, "old-1", terms) == {
        "cafe": 2.0,
        "visits": 1.0,
        "twice": 1.0,
        "lisbon": 0.5,
        "ada": 0.75,
        "lovelace": 0.75,
    }
    assert query(path, "INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')") == []
    assert query(path, "PRAGMA integrity_check") == [("ok",)]


async def test_recall_scores_candidates_from_stored_counts_not_their_text(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(40):
        await store.remember(RememberRequest(parent=PARENT, text=f"tea note {index} with milk"))
    await store.remember(RememberRequest(parent=PARENT, text="green tea, then more tea"))
    tokenised: list[str] = []
    original = search_module.document_terms

    def counting(text: str, *args: Any) -> dict[str, float]:
        tokenised.append(text)
        return original(text, *args)

    monkeypatch.setattr(search_module, "document_terms", counting)
    found = await store.search(SearchRequest(parents=(PARENT,), query="tea", limit=3))
    assert found.hits[0].memory.text == "green tea, then more tea"
    assert len(found.hits) == 3
    assert tokenised == []


async def test_a_version_3_store_gets_the_compact_index_keeping_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v3.sqlite3"
    adapter = await open_store(path)
    try:
        for text, entities in (("Ada keeps bees", ("Ada",)), ("Bob sells honey", ("Bob",))):
            await adapter.remember(RememberRequest(parent=PARENT, text=text, entities=entities))
    finally:
        await adapter.dispose()
    rewrite_as_version_7(path)
    # version 3 as it was: FTS5 with positions, an index of entity rows by memory
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("DROP TABLE memories_fts")
    connection.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5 (text, tags, entities, "
        "content = 'memories', content_rowid = 'seq', tokenize = 'unicode61 remove_diacritics 2')"
    )
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
    connection.execute("CREATE INDEX entities_memory ON entities (seq)")
    connection.execute("PRAGMA user_version = 3")
    connection.close()
    columns = "seq, id, text, tags, entities, created_at, idempotency_key, tokens"
    before = query(path, f"SELECT {columns} FROM memories ORDER BY seq")
    adapter = await open_store(path)
    try:
        found = await adapter.search(SearchRequest(parents=(PARENT,), query="bees"))
        assert [hit.memory.text for hit in found.hits] == ["Ada keeps bees"]
        page = await adapter.list(ListRequest(parent=PARENT))
        forgotten = await adapter.forget(ForgetRequest(parent=PARENT, id=page.memories[0].id))
        assert forgotten.forgotten
    finally:
        await adapter.dispose()
    assert query(path, "PRAGMA user_version") == [(10,)]
    after = [
        (*row[:5], created_at_text(row[5]), *row[6:])
        for row in query(path, f"SELECT {columns} FROM memories ORDER BY seq")
    ]
    assert before[:1] == after
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'entities_memory'") == []
    [(sql,)] = query(path, "SELECT sql FROM sqlite_master WHERE name = 'memories_fts'")
    assert "detail = none" in sql
    assert query(path, "SELECT name FROM entities") == [("Ada",)]
    assert query(path, "INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')") == []


async def test_a_version_4_store_keeps_its_idempotency_keys_in_16_bytes(tmp_path: Path) -> None:
    path = tmp_path / "v4.sqlite3"
    adapter = await open_store(path)
    try:
        first = await adapter.remember(
            RememberRequest(parent=PARENT, text="Ada keeps bees", idempotency_key="key-bees")
        )
    finally:
        await adapter.dispose()
    rewrite_as_version_7(path)
    # version 4 as it was: the whole SHA-256 of the key, in hex
    whole = hashlib.sha256(b"key-bees").hexdigest()
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("UPDATE memories SET idempotency_key = ?", (whole,))
    connection.execute("PRAGMA user_version = 4")
    connection.close()
    adapter = await open_store(path)
    try:
        again = await adapter.remember(
            RememberRequest(parent=PARENT, text="Ada keeps bees", idempotency_key="key-bees")
        )
    finally:
        await adapter.dispose()
    assert not again.created
    assert again.memory.id == first.memory.id
    assert query(path, "PRAGMA user_version") == [(10,)]
    assert query(path, "SELECT idempotency_key FROM memories") == [(bytes.fromhex(whole)[:16],)]


async def test_a_version_5_store_gets_its_indexes_keyed_by_slot_keeping_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v5.sqlite3"
    adapter = await open_store(path)
    try:
        first = await adapter.remember(
            RememberRequest(parent=PARENT, text="Ada keeps bees", idempotency_key="key-bees")
        )
        other = await adapter.remember(RememberRequest(parent=OTHER, text="Bob keeps goats"))
    finally:
        await adapter.dispose()
    rewrite_as_version_7(path)
    # version 5 as it was: both indexes keyed by the parent's name
    connection = sqlite3.connect(path, isolation_level=None)
    connection.executescript(
        "DROP INDEX memories_id; DROP INDEX memories_idempotency;"
        "CREATE UNIQUE INDEX memories_id ON memories (parent, id);"
        "CREATE UNIQUE INDEX memories_idempotency ON memories (parent, idempotency_key)"
        " WHERE idempotency_key IS NOT NULL;"
        "PRAGMA user_version = 5;"
    )
    connection.close()
    adapter = await open_store(path)
    try:
        again = await adapter.remember(
            RememberRequest(parent=PARENT, text="Ada keeps bees", idempotency_key="key-bees")
        )
        found = await adapter.get(GetRequest(parent=OTHER, id=other.memory.id))
        crossed = await adapter.get(GetRequest(parent=PARENT, id=other.memory.id))
    finally:
        await adapter.dispose()
    assert not again.created
    assert again.memory.id == first.memory.id
    assert found.memory == other.memory
    assert crossed.memory is None
    assert query(path, "PRAGMA user_version") == [(10,)]
    indexes = dict(query(path, "SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
    assert "seq >> 40" in indexes["memories_id"]
    assert "seq >> 40" in indexes["memories_idempotency"]
    assert query(path, "SELECT count(*) FROM memories") == [(2,)]


async def test_a_version_6_store_gets_entity_rows_keyed_by_slot_keeping_every_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v6.sqlite3"
    adapter = await open_store(path)
    try:
        for parent, text, names in (
            (PARENT, "Ada met Bob", ("Ada", "Bob")),
            (PARENT, "Ada again", ("Ada",)),
            (OTHER, "Ada elsewhere", ("Ada",)),
        ):
            await adapter.remember(RememberRequest(parent=parent, text=text, entities=names))
        before = await adapter.entity_index(EntityIndexRequest(parent=PARENT))
    finally:
        await adapter.dispose()
    rewrite_as_version_7(path)
    # version 6 as it was: entity rows keyed by the parent's name
    connection = sqlite3.connect(path, isolation_level=None)
    connection.executescript(
        "CREATE TABLE old (parent TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL,"
        " name TEXT NOT NULL, PRIMARY KEY (parent, key, seq)) WITHOUT ROWID;"
        "INSERT INTO old SELECT n.parent, e.key, e.seq, e.name FROM entities e"
        " JOIN namespaces n ON n.slot = e.slot;"
        "DROP TABLE entities; ALTER TABLE old RENAME TO entities;"
        "PRAGMA user_version = 6;"
    )
    connection.close()
    adapter = await open_store(path)
    try:
        after = await adapter.entity_index(EntityIndexRequest(parent=PARENT))
        elsewhere = await adapter.entity_index(EntityIndexRequest(parent=OTHER))
        page = await adapter.list(ListRequest(parent=PARENT, limit=10))
        for memory in page.memories:
            await adapter.forget(ForgetRequest(parent=PARENT, id=memory.id))
    finally:
        await adapter.dispose()
    assert [(e.name, e.memories) for e in after.entities] == [("Ada", 2), ("Bob", 1)]
    assert after == before
    assert [(e.name, e.memories) for e in elsewhere.entities] == [("Ada", 1)]
    assert query(path, "PRAGMA user_version") == [(10,)]
    assert query(path, "SELECT slot, name FROM entities") == [(2, "Ada")]


async def test_a_version_7_store_gets_compact_rows_keeping_every_memory(tmp_path: Path) -> None:
    path = tmp_path / "v7.sqlite3"
    adapter = await open_store(path)
    try:
        for parent, text, tags, names, key in (
            (PARENT, "Ada met Bob at the café, café again", ("Travel",), ("Ada", "Bob"), "k-1"),
            (PARENT, "Ada keeps bees", (), ("ada",), None),
            (PARENT, "Ünïcode wörds and honey", ("Food", "Bees"), (), "k-3"),
            (OTHER, "Ada elsewhere keeps goats", (), ("Ada",), "k-1"),
        ):
            await adapter.remember(
                RememberRequest(
                    parent=parent, text=text, tags=tags, entities=names, idempotency_key=key
                )
            )

        async def reads() -> list[Any]:
            return [
                await adapter.list(ListRequest(parent=PARENT)),
                await adapter.list(ListRequest(parent=OTHER)),
                await adapter.search(SearchRequest(parents=(PARENT, OTHER), query="ada bees")),
                await adapter.search(SearchRequest(parents=(PARENT,), query="cafe travel")),
                await adapter.search(SearchRequest(parents=(PARENT,), query="the and")),
                await adapter.entity_index(EntityIndexRequest(parent=PARENT)),
                await adapter.entity_index(EntityIndexRequest(parent=OTHER)),
            ]

        before = await reads()
    finally:
        await adapter.dispose()
    rewrite_as_version_7(path)
    v7_terms = query(path, "SELECT slot, term, documents FROM terms ORDER BY 1, 2")
    adapter = await open_store(path)
    try:
        after = await reads()
        replayed = await adapter.remember(
            RememberRequest(parent=OTHER, text="Ada elsewhere keeps goats", idempotency_key="k-1")
        )
        newer = await adapter.remember(RememberRequest(parent=PARENT, text="Bees again, Ada"))
        latest = await adapter.search(SearchRequest(parents=(PARENT,), query="bees ada"))
        forgotten = await adapter.forget(ForgetRequest(parent=PARENT, id=newer.memory.id))
        gone = await adapter.entity_index(EntityIndexRequest(parent=PARENT))
    finally:
        await adapter.dispose()
    assert after == before
    assert [m.created_at for m in after[0].memories] == [m.created_at for m in before[0].memories]
    assert not replayed.created
    assert replayed.memory == after[1].memories[0]
    assert newer.memory.id in [hit.memory.id for hit in latest.hits]
    assert forgotten.forgotten
    assert gone == before[5]
    assert [(e.name, e.memories) for e in after[5].entities] == [("Ada", 2), ("Bob", 1)]
    assert query(path, "PRAGMA user_version") == [(10,)]
    columns = [row[1] for row in query(path, "PRAGMA table_info(memories)")]
    assert "parent" not in columns
    assert query(path, "SELECT DISTINCT typeof(created_at), typeof(terms) FROM memories") == [
        ("integer", "blob")
    ]
    assert stored_counts(path, after[0].memories[-1].id, ["cafe", "ada", "travel", "the"]) == {
        "cafe": 2.0,
        "ada": 1.75,
        "travel": 0.5,
    }
    # the document frequencies were exact before and are kept as they were
    assert query(path, "SELECT slot, term, documents FROM terms ORDER BY 1, 2") == v7_terms
    assert query(path, "SELECT name FROM sqlite_master WHERE name LIKE '%_v7'") == []
    assert query(path, "INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')") == []
    assert query(path, "PRAGMA integrity_check") == [("ok",)]


async def test_a_query_of_only_stop_words_counts_them_from_the_text(store: Any) -> None:
    # packed counts leave stop words out; a query made only of them must still rank by them
    await store.remember(RememberRequest(parent=PARENT, text="the the the cat"))
    await store.remember(RememberRequest(parent=PARENT, text="the dog"))
    found = await store.search(SearchRequest(parents=(PARENT,), query="the", limit=2))
    assert [hit.memory.text for hit in found.hits] == ["the the the cat", "the dog"]
    assert found.hits[0].score > found.hits[1].score


def test_the_terms_counted_for_a_memory_are_the_terms_fts5_indexes() -> None:
    # recall scores candidates from counts made in Python: they must be FTS5's own terms
    chooser = random.Random(7)
    alphabet = string.printable + "_" * 4 + "Éé"
    texts = ["".join(chooser.choice(alphabet) for _ in range(chooser.randint(0, 80)))]
    texts += ["".join(chooser.choice(string.printable) for _ in range(80)) for _ in range(300)]
    texts += ["snake_case CamelCase x86-64 e-mail@host.org ÜBER straße naïve 3.14 İstanbul"]
    connection = sqlite3.connect(":memory:")
    connection.execute(
        "CREATE VIRTUAL TABLE t USING fts5 (text, tokenize = 'unicode61 remove_diacritics 2')"
    )
    connection.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
    for rowid, text in enumerate(texts):
        connection.execute("INSERT INTO t (rowid, text) VALUES (?, ?)", (rowid, text))
        indexed = [
            row[0]
            for row in connection.execute(
                "SELECT term FROM v WHERE doc = ? ORDER BY offset", (rowid,)
            )
        ]
        assert words(text) == indexed, text
