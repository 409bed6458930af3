"""The reference backends pass Raven's MemoryBackend contract; a broken one fails it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_raven import BackendContext, BackendServices, Memory
from mnemon_source_raven.testing import MemoryBackendContract
from raven_reference import FileBackend, make_backend, make_user_only_backend


def context(workspace: Path, **ids: str) -> BackendContext:
    return BackendContext(
        config=ids, services=BackendServices(workspace=workspace), logger=logging.getLogger("t")
    )


class TestDualTrackUser(MemoryBackendContract):
    def make_backend(self, ctx: BackendContext) -> Any:
        return make_backend(ctx)


class TestDualTrackAgent(MemoryBackendContract):
    track = "agent"

    def make_backend(self, ctx: BackendContext) -> Any:
        return make_backend(ctx)


class TestUserOnly(MemoryBackendContract):
    def make_backend(self, ctx: BackendContext) -> Any:
        return make_user_only_backend(ctx)


async def test_a_user_only_backend_returns_nothing_on_the_agent_track(tmp_path: Path) -> None:
    backend = make_user_only_backend(context(tmp_path, user_id="ada", agent_id="planner"))
    await backend.start()
    messages = [{"role": "user", "content": "tea at noon"}, {"role": "assistant", "content": "tea"}]
    await backend.store("s", messages)
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


class _NanScore(FileBackend):
    async def recall(self, query: str, **ids: Any) -> list[Memory]:
        return [Memory(text="x", score=float("nan"))]


class _Strict(FileBackend):
    async def recall(self, query: str, **ids: Any) -> list[Memory]:
        if len(ids) != 1:
            raise ValueError("exactly one of user_id and agent_id")
        return []


@pytest.mark.parametrize(
    ("backend_type", "check", "rule"),
    [
        (_Greedy, "test_recall_keeps_to_top_k", "at most 3"),
        (_Tuple, "test_recall_returns_a_list_of_typed_memories", "must return a list"),
        (_NoFeedback, "test_is_a_memory_backend", "must implement"),
        (_NanScore, "test_recall_returns_a_list_of_typed_memories", "must be finite"),
        (_Strict, "test_recall_with_neither_or_both_ids_returns_nothing", "must return \\[\\]"),
    ],
    ids=["ignores-top-k", "returns-a-tuple", "lacks-methods", "nan-score", "raises-on-no-id"],
)
async def test_the_contract_fails_a_backend_breaking_a_rule(
    tmp_path: Path, backend_type: type, check: str, rule: str
) -> None:
    class Subject(MemoryBackendContract):
        def make_backend(self, ctx: BackendContext) -> Any:
            if backend_type is _NoFeedback:
                return _NoFeedback()
            return backend_type(ctx)

    with pytest.raises(AssertionError, match=rule):
        await getattr(Subject(), check)(tmp_path)


def test_the_public_names_are_exactly_these() -> None:
    import mnemon_source_raven

    assert mnemon_source_raven.__all__ == [
        "RAVEN_SOURCE",
        "BackendContext",
        "BackendFactory",
        "BackendImportFailed",
        "BackendServices",
        "Memory",
        "MemoryBackend",
        "RavenSource",
        "SubstrateMissingBackend",
        "apply",
        "install_raven_shim",
        "memory_plugin",
        "raven_exception_name",
        "register_memory_backend",
        "resolve_backend_factory",
        "resolve_memory_backend",
        "source_error",
    ]
