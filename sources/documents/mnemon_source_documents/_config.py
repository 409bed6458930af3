"""Configuration of a documents Source: checked once, in the factory, naming the key at fault."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemon import DefinitionError, SourceInit, source_data_directory

__all__ = ["LIMITS", "DocumentsSettings", "read_settings"]

#: key -> (smallest, largest, default) of the integer settings
LIMITS: Mapping[str, tuple[int, int, int]] = {
    # one document file (front matter + body), in UTF-8 bytes
    "max_document_bytes": (1, 4_194_304, 262_144),
    # documents per workspace
    "max_documents": (1, 100_000, 10_000),
    # characters of one search excerpt, before the route's own ceilings apply
    "excerpt_characters": (20, 4_000, 600),
}
LOCK_TIMEOUT = (0.01, 300.0, 10.0)
KEYS = frozenset({"data_dir", "lock_timeout", *LIMITS})


@dataclass(frozen=True, slots=True)
class DocumentsSettings:
    """Validated settings of one documents Source instance."""

    root: Path
    max_document_bytes: int = LIMITS["max_document_bytes"][2]
    max_documents: int = LIMITS["max_documents"][2]
    excerpt_characters: int = LIMITS["excerpt_characters"][2]
    lock_timeout: float = LOCK_TIMEOUT[2]


def _integer(configuration: Mapping[str, Any], key: str) -> int:
    low, high, default = LIMITS[key]
    value = configuration.get(key, default)
    # bool is an int in Python, never a size
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DefinitionError(
            f"documents configuration.{key}: must be an integer from {low} to {high}"
        )
    return value


def read_settings(init: SourceInit) -> DocumentsSettings:
    """Check the configuration of one instance and resolve its data folder (not created here).

    Raises:
        DefinitionError: an unknown key, a wrong type, a value out of range, or a relative
            `data_dir`; the message names the key.
    """
    configuration = init.configuration
    unknown = sorted(set(configuration) - KEYS)
    if unknown:
        raise DefinitionError(f"documents configuration: unknown key {unknown[0]!r}")
    try:
        root = source_data_directory(init, configuration.get("data_dir"))
    except DefinitionError as exc:
        raise DefinitionError(f"documents {exc}") from None
    low, high, default = LOCK_TIMEOUT
    timeout = configuration.get("lock_timeout", default)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not low <= timeout <= high
    ):
        raise DefinitionError(
            f"documents configuration.lock_timeout: must be a number of seconds from {low} "
            f"to {high:g}"
        )
    return DocumentsSettings(
        root=root,
        max_document_bytes=_integer(configuration, "max_document_bytes"),
        max_documents=_integer(configuration, "max_documents"),
        excerpt_characters=_integer(configuration, "excerpt_characters"),
        lock_timeout=float(timeout),
    )
