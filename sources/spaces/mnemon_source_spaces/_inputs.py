"""What the JSON Schema of an input cannot say: printable text, valid labels, memory ids."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mnemon import SourceError

from ._wire import CONTROL_CHARACTERS, MEMORY_ID_PATTERN

__all__ = ["checked_labels", "checked_text", "is_memory_id"]

_CONTROL = re.compile(CONTROL_CHARACTERS)
_MEMORY_ID = re.compile(MEMORY_ID_PATTERN)


def is_memory_id(value: str) -> bool:
    """Whether `value` has the shape of a memory id."""
    return bool(_MEMORY_ID.match(value))


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def checked_text(value: Any) -> str:
    """A memory text with something other than whitespace and no control characters.

    Raises:
        SourceError: `invalid_payload`.
    """
    if not isinstance(value, str) or not value.strip():
        raise SourceError("invalid_payload", "text must hold something other than whitespace")
    if _CONTROL.search(value):
        raise SourceError("invalid_payload", "text must not contain control characters")
    if not _encodable(value):
        raise SourceError("invalid_payload", "text must be valid Unicode")
    return value


def checked_labels(values: Iterable[Any], what: str) -> tuple[str, ...]:
    """Tags or entities: whitespace collapsed, printable, each once, in order.

    Raises:
        SourceError: `invalid_payload`.
    """
    labels: list[str] = []
    for value in values:
        label = " ".join(str(value).split())
        if not label or _CONTROL.search(label) or not _encodable(label):
            raise SourceError("invalid_payload", f"{what} must be short, printable text")
        if label not in labels:
            labels.append(label)
    return tuple(labels)
