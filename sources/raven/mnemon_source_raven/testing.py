"""The `MemoryBackend` contract: the checks Raven runs on a backend, for backend authors.

Subclass `MemoryBackendContract` in a test module named like `Test...` and say how to make
your backend (async tests need an anyio runner, such as anyio's pytest plugin)::

    class TestMyBackend(MemoryBackendContract):
        def make_backend(self, workspace):
            return make_backend(BackendContext(config={}, services=BackendServices(workspace),
                                               logger=logging.getLogger("test")))

It lives beside the contract it checks, not in `mnemon_testing`, which depends only on the
core: the checks use this package's own `Memory` and `MemoryBackend`. Importing it does not
import pytest. Each check fails with a message naming the rule the backend broke.
"""

from __future__ import annotations

import inspect
import uuid
from pathlib import Path
from typing import Any

from ._contract import Memory, MemoryBackend

__all__ = ["MemoryBackendContract"]


class MemoryBackendContract:
    """Raven's contract checks for one backend; subclass it and implement `make_backend`."""

    #: the id recall is asked for; "user" or "agent"
    track: str = "user"

    def make_backend(self, workspace: Path) -> Any:
        """A new, unstarted backend keeping its data under `workspace` (may be awaitable)."""
        raise NotImplementedError

    async def _made(self, workspace: Path) -> MemoryBackend:
        made = self.make_backend(workspace)
        backend = await made if inspect.isawaitable(made) else made
        assert isinstance(backend, MemoryBackend), (
            "a backend must implement recall, store, feedback, start and stop"
        )
        return backend

    async def _started(self, workspace: Path) -> MemoryBackend:
        backend = await self._made(workspace)
        await backend.start()
        return backend

    async def _recall(self, backend: MemoryBackend, query: str, who: str, top_k: int) -> Any:
        ids = {"user_id": who} if self.track == "user" else {"agent_id": who}
        return await backend.recall(query, top_k=top_k, **ids)

    def _metadata(self, who: str) -> dict[str, Any]:
        return {f"{self.track}_id": who}

    async def test_is_a_memory_backend(self, tmp_path: Path) -> None:
        """The backend passes `isinstance(backend, MemoryBackend)`."""
        await self._made(tmp_path)

    async def test_recall_returns_a_list_of_typed_memories(self, tmp_path: Path) -> None:
        """Recall returns a list of `Memory` with str text, float score and dict metadata."""
        backend = await self._started(tmp_path)
        try:
            await backend.store(
                "contract-session",
                [{"role": "user", "content": "Ada drinks green tea every morning."}],
                metadata=self._metadata("contract-user"),
            )
            found = await self._recall(backend, "green tea", "contract-user", 5)
            assert isinstance(found, list), "recall() must return a list"
            for memory in found:
                assert isinstance(memory, Memory), "recall() must return Memory objects"
                assert isinstance(memory.text, str), "Memory.text must be a str"
                assert isinstance(memory.score, int | float), "Memory.score must be a number"
                assert isinstance(memory.metadata, dict), "Memory.metadata must be a dict"
        finally:
            await backend.stop()

    async def test_store_then_recall_does_not_raise(self, tmp_path: Path) -> None:
        """Storing and recalling right after never raises (indexing may still be pending)."""
        backend = await self._started(tmp_path)
        try:
            marker = f"contract-{uuid.uuid4().hex}"
            await backend.store(
                "contract-session",
                [
                    {"role": "user", "content": f"remember {marker}"},
                    {"role": "assistant", "content": "noted"},
                ],
                metadata=self._metadata("contract-user"),
            )
            await self._recall(backend, marker, "contract-user", 5)
        finally:
            await backend.stop()

    async def test_store_with_app_project_and_final_does_not_raise(self, tmp_path: Path) -> None:
        """Store accepts `app_id`, `project_id` and `is_final` metadata."""
        backend = await self._started(tmp_path)
        try:
            await backend.store(
                "contract-session",
                [{"role": "user", "content": "the last words of a session"}],
                metadata={
                    **self._metadata("contract-user"),
                    "app_id": "contract-app",
                    "project_id": "contract-project",
                    "is_final": True,
                },
            )
        finally:
            await backend.stop()

    async def test_feedback_with_any_signals_does_not_raise(self, tmp_path: Path) -> None:
        """Feedback takes unknown, empty, `skill_usage` and mnemon's `memory_usage` signals."""
        backend = await self._started(tmp_path)
        try:
            await backend.feedback([{"type": "contract-unknown-signal", "value": 1}])
            await backend.feedback([])
            await backend.feedback([{"type": "skill_usage", "skill": "search", "helpful": True}])
            # what the raven-backend Source sends: an id recall returned, and whose it is
            usage = {"type": "memory_usage", "memory_id": "contract-unknown-id", "helpful": True}
            await backend.feedback([{**usage, **self._metadata("contract-user")}])
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
                    metadata=self._metadata("contract-user"),
                )
            found = await self._recall(backend, "contract topic item", "contract-user", 3)
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
