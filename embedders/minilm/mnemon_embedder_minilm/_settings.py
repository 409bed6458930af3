"""The embedder's configuration: how many CPU threads a model run uses, how many texts it takes.

Read in the factory, so a bad value refuses the mount with the key's name; nothing heavy is
imported here.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mnemon.sdk import DefinitionError

__all__ = ["BOUNDS", "MiniLMSettings", "read_settings"]

#: the inclusive range of each configuration key
BOUNDS = {"threads": (1, 64), "batch": (1, 256)}


@dataclass(frozen=True, slots=True)
class MiniLMSettings:
    """How the model runs: `threads` for one run, `batch` texts per run."""

    threads: int
    batch: int


def _default_threads() -> int:
    # two threads gave 1.7x the throughput of one; more would take cores from the event loop
    return max(1, min(2, os.cpu_count() or 1))


def read_settings(configuration: Mapping[str, Any]) -> MiniLMSettings:
    """The settings an entry's configuration asks for, defaults filled in.

    Raises:
        DefinitionError: a key is unknown, or its value is not a whole number in its range;
            the message names the key, never the value.
    """
    for key in configuration:
        if key not in BOUNDS:
            close = difflib.get_close_matches(str(key), list(BOUNDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise DefinitionError(f"minilm configuration.{key}: unknown key{hint}")
    values = {"threads": _default_threads(), "batch": 32}
    for key, (low, high) in BOUNDS.items():
        if key not in configuration:
            continue
        value = configuration[key]
        # bool is an int to Python, never to a profile's author
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise DefinitionError(
                f"minilm configuration.{key}: must be a whole number from {low} to {high}"
            )
        values[key] = value
    return MiniLMSettings(**values)
