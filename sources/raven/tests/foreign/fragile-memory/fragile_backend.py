"""A Raven memory backend whose factory refuses a configuration without an endpoint."""

from __future__ import annotations

from typing import Any

from raven.memory_engine.backend import Memory, MemoryBackend
from raven.plugin import PluginContext


class RemoteBackend:
    def __init__(self, endpoint: str) -> None:
        self._endpoint = endpoint

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def recall(
        self, query: str, *, user_id: str | None = None, agent_id: str | None = None, top_k: int
    ) -> list[Memory]:
        return []

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        return None

    async def feedback(self, signals: dict[str, Any]) -> None:
        return None


def make_backend(ctx: PluginContext) -> MemoryBackend:
    endpoint = ctx.config.get("endpoint")
    if not endpoint:
        raise ValueError("fragile-memory needs plugins.config['fragile-memory'].endpoint")
    return RemoteBackend(str(endpoint))
