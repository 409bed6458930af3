"""MemoryCompositionRunner: the narrow surface plugin authors test through."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest

from mnemon import CompositionUnavailable, Fragment, ReadGrant
from mnemon.sdk import (
    FactsRequest,
    PluginContext,
    ProjectionRequest,
    SourceFacts,
    ViewContribution,
    ViewSpec,
    define_memory_source,
    define_memory_strategy,
    install_memory,
)
from mnemon_testing import MemoryCompositionRunner, RunnerTurn

MANIFEST = {
    "type_id": "tiny",
    "package_name": "mnemon-test-tiny",
    "role": "notes",
    "capabilities": ["project"],
    "consistency": "exact-snapshot",
}


class Tiny:
    def __init__(self, key: str, started: anyio.Event | None = None) -> None:
        self.key = key
        self.started = started

    async def facts(self, request: FactsRequest) -> SourceFacts:
        if self.started is not None:
            self.started.set()
            await anyio.sleep_forever()
        return SourceFacts(
            instance_key=self.key,
            type_id="tiny",
            role="notes",
            availability="ready",
            revision="1",
            capabilities=("project",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        return ViewContribution(
            fragments=(Fragment(source_key=self.key, mode=request.mode, text="tiny memory"),),
            grant=ReadGrant(source_key=self.key, value=None),
        )


def compose(request: Any, sources: Any, contributions: Any) -> ViewSpec:
    return ViewSpec(
        strategy_type_id="all",
        sources=tuple(
            {"source_key": s.key, "projection": {"mode": "eager", "max_characters": 100}}
            for s in sources
        ),
        explanation="everything",
    )


STRATEGY = define_memory_strategy(
    {
        "type_id": "all",
        "package_name": "mnemon-test-tiny",
        "supported_source_roles": ["*"],
        "max_sources": 4,
        "max_routes": 4,
        "max_actions": 4,
    },
    compose,
)


class TinyPlugin:
    def __init__(self, started: anyio.Event | None = None) -> None:
        self.started = started

    def apply(self, ctx: PluginContext) -> None:
        source = define_memory_source(MANIFEST, lambda init: Tiny(init.instance_key, self.started))
        install_memory(ctx, sources=[source], strategies=[STRATEGY])


async def test_the_fixture_mounts_and_composes(memory_runner: MemoryCompositionRunner) -> None:
    unmount = await memory_runner.mount(TinyPlugin(), instance_id="tiny")
    turn = await memory_runner.begin_turn({"scope": {"user_id": "u1"}})
    assert [f.text for f in turn.view.fragments] == ["tiny memory"]
    assert turn.view.request.scope.user_id == "u1"
    await turn.release()
    await unmount()
    await unmount()
    assert memory_runner.inspect()["state"] == "incomplete"


async def test_runner_turns_expose_only_their_narrow_surface() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(TinyPlugin(), instance_id="tiny")
        turn = await runner.begin_turn()
        public = {name for name in dir(turn) if not name.startswith("_")}
        assert public == {"view", "execute_route", "execute_action", "release", "aclose"}
        assert isinstance(turn, RunnerTurn)
        await turn.release()
        await turn.release()
        assert runner.inspect()["serving"]["leases"] == 0
    runner_public = {name for name in dir(runner) if not name.startswith("_")}
    assert runner_public == {
        "mount",
        "begin_turn",
        "inspect",
        "management_client",
        "maintain",
        "dispose",
        "aclose",
    }


async def test_runners_and_their_turns_follow_anyios_resource_conventions() -> None:
    async with contextlib.AsyncExitStack() as stack:
        runner = await stack.enter_async_context(MemoryCompositionRunner())
        await runner.mount(TinyPlugin(), instance_id="tiny")
        async with await runner.begin_turn() as turn:
            assert turn.view.id.startswith("view:")
            assert runner.inspect()["serving"]["leases"] == 1
        assert runner.inspect()["serving"]["leases"] == 0
        with pytest.raises(RuntimeError, match="turn has ended"):
            async with turn:
                pass
        async with contextlib.aclosing(await runner.begin_turn()):
            assert runner.inspect()["serving"]["leases"] == 1
        assert runner.inspect()["serving"]["leases"] == 0
    assert runner.inspect()["state"] == "disposed"
    with pytest.raises(RuntimeError, match="closed and cannot be entered again"):
        async with runner:
            pass
    async with contextlib.aclosing(MemoryCompositionRunner()) as other:
        await other.mount(TinyPlugin(), instance_id="tiny")
    with pytest.raises(RuntimeError, match="closed"):
        await other.__aenter__()


async def test_dispose_is_idempotent_and_rejects_a_pending_composition() -> None:
    started = anyio.Event()
    runner = MemoryCompositionRunner(source_timeout=30)
    await runner.mount(TinyPlugin(started), instance_id="tiny")
    failures: list[BaseException] = []

    async def begin() -> None:
        try:
            await runner.begin_turn()
        except CompositionUnavailable as exc:
            failures.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(begin)
            await started.wait()
            await runner.dispose()
    await runner.dispose()
    assert len(failures) == 1
    with pytest.raises(CompositionUnavailable):
        await runner.begin_turn()
    assert runner.inspect()["state"] == "disposed"
