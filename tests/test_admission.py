"""Admission: a host composes at most `max_concurrent_compositions` Views at once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mnemon import CompositionUnavailable, DefinitionError, MemoryHost
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin


async def test_a_turn_beyond_the_limit_is_refused_at_once_and_the_others_complete() -> None:
    entered = 0
    both_in = anyio.Event()
    release = anyio.Event()

    async def held(source: FakeSource, request: Any) -> Any:
        nonlocal entered
        entered += 1
        if entered == 2:
            both_in.set()
        await release.wait()
        return source.default_facts()

    probe = Probe(on_facts=held)
    plugin, _ = fake_source(probe)
    composed: list[str] = []
    async with MemoryHost(max_concurrent_compositions=2, source_timeout=5.0) as host:
        await host.mount(plugin, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")

        async def one_turn() -> None:
            async with host.turn(scope={"user_id": "u"}) as turn:
                composed.append(turn.view.id)

        async with anyio.create_task_group() as group:
            group.start_soon(one_turn)
            group.start_soon(one_turn)
            await both_in.wait()
            with pytest.raises(CompositionUnavailable, match="max_concurrent_compositions"):
                async with host.turn(scope={"user_id": "u"}):
                    pass
            assert probe.facts_calls == 2  # the refused turn asked no Source
            release.set()
        assert len(composed) == 2
        # the slots are free again once those turns were composed
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert turn.view.diagnostics == ()


async def test_a_cancelled_composition_gives_its_place_back() -> None:
    async def hangs(source: FakeSource, request: Any) -> Any:
        await anyio.sleep_forever()

    probe = Probe(on_facts=hangs)
    plugin, _ = fake_source(probe)
    async with MemoryHost(max_concurrent_compositions=1, source_timeout=5.0) as host:
        await host.mount(plugin, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        with anyio.move_on_after(0.05):
            async with host.turn(scope={"user_id": "u"}):
                pass
        probe.on_facts = None
        async with host.turn(scope={"user_id": "u"}) as turn:
            assert [item.source_key for item in turn.view.consistency] == ["source:a"]


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "8"], ids=repr)
async def test_a_bad_limit_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises(DefinitionError, match="max_concurrent_compositions"):
        MemoryHost(max_concurrent_compositions=value)
