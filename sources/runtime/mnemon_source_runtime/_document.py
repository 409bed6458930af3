"""The stored document of one scope partition: its schema, its bytes, and the writes on it.

Everything here is pure: decoding checks a file's content against the schema (a file that
breaks it is `Damaged`, never repaired silently), and `apply_change` computes the next
document and its exact bytes, refusing a write that would overflow the byte cap.

One document holds the user facts of its partition, shared by every agent, and the notes of
each agent (or of the scope without an agent) apart, so one lock and one atomic write cover
a turn's whole snapshot.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

import orjson

from mnemon.sdk import SourceError, check_memory_text

from ._config import MAX_IDEMPOTENCY_RECORDS

__all__ = [
    "DEFAULT_IMPORTANCE",
    "FORMAT",
    "LEGACY_FORMAT",
    "MAX_IMPORTANCE",
    "MAX_TEXT_CHARACTERS",
    "TARGETS",
    "Applied",
    "Change",
    "Damaged",
    "Document",
    "Entry",
    "Notes",
    "apply_change",
    "capped_size",
    "damaged_revision",
    "decode",
    "empty_document",
    "encode",
    "entry_json",
    "read_change",
    "revision_of",
]

FORMAT = "mnemon-runtime/2"
# the format before tenants and agents split partitions; still read, rewritten as FORMAT
LEGACY_FORMAT = "mnemon-runtime/1"
Target = Literal["user", "memory"]
Operation = Literal["add", "replace", "remove"]
TARGETS: tuple[Target, ...] = ("user", "memory")
OPERATIONS: tuple[Operation, ...] = ("add", "replace", "remove")
PREFIX: dict[Target, str] = {"user": "u", "memory": "m"}
LABEL: dict[Target, str] = {"user": "user fact", "memory": "agent note"}
DEFAULT_IMPORTANCE = 3
MIN_IMPORTANCE = 1
MAX_IMPORTANCE = 5
MAX_TEXT_CHARACTERS = 2_000
ENTRY_ID_PATTERN = r"^[um][1-9][0-9]{0,8}$"
_ENTRY_ID = re.compile(ENTRY_ID_PATTERN)
# the longest scope value the core accepts, so the longest agent id a file can record
_MAX_AGENT_ID = 300
_DOCUMENT_KEYS = frozenset({"format", "partition", "sequence", "user", "notes", "recent"})
_BOOK_KEYS = frozenset({"next", "entries"})
_NOTES_KEYS = frozenset({"agent_id", "next", "entries"})
_LEGACY_KEYS = frozenset({"format", "partition", "sequence", "next", "user", "memory", "recent"})
_ENTRY_KEYS = frozenset({"id", "text", "importance", "created_at", "updated_at"})
_RECORD_KEYS = frozenset({"key", "fingerprint", "agent_id", "id", "sequence", "committed_at"})
_LEGACY_RECORD_KEYS = _RECORD_KEYS - {"agent_id"}


class Damaged(Exception):
    """A partition file that does not hold a valid runtime document; `problem` says why.

    `revision` identifies the damaged bytes, so a human's fenced write reaches the Source
    and is refused there with a clear error.
    """

    def __init__(self, problem: str, revision: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.revision = revision


@dataclass(frozen=True, slots=True)
class Entry:
    """One user fact or agent note; `id` is a short handle like `u3`, never reused."""

    id: str
    text: str
    importance: int
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Notes:
    """The notes of one agent (`agent_id` None: of the scope without an agent)."""

    agent_id: str | None
    next: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A committed write with an idempotency key, so a retry does not write twice.

    Keys are per agent (`agent_id` of the writer's scope): two agents never replay each
    other's writes.
    """

    key: str
    fingerprint: str
    agent_id: str | None
    id: str
    sequence: int
    committed_at: str


@dataclass(frozen=True, slots=True)
class Document:
    """The whole memory of one scope partition: shared user facts, and notes per agent."""

    partition: tuple[tuple[str, str], ...]
    sequence: int
    next_user: int
    user: tuple[Entry, ...]
    notes: tuple[Notes, ...]
    recent: tuple[KeyRecord, ...]

    def notes_of(self, agent_id: str | None) -> Notes:
        """The notes of one agent; empty when it has none yet."""
        for notes in self.notes:
            if notes.agent_id == agent_id:
                return notes
        return Notes(agent_id, 1, ())

    def entries(self, target: Target, agent_id: str | None) -> tuple[Entry, ...]:
        """The entries of one target as the scope of `agent_id` sees them."""
        return self.user if target == "user" else self.notes_of(agent_id).entries


def empty_document(partition: tuple[tuple[str, str], ...]) -> Document:
    """The document of a partition nothing was written to yet."""
    return Document(partition, 0, 1, (), (), ())


def revision_of(raw: bytes | None, sequence: int) -> str:
    """The exact revision of a stored file: its write sequence and the digest of its bytes."""
    if raw is None:
        return "r0"
    return f"r{sequence}-{hashlib.sha256(raw).hexdigest()}"


def damaged_revision(raw: bytes) -> str:
    """The revision of a damaged file: the digest of its bytes."""
    return f"damaged-{hashlib.sha256(raw).hexdigest()}"


# ------------------------------------------------------------------------- encoding


def _notes_order(notes: Notes) -> tuple[bool, str]:
    # the scope without an agent first, then by agent id: one document, one encoding
    return (notes.agent_id is not None, notes.agent_id or "")


def encode(document: Document) -> bytes:
    """The exact bytes stored for `document` (indented, so a human can repair it)."""
    body = {
        "format": FORMAT,
        "partition": dict(document.partition),
        "sequence": document.sequence,
        "user": {
            "next": document.next_user,
            "entries": [entry_json(entry) for entry in document.user],
        },
        "notes": [
            {
                "agent_id": notes.agent_id,
                "next": notes.next,
                "entries": [entry_json(entry) for entry in notes.entries],
            }
            for notes in document.notes
        ],
        "recent": [
            {
                "key": record.key,
                "fingerprint": record.fingerprint,
                "agent_id": record.agent_id,
                "id": record.id,
                "sequence": record.sequence,
                "committed_at": record.committed_at,
            }
            for record in document.recent
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"


def capped_size(document: Document) -> int:
    """The bytes `memory_limit_bytes` caps: the stored file without its idempotency records.

    The records are kept apart from the cap so that a write near the cap never has to give
    up the record that makes its own retry safe.
    """
    return len(encode(replace(document, recent=())))


def entry_json(entry: Entry) -> dict[str, Any]:
    """One entry as stored, and as the management plane shows it."""
    return {
        "id": entry.id,
        "text": entry.text,
        "importance": entry.importance,
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
    }


def decode(raw: bytes, partition: tuple[tuple[str, str], ...]) -> Document:
    """Check and read a stored file of `partition` (of this format or the legacy one).

    Raises:
        Damaged: the bytes are not a runtime document of this partition.
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Damaged("the file is not valid JSON") from None
    if not isinstance(body, dict):
        raise Damaged("the file does not hold a JSON object")
    if body.get("format") == LEGACY_FORMAT:
        return _decode_legacy(body, partition)
    _exact_keys(body, _DOCUMENT_KEYS, "the document")
    if body["format"] != FORMAT:
        raise Damaged(f"format: expected {FORMAT!r} (or {LEGACY_FORMAT!r})")
    if body["partition"] != dict(partition):
        raise Damaged("partition: the file belongs to another scope")
    sequence = _count(body["sequence"], "sequence", minimum=1)
    book = body["user"]
    if not isinstance(book, dict):
        raise Damaged("user: expected an object with next and entries")
    _exact_keys(book, _BOOK_KEYS, "user")
    user = _entries(book["entries"], "user", "user.entries")
    return Document(
        partition=partition,
        sequence=sequence,
        # an entry added by hand never collides with the next handle
        next_user=max(_count(book["next"], "user.next", minimum=1), _after(user)),
        user=user,
        notes=_notes(body["notes"]),
        recent=_records(body["recent"], legacy_owner=None, legacy=False),
    )


def _decode_legacy(body: dict[str, Any], partition: tuple[tuple[str, str], ...]) -> Document:
    # format 1 had one list of notes per partition; they stay with the agent of the
    # partition (when `scope_keys` named agent_id) or else with the scope without an agent
    keys = set(body)
    if keys - _LEGACY_KEYS or not keys >= _LEGACY_KEYS - {"recent"}:
        raise Damaged(f"the document must have exactly the keys {', '.join(sorted(_LEGACY_KEYS))}")
    if body["partition"] != dict(partition):
        raise Damaged("partition: the file belongs to another scope")
    owner = dict(partition).get("agent_id")
    sequence = _count(body["sequence"], "sequence", minimum=1)
    counters = body["next"]
    if not isinstance(counters, dict) or set(counters) != {"user", "memory"}:
        raise Damaged("next: expected an object with 'user' and 'memory'")
    user = _entries(body["user"], "user", "user")
    memory = _entries(body["memory"], "memory", "memory")
    next_memory = max(_count(counters["memory"], "next.memory", minimum=1), _after(memory))
    return Document(
        partition=partition,
        sequence=sequence,
        next_user=max(_count(counters["user"], "next.user", minimum=1), _after(user)),
        user=user,
        notes=(Notes(owner, next_memory, memory),) if memory or next_memory > 1 else (),
        recent=_records(body.get("recent", []), legacy_owner=owner, legacy=True),
    )


def _exact_keys(value: dict[str, Any], keys: frozenset[str], where: str) -> None:
    if set(value) != keys:
        raise Damaged(f"{where} must have exactly the keys {', '.join(sorted(keys))}")


def _count(value: object, where: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise Damaged(f"{where}: expected an integer of at least {minimum}")
    return value


def _after(entries: tuple[Entry, ...]) -> int:
    return max((int(entry.id[1:]) for entry in entries), default=0) + 1


def _entries(value: object, target: Target, where_list: str) -> tuple[Entry, ...]:
    if not isinstance(value, list):
        raise Damaged(f"{where_list}: expected a list of entries")
    entries = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = f"{where_list}[{index}]"
        if not isinstance(item, dict) or set(item) != _ENTRY_KEYS:
            raise Damaged(f"{where}: expected exactly {', '.join(sorted(_ENTRY_KEYS))}")
        entry_id = item["id"]
        if (
            not isinstance(entry_id, str)
            or not _ENTRY_ID.match(entry_id)
            or entry_id[0] != PREFIX[target]
        ):
            raise Damaged(f"{where}.id: expected {PREFIX[target]} followed by a number")
        if entry_id in seen:
            raise Damaged(f"{where}.id: {entry_id} appears twice")
        seen.add(entry_id)
        problem = _text_problem(item["text"])
        if problem:
            raise Damaged(f"{where}.text: {problem}")
        importance = item["importance"]
        if (
            not isinstance(importance, int)
            or isinstance(importance, bool)
            or not MIN_IMPORTANCE <= importance <= MAX_IMPORTANCE
        ):
            raise Damaged(f"{where}.importance: expected an integer 1 to 5")
        for stamp in ("created_at", "updated_at"):
            if not _timestamp(item[stamp]):
                raise Damaged(f"{where}.{stamp}: expected an ISO 8601 time with a time zone")
        entries.append(
            Entry(entry_id, item["text"], importance, item["created_at"], item["updated_at"])
        )
    return tuple(entries)


def _notes(value: object) -> tuple[Notes, ...]:
    if not isinstance(value, list):
        raise Damaged("notes: expected a list of the notes of each agent")
    books = []
    seen: set[str | None] = set()
    for index, item in enumerate(value):
        where = f"notes[{index}]"
        if not isinstance(item, dict):
            raise Damaged(f"{where}: expected an object")
        _exact_keys(item, _NOTES_KEYS, where)
        agent_id = item["agent_id"]
        if agent_id is not None and not _agent_id(agent_id):
            raise Damaged(f"{where}.agent_id: expected null or an agent id")
        if agent_id in seen:
            raise Damaged(f"{where}.agent_id: the notes of one agent appear twice")
        seen.add(agent_id)
        entries = _entries(item["entries"], "memory", f"{where}.entries")
        following = max(_count(item["next"], f"{where}.next", minimum=1), _after(entries))
        books.append(Notes(agent_id, following, entries))
    return tuple(sorted(books, key=_notes_order))


def _records(value: object, *, legacy_owner: str | None, legacy: bool) -> tuple[KeyRecord, ...]:
    if not isinstance(value, list) or len(value) > MAX_IDEMPOTENCY_RECORDS:
        raise Damaged(f"recent: expected a list of at most {MAX_IDEMPOTENCY_RECORDS} records")
    keys = _LEGACY_RECORD_KEYS if legacy else _RECORD_KEYS
    records = []
    for index, item in enumerate(value):
        where = f"recent[{index}]"
        if not isinstance(item, dict) or set(item) != keys:
            raise Damaged(f"{where}: expected exactly {', '.join(sorted(keys))}")
        texts = (item["key"], item["fingerprint"], item["id"])
        if not all(isinstance(text, str) and text for text in texts):
            raise Damaged(f"{where}: key, fingerprint and id must be non-empty strings")
        agent_id = legacy_owner if legacy else item["agent_id"]
        if agent_id is not None and not _agent_id(agent_id):
            raise Damaged(f"{where}.agent_id: expected null or an agent id")
        if not _timestamp(item["committed_at"]):
            raise Damaged(f"{where}.committed_at: expected an ISO 8601 time with a time zone")
        records.append(
            KeyRecord(
                item["key"],
                item["fingerprint"],
                agent_id,
                item["id"],
                _count(item["sequence"], f"{where}.sequence", minimum=1),
                item["committed_at"],
            )
        )
    return tuple(records)


def _timestamp(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _agent_id(value: object) -> bool:
    # an agent's notes are found only by a scope naming that agent, so any id a scope once
    # carried may stay; the characters scope values may hold are the core's to check
    return isinstance(value, str) and 0 < len(value) <= _MAX_AGENT_ID


def _text_problem(value: object) -> str | None:
    # stored text is checked for its shape only: text written under an earlier, looser
    # character rule keeps loading, and every reader is shown it escaped (the Wake, the CLI);
    # new text meets the one rule for memory text in read_change
    if not isinstance(value, str):
        return "expected a string"
    if not value.strip():
        return "must not be blank"
    if value != value.strip():
        return "must not start or end with whitespace"
    if len(value) > MAX_TEXT_CHARACTERS:
        return f"is longer than {MAX_TEXT_CHARACTERS} characters"
    return None


# ------------------------------------------------------------------------- writes


@dataclass(frozen=True, slots=True)
class Change:
    """One add, replace or remove on one target, as the model or a human asked for it."""

    target: Target
    operation: Operation
    text: str | None
    id: str | None
    importance: int | None

    def fingerprint(self) -> str:
        """A digest of what is asked, to tell a retry from a different write."""
        body = orjson.dumps(
            [self.target, self.operation, self.text, self.id, self.importance],
        )
        return hashlib.sha256(body).hexdigest()[:32]


def read_change(value: Mapping[str, Any]) -> Change:
    """Read a `mutate` input (already checked against the input schema) into a Change.

    Raises:
        SourceError: `invalid_payload`, naming what is wrong.
    """
    target, operation = value.get("target"), value.get("operation")
    if target not in TARGETS:
        raise SourceError("invalid_payload", "target: must be 'user' or 'memory'")
    if operation not in OPERATIONS:
        raise SourceError("invalid_payload", "operation: must be 'add', 'replace' or 'remove'")
    text, entry_id, importance = value.get("text"), value.get("id"), value.get("importance")
    if operation == "add" and entry_id is not None:
        raise SourceError("invalid_payload", "id: an add takes no id; a new one is assigned")
    if operation != "add" and (not isinstance(entry_id, str) or not _ENTRY_ID.match(entry_id)):
        raise SourceError("invalid_payload", f"id: a {operation} needs the id of an entry")
    if entry_id is not None and entry_id[0] != PREFIX[target]:
        raise SourceError(
            "invalid_payload",
            f"id: {target} ids start with {PREFIX[target]!r}, not {entry_id[0]!r}",
        )
    if operation == "remove":
        if text is not None or importance is not None:
            raise SourceError("invalid_payload", "a remove takes only target, operation and id")
    else:
        if not isinstance(text, str):
            raise SourceError("invalid_payload", f"text: an {operation} needs the entry's text")
        text = check_memory_text(text.strip(), max_characters=MAX_TEXT_CHARACTERS)
    if importance is not None and (
        not isinstance(importance, int)
        or isinstance(importance, bool)
        or not MIN_IMPORTANCE <= importance <= MAX_IMPORTANCE
    ):
        raise SourceError("invalid_payload", "importance: must be an integer from 1 to 5")
    return Change(target, operation, text, entry_id, importance)


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of one change: the next document and its bytes (None when replayed)."""

    document: Document | None
    encoded: bytes | None
    entry_id: str
    committed_at: str
    replayed: bool


def apply_change(
    document: Document,
    stored_bytes: int,
    change: Change,
    *,
    agent_id: str | None,
    now: str,
    limit: int,
    records: int,
    idempotency_key: str | None = None,
) -> Applied:
    """Apply `change`, made from the scope of `agent_id`, to `document`.

    `stored_bytes` is the capped size of the document as it is now (`capped_size`). A write
    whose result would be larger than `limit` capped bytes, and larger than the document is
    now, is refused: a store that is over its cap (the cap was lowered) can still shrink.
    The idempotency records of the latest `records` writes are kept; an older one is dropped.

    Raises:
        SourceError: `not_found` (no such entry), `invalid_payload` (an idempotency key
            reused for another write) or `runtime-capacity` (the cap would be exceeded).
    """
    fingerprint = change.fingerprint()
    if idempotency_key is not None:
        for record in document.recent:
            if record.key != idempotency_key or record.agent_id != agent_id:
                continue
            if record.fingerprint != fingerprint:
                raise SourceError(
                    "invalid_payload",
                    "idempotency key: already used for a different write in this scope",
                )
            return Applied(None, None, record.id, record.committed_at, replayed=True)

    target = change.target
    notes = document.notes_of(agent_id)
    entries = list(document.entries(target, agent_id))
    number = document.next_user if target == "user" else notes.next
    if change.operation == "add":
        entry_id = f"{PREFIX[target]}{number}"
        entries.append(
            Entry(
                entry_id,
                change.text or "",
                change.importance or DEFAULT_IMPORTANCE,
                created_at=now,
                updated_at=now,
            )
        )
        number += 1
    else:
        entry_id = change.id or ""
        index = next((i for i, entry in enumerate(entries) if entry.id == entry_id), None)
        if index is None:
            raise SourceError(
                "not_found", f"id: there is no {LABEL[target]} {entry_id} in this scope"
            )
        if change.operation == "remove":
            del entries[index]
        else:
            old = entries[index]
            entries[index] = replace(
                old,
                text=change.text if change.text is not None else old.text,
                importance=change.importance if change.importance is not None else old.importance,
                updated_at=now,
            )

    sequence = document.sequence + 1
    recent = document.recent
    if idempotency_key is not None:
        recent = (
            *recent,
            KeyRecord(idempotency_key, fingerprint, agent_id, entry_id, sequence, now),
        )
    if target == "user":
        updated = replace(document, user=tuple(entries), next_user=number)
    else:
        # an agent's notes stay in the file once it has any, so its handles are never reused
        others = tuple(book for book in document.notes if book.agent_id != agent_id)
        books = (*others, Notes(agent_id, number, tuple(entries)))
        updated = replace(document, notes=tuple(sorted(books, key=_notes_order)))
    updated = replace(updated, sequence=sequence, recent=recent[-records:])
    size = capped_size(updated)
    if size > limit and size > stored_bytes:
        raise SourceError(
            "runtime-capacity",
            f"runtime memory is full for this scope: the {change.operation} would make the "
            f"stored document {size} bytes, over memory_limit_bytes={limit} "
            f"({stored_bytes} bytes in use); remove or shorten entries first",
        )
    return Applied(updated, encode(updated), entry_id, now, replayed=False)
