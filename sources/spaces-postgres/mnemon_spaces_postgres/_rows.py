"""Rows of the PostgreSQL store: how memories are read back, keys and times as stored."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from mnemon_source_spaces import Memory
from pydantic import ValidationError

__all__ = ["MEMORY_COLUMNS", "entity_key", "idempotency_digest", "memory_from_row", "timestamp"]

_log = logging.getLogger(__name__)
#: columns every memory read selects, in `memory_from_row` order
MEMORY_COLUMNS = "m.parent, m.id, m.text, m.tags, m.entities, m.created_at, m.seq"


def idempotency_digest(key: str) -> str:
    """What the store keeps of an idempotency key: its SHA-256, fixed-size and opaque."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def entity_key(name: str) -> str:
    """How entities are compared: case-folded, whitespace collapsed."""
    return " ".join(name.casefold().split())


def timestamp(moment: datetime) -> str:
    """A stored time as the SDK's ISO 8601 text, in UTC."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def memory_from_row(row: Sequence[Any]) -> Memory | None:
    """A `Memory` from a row in `MEMORY_COLUMNS` order, or None when the row is malformed.

    Rows written by something else (or damaged) are skipped, never returned.
    """
    parent, memory_id, text, tags, entities, created_at = row[:6]
    try:
        return Memory(
            parent=parent,
            id=memory_id,
            text=text,
            tags=tuple(tags),
            entities=tuple(entities),
            created_at=timestamp(created_at),
        )
    except (ValidationError, ValueError, TypeError, AttributeError):
        _log.debug("skipped a malformed memory row")
        return None
