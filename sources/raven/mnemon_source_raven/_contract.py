"""Raven's `MemoryBackend` contract, declared afresh: what a backend implements and receives."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["BackendContext", "BackendFactory", "BackendServices", "Memory", "MemoryBackend"]


@dataclass(frozen=True)
class Memory:
    """One recalled memory: its text, a normalized score and the backend's metadata.

    `metadata["id"]`, when present, is the memory's stable id. The Source takes any object
    with these three attributes (a `str` text, a finite number as score, a mapping as
    metadata), so a backend may return Raven's own `Memory` too.
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

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Hand a session's messages over for (usually asynchronous) indexing.

        Whose messages they are is the backend's configuration (`ctx.config["user_id"]`,
        `ctx.config["agent_id"]`), set when it was made.
        """
        ...

    async def feedback(self, signals: dict[str, Any]) -> None:
        """Accept one dict of usage signals; a backend may ignore it.

        Raven leaves the keys open. The `raven-backend` Source sends `{"type":
        "memory_usage", "items": [{"memory_id", "helpful"}], "user_id"?, "agent_id"?}`,
        naming only memories recall returned to that identity, with the identity's ids.
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
    """Services the host gives one backend instance.

    `workspace` is a folder of its own for data (one per identity). `user_id` and
    `agent_id` are the identity it serves, as in its `ctx.config`; `tenant_id` is mnemon's
    addition, for a backend that keeps several tenants apart in one shared store.
    """

    workspace: Path
    user_id: str | None = None
    agent_id: str | None = None
    tenant_id: str | None = None


@dataclass(frozen=True)
class BackendContext:
    """What `make_backend(ctx)` receives (Raven's `PluginContext`): config, services, logger."""

    config: Mapping[str, Any]
    services: BackendServices
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("raven.plugin"))


#: A backend factory, Raven's `make_backend(ctx)`; it may also be a coroutine function.
BackendFactory = Callable[[BackendContext], Any]
