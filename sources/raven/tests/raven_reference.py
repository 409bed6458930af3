"""Reference Raven backends for the tests: written as a Raven author would, file-backed.

Raven makes a backend for one identity: `ctx.config["user_id"]` and `ctx.config["agent_id"]`
say whose messages `store(session_id, messages)` keeps. `make_backend` is dual-track (a user
message is the user's memory, an assistant message the agent's); `make_user_only_backend`
keeps only users' memories and returns nothing on the agent track. `EVENTS` records lifecycle
calls per workspace, and `INSTANCES` every backend made, so tests can count and find them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
from mnemon_source_raven import BackendContext, Memory

EVENTS: dict[str, list[str]] = defaultdict(list)
INSTANCES: list[FileBackend] = []


class FileBackend:
    """Memories in one JSON file per track id; recall scores by shared words."""

    def __init__(self, ctx: BackendContext, tracks: tuple[str, ...] = ("user", "agent")) -> None:
        self.workspace = ctx.services.workspace
        self.tenant = ctx.services.tenant_id
        self.config = dict(ctx.config)
        self._tracks = tracks
        self._fail_start = bool(ctx.config.get("fail_start", False))
        self._fail_recall = bool(ctx.config.get("fail_recall", False))
        self._hang_store = bool(ctx.config.get("hang_store", False))
        self._lock = anyio.Lock()
        self.started = False
        self.feedback_seen: list[dict[str, Any]] = []
        self.stored: list[tuple[str, list[dict[str, Any]]]] = []
        self.recalls: list[dict[str, Any]] = []
        INSTANCES.append(self)

    def _events(self) -> list[str]:
        return EVENTS[str(self.workspace)]

    def _file(self, track: str, who: str) -> Path:
        return self.workspace / f"{track}-{json.dumps(who).encode().hex()[:200]}.json"

    async def start(self) -> None:
        self._events().append("start")
        if self._fail_start:
            raise ConnectionError("the reference store is configured to fail at start")
        self.started = True

    async def stop(self) -> None:
        self._events().append("stop")
        self.started = False

    async def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        top_k: int,
    ) -> list[Memory]:
        self.recalls.append({"user_id": user_id, "agent_id": agent_id, "top_k": top_k})
        if (user_id is None) == (agent_id is None):
            return []
        if self._fail_recall:
            raise RuntimeError("reference recall failure with secret tok-REF-1")
        track, who = ("user", user_id) if user_id is not None else ("agent", agent_id)
        if track not in self._tracks:
            return []
        assert who is not None
        rows = await anyio.to_thread.run_sync(_read, self._file(track, who))
        words = set(query.lower().split())
        scored = []
        for row in rows:
            shared = words & set(row["text"].lower().split())
            if shared or query.lower() in row["text"].lower():
                score = (len(shared) + 1) / (len(words) + 1)
                scored.append(Memory(text=row["text"], score=min(score, 1.0), metadata=row["meta"]))
        scored.sort(key=lambda memory: -memory.score)
        return scored[:top_k]

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        if self._hang_store:  # a store that never returns: its caller gives up on it
            self._events().append("store-hangs")
            await anyio.sleep_forever()
        self.stored.append((session_id, list(messages)))
        # a user's message is that user's memory; the assistant's is the agent's
        sides = {"user": "user", "assistant": "agent"}
        for track in self._tracks:
            who = self.config.get(f"{track}_id")
            kept = [m for m in messages if sides.get(m["role"]) == track]
            if not who or not kept:
                continue
            path = self._file(track, str(who))
            async with self._lock:
                rows = await anyio.to_thread.run_sync(_read, path)
                for message in kept:
                    rows.append({"text": message["content"], "meta": {"id": f"m{len(rows)}"}})
                await anyio.to_thread.run_sync(_write, path, rows)

    async def feedback(self, signals: dict[str, Any]) -> None:
        self.feedback_seen.append(signals)


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text("utf-8")))
    except FileNotFoundError:
        return []


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(rows), "utf-8")
    temporary.replace(path)


def make_backend(ctx: BackendContext) -> FileBackend:
    """Raven's factory convention: a dual-track backend."""
    return FileBackend(ctx)


def make_user_only_backend(ctx: BackendContext) -> FileBackend:
    """A backend that keeps users' memories only."""
    return FileBackend(ctx, tracks=("user",))


def not_a_backend(ctx: BackendContext) -> object:
    """A factory returning something that is not a MemoryBackend."""
    return object()


def raising_factory(ctx: BackendContext) -> FileBackend:
    """A factory that fails: its backend is unavailable, the host boots without it."""
    raise RuntimeError("reference factory failure with secret tok-REF-2")
