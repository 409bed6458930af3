"""A Raven memory backend that hands each stored session to an indexing service's outbox.

The service owns the outbox folder (`plugins.config["outbox-memory"].outbox`); the backend
never creates it. While the service is down its outbox is gone, and `store()` fails with the
operating system's error, as a backend whose remote service is unreachable fails. `recall()`
reads the sessions the outbox holds for the identity the plugin config names.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from raven.memory_engine.backend import Memory, MemoryBackend
from raven.plugin import PluginContext


class OutboxBackend:
    """Structurally a `MemoryBackend`."""

    def __init__(self, ctx: PluginContext) -> None:
        self._outbox = Path(str(ctx.config["outbox"]))
        self._owner = {"user_id": ctx.config.get("user_id"), "agent_id": ctx.config.get("agent_id")}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        top_k: int,
    ) -> list[Memory]:
        if (user_id is None) == (agent_id is None):
            return []
        wanted = ("user_id", user_id) if user_id is not None else ("agent_id", agent_id)
        sessions = await asyncio.to_thread(_sessions, self._outbox)
        words = set(query.lower().split())
        hits = []
        for name, session in sessions:
            if session["owner"].get(wanted[0]) != wanted[1]:
                continue
            for message in session["messages"]:
                shared = words & set(str(message["content"]).lower().split())
                if shared:
                    score = len(shared) / len(words)
                    hits.append(Memory(text=message["content"], score=score, metadata={"id": name}))
        hits.sort(key=lambda memory: memory.score, reverse=True)
        return hits[:top_k]

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        envelope = {"session_id": session_id, "owner": self._owner, "messages": messages}
        name = f"{session_id}.{uuid.uuid4().hex}.json"
        await asyncio.to_thread(_hand_over, self._outbox, name, json.dumps(envelope))

    async def feedback(self, signals: dict[str, Any]) -> None:
        return None


def _hand_over(outbox: Path, name: str, text: str) -> None:
    # written beside, then renamed: the service never picks up half a session
    partial = outbox / f".{name}.partial"
    with open(partial, "x", encoding="utf-8") as stream:  # no outbox: FileNotFoundError
        stream.write(text)
    partial.rename(outbox / name)


def _sessions(outbox: Path) -> list[tuple[str, dict[str, Any]]]:
    if not outbox.is_dir():
        return []
    return [
        (path.name, json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(outbox.glob("*.json"))
    ]


def make_backend(ctx: PluginContext) -> MemoryBackend:
    return OutboxBackend(ctx)
