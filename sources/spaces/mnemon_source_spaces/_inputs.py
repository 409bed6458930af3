"""What the JSON Schema of an input cannot say: valid memory text and labels, memory ids."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from mnemon.sdk import SourceError, check_memory_text

from ._manifest import MAX_ENTITY_CHARACTERS, MAX_TAG_CHARACTERS, MAX_TEXT_CHARACTERS
from ._wire import MEMORY_ID_PATTERN

__all__ = ["checked_labels", "checked_text", "is_memory_id", "keyed_memory_id"]

_MEMORY_ID = re.compile(MEMORY_ID_PATTERN)
_LABEL_CHARACTERS = {"tags": MAX_TAG_CHARACTERS, "entities": MAX_ENTITY_CHARACTERS}


def is_memory_id(value: str) -> bool:
    """Whether `value` has the shape of a memory id."""
    return bool(_MEMORY_ID.match(value))


def checked_text(value: Any) -> str:
    """A memory's text, by the one rule for memory text (`mnemon.sdk.check_memory_text`).

    Raises:
        SourceError: `invalid_payload`.
    """
    if not isinstance(value, str):
        raise SourceError("invalid_payload", "text: must be a string")
    return check_memory_text(value, max_characters=MAX_TEXT_CHARACTERS, field="text")


def checked_labels(values: Iterable[Any], what: str) -> tuple[str, ...]:
    """Tags or entities: whitespace collapsed, one line of memory text each, each once, in order.

    Raises:
        SourceError: `invalid_payload`.
    """
    labels: list[str] = []
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise SourceError("invalid_payload", f"{what}[{index}]: must be a string")
        if _plain_label(value, _LABEL_CHARACTERS[what]):
            label = value  # what the check below would return for it, unchanged
        else:
            label = check_memory_text(
                " ".join(value.split()),
                max_characters=_LABEL_CHARACTERS[what],
                single_line=True,
                field=f"{what}[{index}]",
            )
        if label not in labels:
            labels.append(label)
    return tuple(labels)


def _plain_label(value: str, most: int) -> bool:
    """Whether `value` is a valid label exactly as given (the common case, checked cheaply).

    Printable ASCII, not blank, at most `most` characters, its spaces single and inside: no
    other ASCII whitespace is printable, so collapsing whitespace would not change it.
    """
    return (
        0 < len(value) <= most
        and value.isascii()
        and value.isprintable()
        and value[0] != " "
        and value[-1] != " "
        and "  " not in value
    )


def keyed_memory_id(key: str) -> str:
    """The memory id a write with idempotency key `key` stores under, in any space."""
    return (
        "k"
        + hashlib.sha256(
            b"mnemon-spaces/idempotency\x00" + key.encode("utf-8", "surrogatepass")
        ).hexdigest()[:31]
    )
