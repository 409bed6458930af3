"""Source reads that never suspend run inline; the ones that do still overlap and keep scopes."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio

from mnemon import MemoryHost
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

_LEAK: contextvars.ContextVar[str] = contextvars.ContextVar("leak", default="unset")


async def _host_with(probes: dict[str, Probe], **settings: Any) -> MemoryHost:
    host = MemoryHost(**settings)
    for key, probe in probes.items():
        plugin, _ = fake_source(probe)
        await host.mount(plugin, instance_id=key)
    await host.mount(strategy_plugin(), instance_id="strategy")
    return host


async def test_a_read_that_suspends_inside_its_own_cancel_scope_beside_inline_reads() -> None:
    async def scoped(source: FakeSource, request: Any) -> Any:
        with anyio.fail_after(5):  # a scope the Source enters before its first suspension
            await anyio.to_thread.run_sync(lambda: None)
        return source.default_facts()

    probes = {"a": Probe(), "b": Probe(on_facts=scoped, on_project=None), "c": Probe()}
    async with await _host_with(probes) as host:
        for _ in range(3):
            async with host.turn(scope={"user_id": "u"}) as turn:
                kept = [item.source_key for item in turn.view.consistency]
                assert kept == ["source:a", "source:b", "source:c"]
                assert turn.view.diagnostics == ()


async def test_reads_after_a_suspended_one_still_run_at_the_same_time() -> None:
    # `a` waits for `c`, which is read after it: reads one after another would time `a` out
    released = anyio.Event()

    async def waits(source: FakeSource, request: Any) -> Any:
        await released.wait()
        return source.default_facts()

    async def releases(source: FakeSource, request: Any) -> Any:
        released.set()
        return source.default_facts()

    probes = {"a": Probe(on_facts=waits), "b": Probe(), "c": Probe(on_facts=releases)}
    host = await _host_with(probes, source_timeout=2.0)
    async with host, host.turn(scope={"user_id": "u"}) as turn:
        assert [item.source_key for item in turn.view.consistency] == [
            "source:a",
            "source:b",
            "source:c",
        ]
        assert turn.view.diagnostics == ()


async def test_a_context_variable_a_source_sets_stays_inside_its_own_read() -> None:
    seen: list[str] = []

    async def sets(source: FakeSource, request: Any) -> Any:
        _LEAK.set("from a")
        return source.default_facts()

    async def reads(source: FakeSource, request: Any) -> Any:
        seen.append(_LEAK.get())
        return source.default_facts()

    async def projects(source: FakeSource, request: Any) -> Any:
        seen.append(_LEAK.get())
        return source.default_contribution(request)

    probes = {"a": Probe(on_facts=sets, on_project=projects), "b": Probe(on_facts=reads)}
    host = await _host_with(probes)
    async with host, host.turn(scope={"user_id": "u"}) as turn:
        assert len(turn.view.consistency) == 2
    assert seen == ["unset", "unset"]
    assert _LEAK.get() == "unset"


async def test_a_read_that_never_returns_is_dropped_at_the_deadline_and_the_rest_kept() -> None:
    async def hangs(source: FakeSource, request: Any) -> Any:
        await anyio.sleep_forever()

    probes = {"a": Probe(), "b": Probe(on_facts=hangs), "c": Probe()}
    host = await _host_with(probes, source_timeout=0.05)
    async with host, host.turn(scope={"user_id": "u"}) as turn:
        assert [item.source_key for item in turn.view.consistency] == ["source:a", "source:c"]
        assert [item.code for item in turn.view.diagnostics] == ["source-facts-timeout"]
