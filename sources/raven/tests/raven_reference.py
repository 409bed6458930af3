"""Reference Raven backends for the tests: written as a Raven author would, file-backed.

`make_backend` is dual-track (memories by user and by agent); `make_user_only_backend` keeps
only users' memories and returns nothing on the agent track. `EVENTS` records lifecycle calls
per workspace, so tests can count starts and stops.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from mnemon_source_raven import BackendContext, Memory

EVENTS: dict[str, list[str]] = defaultdict(list)
INSTANCES: list[FileBackend] = []


class FileBackend:
    """Memories in one JSON file per track id; recall scores by shared words."""

    def __init__(self, ctx: BackendContext, tracks: tuple[str, ...] = ("user", "agent")) -> None:
        self._folder = ctx.services.workspace
        self._tracks = tracks
        self._fail_start = bool(ctx.config.get("fail_start", False))
        self._fail_recall = bool(ctx.config.get("fail_recall", False))
        self._lock = anyio.Lock()
        self.started = False
        self.feedback_seen: list[Mapping[str, Any]] = []
        self.stored: list[tuple[str, list[Mapping[str, Any]], dict[str, Any]]] = []
        self.recalls: list[dict[str, Any]] = []
        INSTANCES.append(self)

    def _events(self) -> list[str]:
        return EVENTS[str(self._folder)]

    def _file(self, track: str, who: str) -> Path:
        return self._folder / f"{track}-{json.dumps(who).encode().hex()[:200]}.json"

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
        if (user_id is None) == (agent_id is None):
            raise ValueError("exactly one of user_id and agent_id")
        self.recalls.append({"user_id": user_id, "agent_id": agent_id, "top_k": top_k})
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

    async def store(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        meta = dict(metadata or {})
        self.stored.append((session_id, list(messages), meta))
        for track in self._tracks:
            who = meta.get(f"{track}_id")
            if not who:
                continue
            path = self._file(track, str(who))
            async with self._lock:
                rows = await anyio.to_thread.run_sync(_read, path)
                for message in messages:
                    if message["role"] == "user":
                        rows.append({"text": message["content"], "meta": {"id": f"m{len(rows)}"}})
                await anyio.to_thread.run_sync(_write, path, rows)

    async def feedback(self, signals: Sequence[Mapping[str, Any]]) -> None:
        self.feedback_seen.extend(signals)


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
