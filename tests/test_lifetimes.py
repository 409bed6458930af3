"""Lifetimes: in-flight reads, writes and authorizations hold their own leases."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest

from mnemon import (
    ActionError,
    ActionOffer,
    CompositionUnavailable,
    Evidence,
    MemoryHost,
    MutationReceipt,
    RouteError,
)
from mnemon.sdk import MutationRequest, QueryRequest, create_mutation_receipt
from mnemon_testing import MemoryCompositionRunner
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin


async def test_an_in_flight_query_outlives_release_unmount_and_dispose() -> None:
    started, proceed = anyio.Event(), anyio.Event()

    async def slow(source: FakeSource, request: QueryRequest) -> Evidence:
        started.set()
        await proceed.wait()
        return Evidence(view_id=request.view.id, route_id=request.route.id, source_key=source.key)

    source, probe = fake_source(Probe(on_query=slow))
    host = MemoryHost()
    await host.mount(strategy_plugin(), instance_id="strategy")
    unmount = await host.mount(source, instance_id="a")
    turn = await host.begin_turn()
    results: list[Evidence] = []

    async def read() -> None:
        results.append(await turn.execute_route("source:a/lookup", {}))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(read)
            await started.wait()
            await turn.release()
            await unmount()
            await host.dispose()
            assert probe.disposed == []
            assert host.inspect()["draining"][0]["leases"] == 1
            proceed.set()
    assert len(results) == 1
    assert results[0].view_id == turn.view.id
    assert probe.disposed == ["source:a"]


async def test_an_in_flight_authorize_keeps_the_generation_and_the_write_succeeds() -> None:
    asked, decide = anyio.Event(), anyio.Event()

    async def authorize(offer: ActionOffer) -> bool:
        asked.set()
        await decide.wait()
        return True

    async def commit(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        assert probe.disposed == []
        return create_mutation_receipt(
            request, completion="committed", committed_at="2026-11-30T12:00:00+00:00"
        )

    source, probe = fake_source(Probe(on_mutate=commit))
    runner = MemoryCompositionRunner()
    await runner.mount(strategy_plugin(), instance_id="strategy")
    await runner.mount(source, instance_id="a")
    turn = await runner.begin_turn()
    receipts: list[MutationReceipt] = []

    async def write() -> None:
        receipts.append(await turn.execute_action("source:a/store", {}, authorize))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await asked.wait()
            await turn.release()
            await runner.dispose()
            await runner.dispose()
            decide.set()
    assert receipts[0].completion == "committed"
    assert probe.disposed == ["source:a"]
    with pytest.raises(CompositionUnavailable):
        await runner.begin_turn()


async def test_executions_after_release_are_refused_while_others_finish() -> None:
    source, probe = fake_source()
    async with MemoryCompositionRunner() as runner:
        await runner.mount(source, instance_id="a")
        await runner.mount(strategy_plugin(), instance_id="strategy")
        turn = await runner.begin_turn()
        await turn.release()
        with pytest.raises(RouteError, match="released"):
            await turn.execute_route("source:a/lookup", {})
        with pytest.raises(ActionError, match="released"):
            await turn.execute_action("source:a/store", {}, lambda offer: True)
    assert probe.queries == []
    assert probe.mutations == []


async def test_the_evidence_budget_is_captured_at_begin_turn() -> None:
    texts = ["a" * 30, "b" * 30, "c" * 30]

    async def many(source: FakeSource, request: QueryRequest) -> Any:
        return {
            "view_id": request.view.id,
            "route_id": request.route.id,
            "source_key": source.key,
            "items": [{"id": str(i), "text": t} for i, t in enumerate(texts)],
        }

    source, _ = fake_source(Probe(on_query=many))
    async with MemoryCompositionRunner() as runner:
        await runner.mount(source, instance_id="a")
        await runner.mount(strategy_plugin(), instance_id="strategy")
        budget = {"max_evidence_characters": 70, "max_evidence_results": 5}
        turn = await runner.begin_turn({"budget": budget})
        budget["max_evidence_characters"] = 1_000
        evidence = await turn.execute_route("source:a/lookup", {})
        await turn.release()
    assert len(evidence.items) == 2
    assert evidence.truncated


async def test_the_host_and_its_turns_follow_anyios_resource_conventions() -> None:
    source, probe = fake_source()
    async with contextlib.aclosing(MemoryHost()) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with contextlib.AsyncExitStack() as stack:
            turn = await stack.enter_async_context(await host.begin_turn())
            assert not turn.released
        assert turn.released
        with pytest.raises(RuntimeError, match="turn has ended"):
            await turn.__aenter__()
        async with contextlib.aclosing(await host.begin_turn()) as closing:
            assert host.inspect()["serving"]["leases"] == 1
        assert closing.released
        assert not host.closed
    assert host.closed
    assert probe.disposed == ["source:a", "source:a"]  # the mount-time trial, then serving
    with pytest.raises(RuntimeError, match="MemoryHost is closed"):
        async with host:
            pass
    await host.aclose()  # idempotent
