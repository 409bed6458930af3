"""Unit tests of the storage layer: the document schema, the byte cap, partition files."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from mnemon_source_runtime._document import (
    Change,
    Damaged,
    apply_change,
    capped_size,
    decode,
    empty_document,
    encode,
    read_change,
)
from mnemon_source_runtime._store import Partition, load, transact

from mnemon import Scope, SourceError
from mnemon.sdk import scope_partition

ADA = (("user_id", "ada"),)
NOW = "2026-01-02T03:04:05.000006+00:00"
NOTES = {"agent_id": "planner", "next": 1, "entries": []}


def user_entries(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The user facts of a stored document's JSON."""
    entries: list[dict[str, Any]] = body["user"]["entries"]
    return entries


def added(text: str, key: str | None = None, limit: int = 1 << 20):  # type: ignore[no-untyped-def]
    change = read_change({"target": "user", "operation": "add", "text": text})
    return apply_change(
        empty_document(ADA),
        0,
        change,
        agent_id=None,
        now=NOW,
        limit=limit,
        records=256,
        idempotency_key=key,
    )


def test_a_written_document_decodes_to_itself() -> None:
    applied = added("Ada prefers tea.\nAnd biscuits.")
    assert applied.document is not None
    assert applied.encoded is not None
    assert decode(applied.encoded, ADA) == applied.document
    assert encode(applied.document) == applied.encoded


def test_notes_of_several_agents_decode_to_themselves_in_one_order() -> None:
    document = empty_document(ADA)
    for number, agent_id in enumerate(("planner", None, "coder", "planner")):
        change = read_change({"target": "memory", "operation": "add", "text": f"by {agent_id}"})
        applied = apply_change(
            document,
            capped_size(document),
            change,
            agent_id=agent_id,
            now=NOW,
            limit=1 << 20,
            records=8,
            idempotency_key=f"key-{number}",
        )
        assert applied.document is not None
        assert applied.encoded is not None
        document = applied.document
    assert decode(applied.encoded, ADA) == document
    assert [notes.agent_id for notes in document.notes] == [None, "coder", "planner"]
    assert [entry.id for entry in document.notes_of("planner").entries] == ["m1", "m2"]
    assert [entry.id for entry in document.notes_of("coder").entries] == ["m1"]
    assert document.notes_of("nobody").entries == ()


def test_the_cap_admits_a_document_of_exactly_the_limit_and_not_one_byte_more() -> None:
    size = len(added("exactly").encoded or b"")
    assert added("exactly", limit=size).document is not None
    with pytest.raises(SourceError) as full:
        added("exactly", limit=size - 1)
    assert full.value.code == "runtime-capacity"
    assert f"{size} bytes, over memory_limit_bytes={size - 1}" in str(full.value)


def test_the_cap_counts_the_file_without_its_idempotency_records() -> None:
    plain = added("exactly")
    keyed = added("exactly", key="k-1")
    assert keyed.encoded is not None
    assert plain.encoded is not None
    assert len(keyed.encoded) > len(plain.encoded)
    # a cap the plain document fits exactly admits the keyed write, record and all
    assert added("exactly", key="k-1", limit=len(plain.encoded)).document is not None


def test_only_the_latest_records_are_kept_and_the_oldest_goes_first() -> None:
    document = empty_document(ADA)
    for number in range(5):
        change = read_change({"target": "memory", "operation": "add", "text": f"n{number}"})
        applied = apply_change(
            document,
            capped_size(document),
            change,
            agent_id=None,
            now=NOW,
            limit=1 << 20,
            records=3,
            idempotency_key=f"key-{number}",
        )
        assert applied.document is not None
        document = applied.document
    assert [record.key for record in document.recent] == ["key-2", "key-3", "key-4"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"target": "user", "operation": "add", "text": "  "}, "text: must not be blank"),
        (
            {"target": "user", "operation": "add", "text": "a\x07b"},
            r"text: contains a control character \(U\+0007\)",
        ),
        ({"target": "user", "operation": "add", "text": "x", "id": "u1"}, "an add takes no id"),
        ({"target": "user", "operation": "replace", "text": "x"}, "needs the id"),
        ({"target": "memory", "operation": "remove", "id": "u1"}, "memory ids start with 'm'"),
        ({"target": "user", "operation": "remove", "id": "u1", "text": "x"}, "takes only"),
        ({"target": "user", "operation": "add", "text": "x", "importance": True}, "importance"),
    ],
    ids=[
        "blank",
        "control",
        "add-with-id",
        "replace-without-id",
        "wrong-target",
        "remove-with-text",
        "bool-importance",
    ],
)
def test_inputs_the_schema_cannot_express_are_refused(
    value: dict[str, object], message: str
) -> None:
    with pytest.raises(SourceError, match=message) as refused:
        read_change(value)
    assert refused.value.code == "invalid_payload"


def test_text_is_trimmed_and_the_fingerprint_follows_what_is_asked() -> None:
    padded = read_change({"target": "user", "operation": "add", "text": "  tea  "})
    assert padded == Change("user", "add", "tea", None, None)
    other = read_change({"target": "user", "operation": "add", "text": "tea", "importance": 4})
    assert padded.fingerprint() != other.fingerprint()


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda body: body.pop("notes"), "exactly the keys"),
        (lambda body: body.update(extra=1), "exactly the keys"),
        (lambda body: body.update(sequence=0), "sequence"),
        (lambda body: user_entries(body).append(dict(user_entries(body)[0])), "appears twice"),
        (lambda body: user_entries(body)[0].update(id="m1"), "user.entries[0].id"),
        (lambda body: user_entries(body)[0].update(text=" padded"), "whitespace"),
        (lambda body: user_entries(body)[0].update(updated_at="yesterday"), "updated_at"),
        (lambda body: user_entries(body)[0].update(created_at="2026-01-02T03:04:05"), "time zone"),
        (lambda body: body.update(recent=[{"key": "k"}]), "recent[0]"),
        (lambda body: body.update(notes=[NOTES, NOTES]), "appear twice"),
        (lambda body: body.update(notes=[{**NOTES, "agent_id": ""}]), "notes[0].agent_id"),
        (
            lambda body: body.update(notes=[{**NOTES, "entries": [user_entries(body)[0]]}]),
            "notes[0]",
        ),
    ],
    ids=[
        "missing-key",
        "extra-key",
        "sequence",
        "duplicate-id",
        "foreign-id",
        "padded-text",
        "bad-time",
        "naive-time",
        "bad-record",
        "notes-twice",
        "blank-agent",
        "user-entry-in-notes",
    ],
)
def test_a_document_breaking_the_schema_is_damaged(mutate, problem: str) -> None:  # type: ignore[no-untyped-def]
    body = orjson.loads(added("tea").encoded or b"")
    mutate(body)
    with pytest.raises(Damaged, match=re.escape(problem)):
        decode(orjson.dumps(body), ADA)


def partition_of(directory: Path, values: dict[str, str]) -> Partition:
    """The partition of a Source whose scope_keys are exactly the ids of `values`."""
    partition = scope_partition(Scope(**values), values)
    assert partition is not None
    return Partition.of(directory, partition)


def test_partition_files_are_named_by_a_digest_of_the_scope_values(tmp_path: Path) -> None:
    hostile = partition_of(tmp_path, {"user_id": "../../etc/passwd"})
    plain = partition_of(tmp_path, {"user_id": "ada"})
    assert hostile.data.parent == tmp_path
    assert hostile.data.name.startswith("scope-")
    assert hostile.data.suffix == ".json"
    assert hostile.name != plain.name
    assert partition_of(tmp_path, {"user_id": "ada"}) == plain
    assert partition_of(tmp_path, {"user_id": "ada", "agent_id": "a"}).name != plain.name
    # which ids are present, and under which key, counts: no two of these share a file
    names = {
        partition_of(tmp_path, values).name
        for values in (
            {"user_id": "ada"},
            {"tenant_id": "acme", "user_id": "ada"},
            {"tenant_id": "ada", "user_id": "acme"},
            {"tenant_id": "ada"},
            {"user_id": "ada", "workspace": "acme"},
        )
    }
    assert len(names) == 5


def test_a_transaction_on_a_damaged_file_writes_nothing(tmp_path: Path) -> None:
    partition = partition_of(tmp_path, dict(ADA))
    tmp_path.mkdir(exist_ok=True)
    partition.data.write_bytes(b"{not json")
    change = read_change({"target": "user", "operation": "add", "text": "x"})
    steps = []

    def step(snapshot):  # type: ignore[no-untyped-def]
        steps.append(snapshot)
        return apply_change(
            snapshot.document,
            snapshot.size,
            change,
            agent_id=None,
            now=NOW,
            limit=1 << 20,
            records=8,
        )

    with pytest.raises(SourceError) as damaged:
        transact(partition, step, 1.0, threading.Event())
    assert damaged.value.code == "schema_mismatch"
    assert str(partition.data) in str(damaged.value)  # for the developer, never the View
    assert steps == []
    assert partition.data.read_bytes() == b"{not json"
    with pytest.raises(Damaged) as loaded:
        load(partition)
    assert loaded.value.revision is not None
    assert loaded.value.revision.startswith("damaged-")
