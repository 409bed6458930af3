"""The no-op backend a bundled backend becomes when the library it drives is not installed.

Raven's contract: a bundled backend whose substrate is missing degrades to a no-op and logs
once, and the host still boots. Here the no-op also says so: its `unavailable_reason` makes
the Source report `unavailable` (`substrate-missing`), so no write is ever offered, and a
`store` that reaches it anyway fails saying nothing was written.
"""

from __future__ import annotations

import logging
from typing import Any

from mnemon.sdk import SourceError

from ._contract import BackendContext, BackendFactory, Memory

__all__ = ["SUBSTRATE_MISSING", "SubstrateMissingBackend", "substrate_missing"]

SUBSTRATE_MISSING = "substrate-missing"
_log = logging.getLogger("mnemon.sources.raven")
_logged: set[str] = set()


class SubstrateMissingBackend:
    """A backend that serves nothing: recall finds nothing, store and feedback are refused."""

    unavailable_reason = SUBSTRATE_MISSING

    def __init__(self, name: str) -> None:
        self._name = name

    async def start(self) -> None:
        """Nothing to open."""

    async def stop(self) -> None:
        """Nothing to close."""

    async def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        top_k: int,
    ) -> list[Memory]:
        """No memories: there is no store to read."""
        return []

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Refused: there is no store to write to.

        Raises:
            SourceError: always, saying nothing was written.
        """
        raise SourceError(
            "provider_error",
            f"the {self._name} backend cannot store: its library is not installed",
            kind="terminal",
            nothing_written=True,
            origin_code=SUBSTRATE_MISSING,
        )

    async def feedback(self, signals: dict[str, Any]) -> None:
        """Ignored, as the contract allows."""


def substrate_missing(name: str, install: str) -> BackendFactory:
    """A factory making `SubstrateMissingBackend`s; the first one made logs `install`, once."""

    def make(ctx: BackendContext) -> SubstrateMissingBackend:
        if name not in _logged:
            _logged.add(name)
            _log.warning(
                "Raven backend %r needs a library that is not installed (%s); "
                "it serves nothing until then",
                name,
                install,
            )
        return SubstrateMissingBackend(name)

    return make
