"""A Raven memory backend keeping memories in a JSON Lines file of its workspace.

Dual-track: what the user says is the user's memory, what the assistant says the agent's.
Whose memory a write is comes from the plugin config (`user_id`, `agent_id`), so that store
and recall agree on identity.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from raven.memory_engine import Memory
from raven.memory_engine.backend import MemoryBackend
from raven.plugin import PluginContext

_TRACK_OF_ROLE = {"user": "user", "assistant": "agent"}


class JsonlBackend:
    """Structurally a `MemoryBackend`."""

    def __init__(self, ctx: PluginContext) -> None:
        self._owners = {"user": ctx.config.get("user_id"), "agent": ctx.config.get("agent_id")}
        self._path = Path(ctx.services.workspace) / "memories.jsonl"
        self._feedback_path = Path(ctx.services.workspace) / "feedback.jsonl"
        self._logger = ctx.logger
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await asyncio.to_thread(self._path.parent.mkdir, parents=True, exist_ok=True)

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
        owner = ["user", user_id] if user_id is not None else ["agent", agent_id]
        rows = await asyncio.to_thread(_read, self._path)
        words = set(query.lower().split())
        hits = []
        for row in rows:
            if row["owner"] != owner:
                continue
            shared = words & set(row["text"].lower().split())
            if shared:
                score = len(shared) / len(words)
                hits.append(Memory(text=row["text"], score=score, metadata={"id": row["id"]}))
        hits.sort(key=lambda memory: memory.score, reverse=True)
        return hits[:top_k]

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        async with self._lock:
            rows = await asyncio.to_thread(_read, self._path)
            for message in messages:
                track = _TRACK_OF_ROLE.get(message.get("role", ""))
                owner = self._owners.get(track) if track else None
                if owner is None or not message.get("content"):
                    continue  # no identity configured for this side: nothing to keep
                rows.append(
                    {
                        "id": f"jl-{len(rows)}",
                        "owner": [track, owner],
                        "session": session_id,
                        "text": message["content"],
                    }
                )
            await asyncio.to_thread(_write, self._path, rows)

    async def feedback(self, signals: dict[str, Any]) -> None:
        async with self._lock:
            rows = await asyncio.to_thread(_read, self._feedback_path)
            rows.append(signals)
            await asyncio.to_thread(_write, self._feedback_path, rows)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def make_backend(ctx: PluginContext) -> MemoryBackend:
    return JsonlBackend(ctx)
