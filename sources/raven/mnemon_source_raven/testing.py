"""The `MemoryBackend` contract: the checks Raven runs on a backend, for backend authors.

Subclass `MemoryBackendContract` in a test module named like `Test...` and say how to make
your backend from the context Raven gives a factory (async tests need an anyio runner, such
as anyio's pytest plugin)::

    class TestMyBackend(MemoryBackendContract):
        def make_backend(self, ctx):
            return make_backend(ctx)

The context carries the identity the backend serves (`ctx.config["user_id"]`, or `agent_id`
on the agent track), a fresh workspace and a logger; `backend_config` adds keys of your own.
It lives beside the contract it checks, not in `mnemon_testing`, which depends only on the
core. Importing it does not import pytest. Each check fails with a message naming the rule the
backend broke.
"""

from __future__ import annotations

import inspect
import logging
import math
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ._contract import BackendContext, BackendServices, MemoryBackend

__all__ = ["MemoryBackendContract"]

CONTRACT_ID = "contract-identity"


class MemoryBackendContract:
    """Raven's contract checks for one backend; subclass it and implement `make_backend`."""

    #: the id recall is asked for; "user" or "agent"
    track: str = "user"
    #: more `ctx.config` keys for your backend (the identity is added to them)
    backend_config: ClassVar[Mapping[str, Any]] = {}

    def make_backend(self, ctx: BackendContext) -> Any:
        """A new, unstarted backend made from `ctx` (may be awaitable): your factory."""
        raise NotImplementedError

    def _context(self, workspace: Path, who: str) -> BackendContext:
        ids = {f"{self.track}_id": who}
        return BackendContext(
            config={**self.backend_config, **ids},
            services=BackendServices(workspace=workspace, **ids),
            logger=logging.getLogger("mnemon.sources.raven.contract"),
        )

    async def _made(self, workspace: Path, who: str = CONTRACT_ID) -> MemoryBackend:
        made = self.make_backend(self._context(workspace, who))
        backend = await made if inspect.isawaitable(made) else made
        assert isinstance(backend, MemoryBackend), (
            "a backend must implement recall, store, feedback, start and stop"
        )
        return backend

    async def _started(self, workspace: Path, who: str = CONTRACT_ID) -> MemoryBackend:
        backend = await self._made(workspace, who)
        await backend.start()
        return backend

    async def _recall(self, backend: MemoryBackend, query: str, who: str, top_k: int) -> Any:
        ids = {"user_id": who} if self.track == "user" else {"agent_id": who}
        return await backend.recall(query, top_k=top_k, **ids)

    async def test_is_a_memory_backend(self, tmp_path: Path) -> None:
        """The backend passes `isinstance(backend, MemoryBackend)`."""
        await self._made(tmp_path)

    async def test_recall_returns_a_list_of_typed_memories(self, tmp_path: Path) -> None:
        """Recall returns a list of memories: str text, finite number score, mapping metadata."""
        backend = await self._started(tmp_path)
        try:
            await backend.store(
                "contract-session",
                [{"role": "user", "content": "Ada drinks green tea every morning."}],
            )
            found = await self._recall(backend, "green tea", CONTRACT_ID, 5)
            assert isinstance(found, list), "recall() must return a list"
            for memory in found:
                assert isinstance(getattr(memory, "text", None), str), "Memory.text must be a str"
                score = getattr(memory, "score", None)
                assert isinstance(score, int | float), "Memory.score must be a number"
                assert not isinstance(score, bool), "Memory.score must be a number, not a bool"
                assert math.isfinite(score), "Memory.score must be finite"
                assert isinstance(getattr(memory, "metadata", None), Mapping), (
                    "Memory.metadata must be a dict"
                )
        finally:
            await backend.stop()

    async def test_store_then_recall_does_not_raise(self, tmp_path: Path) -> None:
        """`store(session_id, messages)`, then a recall at once, never raises."""
        backend = await self._started(tmp_path)
        try:
            marker = f"contract-{uuid.uuid4().hex}"
            await backend.store(
                "contract-session",
                [
                    {"role": "user", "content": f"remember {marker}"},
                    {"role": "assistant", "content": "noted"},
                ],
            )
            await self._recall(backend, marker, CONTRACT_ID, 5)
        finally:
            await backend.stop()

    async def test_feedback_with_any_signals_does_not_raise(self, tmp_path: Path) -> None:
        """Feedback takes one dict: unknown, empty, and mnemon's `memory_usage` signals."""
        backend = await self._started(tmp_path)
        try:
            await backend.feedback({"type": "contract-unknown-signal", "value": 1})
            await backend.feedback({})
            # what the raven-backend Source sends: ids recall returned, and whose they are
            await backend.feedback(
                {
                    "type": "memory_usage",
                    "items": [{"memory_id": "contract-unknown-id", "helpful": True}],
                    f"{self.track}_id": CONTRACT_ID,
                }
            )
        finally:
            await backend.stop()

    async def test_recall_keeps_to_top_k(self, tmp_path: Path) -> None:
        """`recall(top_k=3)` returns at most 3 memories."""
        backend = await self._started(tmp_path)
        try:
            for index in range(6):
                await backend.store(
                    f"contract-session-{index}",
                    [{"role": "user", "content": f"contract topic item {index}"}],
                )
            found = await self._recall(backend, "contract topic item", CONTRACT_ID, 3)
            assert len(found) <= 3, f"recall(top_k=3) must return at most 3, not {len(found)}"
        finally:
            await backend.stop()

    async def test_recall_for_an_unknown_id_returns_a_list(self, tmp_path: Path) -> None:
        """Recall for someone never seen returns a list (usually empty), never raises."""
        backend = await self._started(tmp_path)
        try:
            found = await self._recall(backend, "anything", f"nobody-{uuid.uuid4().hex}", 5)
            assert isinstance(found, list), "recall() for an unknown id must return a list"
        finally:
            await backend.stop()

    async def test_recall_with_neither_or_both_ids_returns_nothing(self, tmp_path: Path) -> None:
        """Recall with neither `user_id` nor `agent_id`, or with both, returns `[]`."""
        backend = await self._started(tmp_path)
        try:
            await backend.store("contract-session", [{"role": "user", "content": "tea"}])
            for ids, which in (
                ({}, "without user_id or agent_id"),
                ({"user_id": CONTRACT_ID, "agent_id": CONTRACT_ID}, "with both"),
            ):
                try:
                    found = await backend.recall("tea", top_k=3, **ids)
                except Exception as exc:
                    raise AssertionError(
                        f"recall() {which} must return [], not raise {type(exc).__name__}"
                    ) from exc
                assert found == [], f"recall() {which} must return []"
        finally:
            await backend.stop()

    async def test_start_stop_twice_and_stop_without_start(self, tmp_path: Path) -> None:
        """start/stop/start/stop works, and stop without start is harmless."""
        backend = await self._made(tmp_path)
        await backend.start()
        await backend.stop()
        await backend.start()
        await backend.stop()
        await backend.stop()
        unstarted = await self._made(tmp_path)
        await unstarted.stop()
