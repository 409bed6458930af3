"""A Raven memory backend over a vector store SDK that the user must install themselves."""

from __future__ import annotations

from typing import Any

import raven_fixture_vector_sdk  # the drop-in's dependency: not installed here
from raven.memory_engine import Memory
from raven.plugin import PluginContext


class VectorBackend:
    def __init__(self, ctx: PluginContext) -> None:
        self._client = raven_fixture_vector_sdk.Client(ctx.config.get("url"))

    async def start(self) -> None:
        await self._client.connect()

    async def stop(self) -> None:
        await self._client.close()

    async def recall(
        self, query: str, *, user_id: str | None = None, agent_id: str | None = None, top_k: int
    ) -> list[Memory]:
        if user_id is None:
            return []
        return [Memory(text=hit.text, score=hit.score) for hit in await self._client.search(query)]

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        await self._client.add(session_id, messages)

    async def feedback(self, signals: dict[str, Any]) -> None:
        return None


def make_backend(ctx: PluginContext) -> VectorBackend:
    return VectorBackend(ctx)
