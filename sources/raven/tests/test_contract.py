"""The reference backends pass Raven's MemoryBackend contract; a broken one fails it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_raven import BackendContext, BackendServices, Memory
from mnemon_source_raven.testing import MemoryBackendContract
from raven_reference import FileBackend, make_backend, make_user_only_backend


def context(workspace: Path) -> BackendContext:
    return BackendContext(
        config={}, services=BackendServices(workspace=workspace), logger=logging.getLogger("t")
    )


class TestDualTrackUser(MemoryBackendContract):
    def make_backend(self, workspace: Path) -> Any:
        return make_backend(context(workspace))


class TestDualTrackAgent(MemoryBackendContract):
    track = "agent"

    def make_backend(self, workspace: Path) -> Any:
        return make_backend(context(workspace))


class TestUserOnly(MemoryBackendContract):
    def make_backend(self, workspace: Path) -> Any:
        return make_user_only_backend(context(workspace))


async def test_a_user_only_backend_returns_nothing_on_the_agent_track(tmp_path: Path) -> None:
    backend = make_user_only_backend(context(tmp_path))
    await backend.start()
    metadata = {"user_id": "ada", "agent_id": "planner"}
    await backend.store("s", [{"role": "user", "content": "tea at noon"}], metadata=metadata)
    assert [m.text for m in await backend.recall("tea", user_id="ada", top_k=3)] == ["tea at noon"]
    assert await backend.recall("tea", agent_id="planner", top_k=3) == []


class _Greedy(FileBackend):
    async def recall(self, query: str, **ids: Any) -> list[Memory]:
        return [Memory(text="x")] * 10  # ignores top_k


class _Tuple(FileBackend):
    async def recall(self, query: str, **ids: Any) -> Any:
        return (Memory(text="x"),)


class _NoFeedback:
    async def recall(self, query: str, **ids: Any) -> list[Memory]:
        return []


@pytest.mark.parametrize(
    ("backend_type", "check", "rule"),
    [
        (_Greedy, "test_recall_keeps_to_top_k", "at most 3"),
        (_Tuple, "test_recall_returns_a_list_of_typed_memories", "must return a list"),
        (_NoFeedback, "test_is_a_memory_backend", "must implement"),
    ],
    ids=["ignores-top-k", "returns-a-tuple", "lacks-methods"],
)
async def test_the_contract_fails_a_backend_breaking_a_rule(
    tmp_path: Path, backend_type: type, check: str, rule: str
) -> None:
    class Subject(MemoryBackendContract):
        def make_backend(self, workspace: Path) -> Any:
            if backend_type is _NoFeedback:
                return _NoFeedback()
            return backend_type(context(workspace))

    with pytest.raises(AssertionError, match=rule):
        await getattr(Subject(), check)(tmp_path)
