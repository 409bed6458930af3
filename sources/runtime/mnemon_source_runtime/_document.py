"""The stored document of one scope partition: its schema, its bytes, and the writes on it.

Everything here is pure: decoding checks a file's content against the schema (a file that
breaks it is `Damaged`, never repaired silently), and `apply_change` computes the next
document and its exact bytes, refusing a write that would overflow the byte cap.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

import orjson

from mnemon import SourceError

__all__ = [
    "DEFAULT_IMPORTANCE",
    "FORMAT",
    "MAX_IMPORTANCE",
    "MAX_TEXT_CHARACTERS",
    "TARGETS",
    "Applied",
    "Change",
    "Damaged",
    "Document",
    "Entry",
    "apply_change",
    "damaged_revision",
    "decode",
    "empty_document",
    "encode",
    "entry_json",
    "read_change",
    "revision_of",
]

FORMAT = "mnemon-runtime/1"
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
# the idempotency keys of the latest writes; the first thing given up when space runs out
MAX_RECENT_KEYS = 32
ENTRY_ID_PATTERN = r"^[um][1-9][0-9]{0,8}$"
_ENTRY_ID = re.compile(ENTRY_ID_PATTERN)
# anything but tab and newline below U+0020, and DEL: they would garble the rendered lines
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DOCUMENT_KEYS = frozenset({"format", "partition", "sequence", "next", "user", "memory", "recent"})
_ENTRY_KEYS = frozenset({"id", "text", "importance", "created_at", "updated_at"})
_RECORD_KEYS = frozenset({"key", "fingerprint", "id", "sequence", "committed_at"})


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
class KeyRecord:
    """A committed write with an idempotency key, so a retry does not write twice."""

    key: str
    fingerprint: str
    id: str
    sequence: int
    committed_at: str


@dataclass(frozen=True, slots=True)
class Document:
    """The whole memory of one scope partition."""

    partition: tuple[tuple[str, str], ...]
    sequence: int
    next_user: int
    next_memory: int
    user: tuple[Entry, ...]
    memory: tuple[Entry, ...]
    recent: tuple[KeyRecord, ...]

    def entries(self, target: Target) -> tuple[Entry, ...]:
        """The entries of one target."""
        return self.user if target == "user" else self.memory


def empty_document(partition: tuple[tuple[str, str], ...]) -> Document:
    """The document of a partition nothing was written to yet."""
    return Document(partition, 0, 1, 1, (), (), ())


def revision_of(raw: bytes | None, sequence: int) -> str:
    """The exact revision of a stored file: its write sequence and the digest of its bytes."""
    if raw is None:
        return "r0"
    return f"r{sequence}-{hashlib.sha256(raw).hexdigest()}"


def damaged_revision(raw: bytes) -> str:
    """The revision of a damaged file: the digest of its bytes."""
    return f"damaged-{hashlib.sha256(raw).hexdigest()}"


# ------------------------------------------------------------------------- encoding


def encode(document: Document) -> bytes:
    """The exact bytes stored for `document` (indented, so a human can repair it)."""
    body = {
        "format": FORMAT,
        "partition": dict(document.partition),
        "sequence": document.sequence,
        "next": {"user": document.next_user, "memory": document.next_memory},
        "user": [entry_json(entry) for entry in document.user],
        "memory": [entry_json(entry) for entry in document.memory],
        "recent": [
            {
                "key": record.key,
                "fingerprint": record.fingerprint,
                "id": record.id,
                "sequence": record.sequence,
                "committed_at": record.committed_at,
            }
            for record in document.recent
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"


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
    """Check and read a stored file of `partition`.

    Raises:
        Damaged: the bytes are not a runtime document of this partition.
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Damaged("the file is not valid JSON") from None
    if not isinstance(body, dict):
        raise Damaged("the file does not hold a JSON object")
    keys = set(body)
    if keys - _DOCUMENT_KEYS or not keys >= _DOCUMENT_KEYS - {"recent"}:
        raise Damaged(
            f"the document must have exactly the keys {', '.join(sorted(_DOCUMENT_KEYS))}"
        )
    if body["format"] != FORMAT:
        raise Damaged(f"format: expected {FORMAT!r}")
    if body["partition"] != dict(partition):
        raise Damaged("partition: the file belongs to another scope")
    sequence = _count(body["sequence"], "sequence", minimum=1)
    counters = body["next"]
    if not isinstance(counters, dict) or set(counters) != {"user", "memory"}:
        raise Damaged("next: expected an object with 'user' and 'memory'")
    user = _entries(body["user"], "user")
    memory = _entries(body["memory"], "memory")
    recent = _records(body.get("recent", []))
    return Document(
        partition=partition,
        sequence=sequence,
        # an entry added by hand never collides with the next handle
        next_user=max(_count(counters["user"], "next.user", minimum=1), _after(user)),
        next_memory=max(_count(counters["memory"], "next.memory", minimum=1), _after(memory)),
        user=user,
        memory=memory,
        recent=recent,
    )


def _count(value: object, where: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise Damaged(f"{where}: expected an integer of at least {minimum}")
    return value


def _after(entries: tuple[Entry, ...]) -> int:
    return max((int(entry.id[1:]) for entry in entries), default=0) + 1


def _entries(value: object, target: Target) -> tuple[Entry, ...]:
    if not isinstance(value, list):
        raise Damaged(f"{target}: expected a list of entries")
    entries = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = f"{target}[{index}]"
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


def _records(value: object) -> tuple[KeyRecord, ...]:
    if not isinstance(value, list) or len(value) > MAX_RECENT_KEYS:
        raise Damaged(f"recent: expected a list of at most {MAX_RECENT_KEYS} records")
    records = []
    for index, item in enumerate(value):
        where = f"recent[{index}]"
        if not isinstance(item, dict) or set(item) != _RECORD_KEYS:
            raise Damaged(f"{where}: expected exactly {', '.join(sorted(_RECORD_KEYS))}")
        texts = (item["key"], item["fingerprint"], item["id"])
        if not all(isinstance(text, str) and text for text in texts):
            raise Damaged(f"{where}: key, fingerprint and id must be non-empty strings")
        if not _timestamp(item["committed_at"]):
            raise Damaged(f"{where}.committed_at: expected an ISO 8601 time with a time zone")
        records.append(
            KeyRecord(
                item["key"],
                item["fingerprint"],
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


def _text_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "expected a string"
    if not value.strip():
        return "must not be blank"
    if value != value.strip():
        return "must not start or end with whitespace"
    if len(value) > MAX_TEXT_CHARACTERS:
        return f"is longer than {MAX_TEXT_CHARACTERS} characters"
    if _CONTROL.search(value):
        return "must not contain control characters other than tab and newline"
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
        if isinstance(text, str):
            text = text.strip()
        problem = _text_problem(text)
        if problem:
            raise SourceError("invalid_payload", f"text: {problem}")
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
    now: str,
    limit: int,
    idempotency_key: str | None = None,
) -> Applied:
    """Apply `change` to `document`; `stored_bytes` is the size of the file as it is now.

    A write whose result would be larger than `limit` bytes, and larger than the file is
    now, is refused: a store that is over its cap (the cap was lowered) can still shrink.

    Raises:
        SourceError: `not_found` (no such entry), `invalid_payload` (an idempotency key
            reused for another write) or `runtime-capacity` (the cap would be exceeded).
    """
    fingerprint = change.fingerprint()
    if idempotency_key is not None:
        for record in document.recent:
            if record.key != idempotency_key:
                continue
            if record.fingerprint != fingerprint:
                raise SourceError(
                    "invalid_payload",
                    "idempotency key: already used for a different write in this scope",
                )
            return Applied(None, None, record.id, record.committed_at, replayed=True)

    target = change.target
    entries = list(document.entries(target))
    next_user, next_memory = document.next_user, document.next_memory
    if change.operation == "add":
        number = next_user if target == "user" else next_memory
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
        if target == "user":
            next_user += 1
        else:
            next_memory += 1
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
        record = KeyRecord(idempotency_key, fingerprint, entry_id, sequence, now)
        recent = (*recent, record)[-MAX_RECENT_KEYS:]
    updated = replace(
        document,
        sequence=sequence,
        next_user=next_user,
        next_memory=next_memory,
        user=tuple(entries) if target == "user" else document.user,
        memory=tuple(entries) if target == "memory" else document.memory,
        recent=recent,
    )
    encoded = encode(updated)
    while _overflows(len(encoded), stored_bytes, limit) and updated.recent:
        updated = replace(updated, recent=updated.recent[1:])
        encoded = encode(updated)
    if _overflows(len(encoded), stored_bytes, limit):
        raise SourceError(
            "runtime-capacity",
            f"runtime memory is full for this scope: the {change.operation} would make the "
            f"stored document {len(encoded)} bytes, over memory_limit_bytes={limit} "
            f"({stored_bytes} bytes in use); remove or shorten entries first",
        )
    return Applied(updated, encoded, entry_id, now, replayed=False)


def _overflows(size: int, stored_bytes: int, limit: int) -> bool:
    return size > limit and size > stored_bytes
