"""The embedder's configuration: how many CPU threads a model run uses, how many texts it takes.

A `mnemon.sdk.Configuration` model read in the factory with `mnemon.sdk.read_configuration`, so a
bad value refuses the mount with the key's name, as every plugin's configuration does; nothing
heavy is imported here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from mnemon.sdk import Configuration, read_configuration

__all__ = ["BOUNDS", "MiniLMConfiguration", "MiniLMSettings", "read_settings"]

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


def _whole(low: int, high: int) -> BeforeValidator:
    """Refuses anything but a whole number from `low` to `high`, with one rule naming them."""

    def check(value: object) -> object:
        # bool is an int to Python, never to a profile's author
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be a whole number from {low} to {high}")
        return value

    return BeforeValidator(check)


_Threads = Annotated[int, Field(ge=BOUNDS["threads"][0], le=BOUNDS["threads"][1])]
_Batch = Annotated[int, Field(ge=BOUNDS["batch"][0], le=BOUNDS["batch"][1])]


class MiniLMConfiguration(Configuration):
    """What a profile may say about the MiniLM embedder (see the README's table)."""

    threads: Annotated[_Threads, _whole(*BOUNDS["threads"])] = Field(
        default_factory=_default_threads,
        description="CPU threads one model run uses (default: 2, or 1 on a one-core machine).",
    )
    batch: Annotated[_Batch, _whole(*BOUNDS["batch"])] = Field(
        default=32, description="Texts encoded in one model run (default: 32)."
    )


def read_settings(configuration: Mapping[str, Any]) -> MiniLMSettings:
    """The settings an entry's configuration asks for, defaults filled in.

    Raises:
        DefinitionError: a key is unknown, or its value is not a whole number in its range;
            the message names the key, never the value.
    """
    read = read_configuration(MiniLMConfiguration, configuration, subject="minilm")
    return MiniLMSettings(threads=read.threads, batch=read.batch)
