"""Configuration of a documents Source: a `Configuration`, checked once, in the factory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictFloat, StrictInt

from mnemon.sdk import (
    ConfigPath,
    Configuration,
    SourceInit,
    read_configuration,
    source_data_directory,
)

__all__ = [
    "LIMITS",
    "RESCAN_SECONDS",
    "DocumentsConfiguration",
    "DocumentsSettings",
    "read_settings",
]

#: key -> (smallest, largest, default) of the integer settings
LIMITS: Mapping[str, tuple[int, int, int]] = {
    # one document file (front matter + body), in UTF-8 bytes
    "max_document_bytes": (1, 4_194_304, 262_144),
    # documents per workspace
    "max_documents": (1, 100_000, 10_000),
    # characters of one search excerpt, before the route's own ceilings apply
    "excerpt_characters": (20, 4_000, 600),
    # document files whose stat a turn re-checks when the folder did not change (edits in place)
    "recheck_files_per_turn": (0, 100_000, 32),
}
LOCK_TIMEOUT = (0.01, 300.0, 10.0)
#: seconds after which a turn scans the whole folder again, changed or not
RESCAN_SECONDS = (0.0, 3_600.0, 5.0)


def _bounded(key: str, title: str | None = None) -> object:
    low, high, default = LIMITS[key]
    # strict: a bool or a numeric string is never a size
    return Field(default=default, ge=low, le=high, title=title)


class DocumentsConfiguration(Configuration):
    """What a profile may say about a documents Source: its folder, sizes and freshness."""

    data_dir: ConfigPath | None = Field(default=None, title="Data folder")
    """Base folder: this entry's documents go in `<data_dir>/sources/documents/<entry>/`;
    default: the host's data folder."""
    max_document_bytes: Annotated[
        StrictInt, _bounded("max_document_bytes", "Largest document (bytes)")
    ]
    """The largest document file (front matter and body), in UTF-8 bytes."""
    max_documents: Annotated[StrictInt, _bounded("max_documents")]
    """Documents per workspace; further creates get `documents-capacity`."""
    excerpt_characters: Annotated[StrictInt, _bounded("excerpt_characters", "Excerpt characters")]
    """The longest excerpt per search hit, before the route's own ceilings."""
    lock_timeout: Annotated[
        StrictFloat,
        Field(
            default=LOCK_TIMEOUT[2],
            ge=LOCK_TIMEOUT[0],
            le=LOCK_TIMEOUT[1],
            title="Lock timeout (seconds)",
        ),
    ]
    """Seconds to wait for the workspace lock before giving up with `timeout`."""
    recheck_files_per_turn: Annotated[StrictInt, _bounded("recheck_files_per_turn")]
    """Document files whose stat a turn re-checks when the folder did not change."""
    # a whole number is taken as a number of seconds too
    rescan_seconds: Annotated[
        StrictFloat,
        Field(
            default=RESCAN_SECONDS[2],
            ge=RESCAN_SECONDS[0],
            le=RESCAN_SECONDS[1],
            title="Full scan after (seconds)",
        ),
    ]
    """A turn scans the whole folder when its last scan is this many seconds old; 0 scans
    every turn."""


@dataclass(frozen=True, slots=True)
class DocumentsSettings:
    """Validated settings of one documents Source instance, with its data folder resolved."""

    root: Path
    max_document_bytes: int = LIMITS["max_document_bytes"][2]
    max_documents: int = LIMITS["max_documents"][2]
    excerpt_characters: int = LIMITS["excerpt_characters"][2]
    lock_timeout: float = LOCK_TIMEOUT[2]
    recheck_files_per_turn: int = LIMITS["recheck_files_per_turn"][2]
    rescan_seconds: float = RESCAN_SECONDS[2]


def read_settings(init: SourceInit) -> DocumentsSettings:
    """Check the configuration of one instance and resolve its data folder (not created here).

    Raises:
        DefinitionError: an unknown key, a wrong type or a value out of range; the message
            names the key (`documents configuration.<key>: <rule>`), never its value.
    """
    configuration = read_configuration(DocumentsConfiguration, init, subject="documents")
    data_dir = configuration.data_dir
    return DocumentsSettings(
        root=source_data_directory(init, None if data_dir is None else str(data_dir)),
        max_document_bytes=configuration.max_document_bytes,
        max_documents=configuration.max_documents,
        excerpt_characters=configuration.excerpt_characters,
        lock_timeout=float(configuration.lock_timeout),
        recheck_files_per_turn=configuration.recheck_files_per_turn,
        rescan_seconds=float(configuration.rescan_seconds),
    )
