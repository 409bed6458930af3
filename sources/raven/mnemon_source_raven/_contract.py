"""Raven's `MemoryBackend` contract, declared afresh: what a backend implements and receives."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["BackendContext", "BackendFactory", "BackendServices", "Memory", "MemoryBackend"]


@dataclass(frozen=True)
class Memory:
    """One recalled memory: its text, a normalized score and the backend's metadata.

    `metadata["id"]`, when present, is the memory's stable id.
    """

    text: str
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class MemoryBackend(Protocol):
    """What a Raven memory backend implements; every method is a coroutine."""

    async def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        top_k: int,
    ) -> list[Memory]:
        """Up to `top_k` memories for exactly one of `user_id` or `agent_id`."""
        ...

    async def store(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Hand messages over for (usually asynchronous) indexing; returns nothing."""
        ...

    async def feedback(self, signals: Sequence[Mapping[str, Any]]) -> None:
        """Accept usage signals; unknown signals are ignored.

        Raven leaves a signal's keys open. The `raven-backend` Source sends `{"type":
        "memory_usage", "memory_id", "helpful", "user_id" | "agent_id"}`, naming only memories
        recall returned to that identity, and the identity from the scope.
        """
        ...

    async def start(self) -> None:
        """Open connections; called once before any other call."""
        ...

    async def stop(self) -> None:
        """Release everything; idempotent and safe after a failed or missing start."""
        ...


@dataclass(frozen=True)
class BackendServices:
    """Services the host gives a backend: `workspace`, a folder of its own for data."""

    workspace: Path


@dataclass(frozen=True)
class BackendContext:
    """What `make_backend(ctx)` receives: its configuration, services and a logger."""

    config: Mapping[str, Any]
    services: BackendServices
    logger: logging.Logger


#: A backend factory, Raven's `make_backend(ctx)`; it may also be a coroutine function.
BackendFactory = Callable[[BackendContext], Any]
