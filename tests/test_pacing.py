"""Composition pacing: while the process is CPU-bound, admitted turns compose a few dozen at once.

The process's CPU share is what decides, so these tests set it: `CpuGauge.busy` is replaced
by a switch the test flips. Everything else runs as a host runs it.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from mnemon import CompositionUnavailable, MemoryHost
from mnemon._cpu import CpuGauge
from mnemon._engine.pacing import COMPOSING_AT_ONCE, Pacer
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

EXTRA = 6  # turns beyond the places


class Load:
    """The CPU share every gauge reports, set by the test."""

    busy = True


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> type[Load]:
    Load.busy = True
    monkeypatch.setattr(CpuGauge, "busy", lambda self: Load.busy)
    return Load


class Held:
    """A Source whose `facts()` waits until released, noting which turns are inside."""

    def __init__(self) -> None:
        self.inside: list[str] = []
        self.entered: list[str] = []
        self.release = anyio.Event()
        self.probe = Probe(on_facts=self._facts)
        self.wanted = 0  # how many inside at once sets `reached`
        self.reached = anyio.Event()

    async def _facts(self, source: FakeSource, request: Any) -> Any:
        user = request.scope.user_id
        self.entered.append(user)
        self.inside.append(user)
        if len(self.inside) == self.wanted:
            self.reached.set()
        try:
            await self.release.wait()
        finally:
            self.inside.remove(user)
        return source.default_facts()

    def hold_first(self, user: str) -> anyio.Event:
        """Hold `user`'s turn until the returned event is set, then let it end on its own."""
        first = anyio.Event()

        async def facts(source: FakeSource, request: Any) -> Any:
            if request.scope.user_id == user:
                await first.wait()
                return source.default_facts()
            return await self._facts(source, request)

        self.probe.on_facts = facts
        return first

    async def settled(self) -> None:
        # every turn that can get in has reached the Source once the loop has gone round a few
        # times with nothing else to do
        for _ in range(50):
            await anyio.lowlevel.checkpoint()


async def _host(held: Held) -> MemoryHost:
    host = MemoryHost(source_timeout=10.0)
    plugin, _ = fake_source(held.probe)
    await host.mount(plugin, instance_id="a")
    await host.mount(strategy_plugin(), instance_id="strategy")
    return host


async def _turn(host: MemoryHost, user: str, views: list[str]) -> None:
    async with host.turn(scope={"user_id": user}) as turn:
        views.append(user)
        assert [item.source_key for item in turn.view.consistency] == ["source:a"]


def _users(count: int) -> list[str]:
    return [f"u{number:03d}" for number in range(count)]


async def _start(
    group: anyio.abc.TaskGroup, host: MemoryHost, users: list[str], views: list[str], held: Held
) -> None:
    """Start one turn per user, in order; return once every turn that can has reached `held`."""
    for user in users:
        group.start_soon(_turn, host, user, views)
    await held.settled()


async def test_a_busy_process_composes_a_few_dozen_at_once_and_the_rest_in_arrival_order(
    load: type[Load],
) -> None:
    held = Held()
    users = _users(COMPOSING_AT_ONCE + EXTRA)
    views: list[str] = []
    async with await _host(held) as host, anyio.create_task_group() as group:
        await _start(group, host, users, views, held)
        assert held.entered == users[:COMPOSING_AT_ONCE]
        held.release.set()
    assert sorted(views) == users  # every held-back turn was composed in the end
    assert held.entered == users  # and they came in the order they arrived


async def test_an_idle_process_composes_every_admitted_turn_at_once(load: type[Load]) -> None:
    load.busy = False  # turns waiting on remote Sources leave the core idle: nothing waits
    held = Held()
    users = _users(COMPOSING_AT_ONCE + EXTRA)
    views: list[str] = []
    async with await _host(held) as host, anyio.create_task_group() as group:
        await _start(group, host, users, views, held)
        assert sorted(held.inside) == users
        held.release.set()
    assert sorted(views) == users


async def test_held_back_turns_all_start_when_a_place_frees_and_the_core_is_idle(
    load: type[Load],
) -> None:
    held = Held()
    users = _users(COMPOSING_AT_ONCE + EXTRA)
    first = held.hold_first(users[0])  # it ends alone, after the core went idle
    views: list[str] = []
    async with await _host(held) as host, anyio.create_task_group() as group:
        await _start(group, host, users, views, held)
        assert len(held.inside) == COMPOSING_AT_ONCE - 1
        load.busy = False
        first.set()
        await held.settled()
        assert views == users[:1]
        assert sorted(held.inside) == users[1:]  # one place freed, every waiting turn let in
        held.release.set()
    assert sorted(views) == users


async def test_a_moment_of_idleness_lets_in_only_as_many_again_as_are_running(
    load: type[Load], monkeypatch: pytest.MonkeyPatch
) -> None:
    # one look finds the core idle (another process had it, say): the burst grows by a step,
    # not all at once; the next look finds it busy again
    monkeypatch.setattr("mnemon._engine.pacing.WATCH_SECONDS", 60.0)  # no look but these
    held = Held()
    users = _users(COMPOSING_AT_ONCE + 200)
    first = held.hold_first(users[0])
    views: list[str] = []
    async with await _host(held) as host, anyio.create_task_group() as group:
        await _start(group, host, users, views, held)
        load.busy = False
        first.set()  # its place frees while the core is idle
        while not views:
            await anyio.lowlevel.checkpoint()
        load.busy = True
        await held.settled()
        running = COMPOSING_AT_ONCE - 1
        assert len(held.inside) == 2 * running  # as many again as were running, no more
        assert held.entered == users[1 : 2 * running + 1]  # still in arrival order
        held.release.set()
    assert sorted(views) == users


async def test_held_back_turns_start_when_the_core_goes_idle_with_no_place_freed(
    load: type[Load],
) -> None:
    # every running composition waits on something slow that uses no CPU: the turns held
    # back do not wait for one of them to end
    held = Held()
    users = _users(COMPOSING_AT_ONCE + EXTRA)
    views: list[str] = []
    async with await _host(held) as host, anyio.create_task_group() as group:
        await _start(group, host, users, views, held)
        assert len(held.inside) == COMPOSING_AT_ONCE
        held.wanted = len(users)
        load.busy = False
        with anyio.fail_after(5):
            await held.reached.wait()
        assert held.entered == users
        held.release.set()
    assert sorted(views) == users


async def test_a_held_back_turn_that_is_cancelled_leaves_the_line(load: type[Load]) -> None:
    held = Held()
    users = _users(COMPOSING_AT_ONCE)
    views: list[str] = []
    async with await _host(held) as host:
        async with anyio.create_task_group() as group:
            await _start(group, host, users, views, held)
            with anyio.move_on_after(0.02) as waited:
                await _turn(host, "gave-up", views)
            assert waited.cancelled_caught
            group.start_soon(_turn, host, "next", views)
            await held.settled()
            held.release.set()
        assert "gave-up" not in held.entered
        assert held.entered[-1] == "next"
        # no place was kept by the turn that left: a full set of turns composes at once again
        held.release = anyio.Event()
        again = _users(COMPOSING_AT_ONCE)
        held.entered.clear()
        async with anyio.create_task_group() as group:
            await _start(group, host, again, views, held)
            assert held.entered == again
            held.release.set()


async def test_disposing_the_host_ends_composing_and_held_back_turns(load: type[Load]) -> None:
    held = Held()
    users = _users(COMPOSING_AT_ONCE + EXTRA)
    refused: list[str] = []

    async def turn(host: MemoryHost, user: str) -> None:
        try:
            async with host.turn(scope={"user_id": user}):
                pass
        except CompositionUnavailable:
            refused.append(user)

    host = await _host(held)
    async with anyio.create_task_group() as group:
        for user in users:
            group.start_soon(turn, host, user)
        await held.settled()
        with anyio.fail_after(5):
            await host.dispose()
    assert sorted(refused) == users
    assert held.inside == []


async def test_a_place_handed_to_a_turn_cancelled_meanwhile_passes_to_the_next() -> None:
    class Busy(CpuGauge):
        def busy(self) -> bool:
            return True

    pacer = Pacer(at_once=1, gauge=Busy())
    entered: list[str] = []
    second = anyio.CancelScope()

    async def composing(name: str) -> None:
        async with pacer.place():
            entered.append(name)

    async def second_turn() -> None:
        with second:
            await composing("second")

    # this test holds the only place
    async with anyio.create_task_group() as group, pacer.place():
        group.start_soon(second_turn)
        await anyio.lowlevel.checkpoint()
        group.start_soon(composing, "third")
        await anyio.lowlevel.checkpoint()
        assert pacer.waiting == 2
        # the second is cancelled, and before it runs again this place is handed to it: it
        # must go on to the third, not be lost
        second.cancel()
    assert entered == ["third"]
    assert (pacer.running, pacer.waiting) == (0, 0)


def test_the_gauge_reports_the_cpu_share_since_its_last_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"wall": 100.0, "cpu": 5.0}
    monkeypatch.setattr("mnemon._cpu.time.monotonic", lambda: clock["wall"])
    monkeypatch.setattr("mnemon._cpu.time.process_time", lambda: clock["cpu"])
    gauge = CpuGauge()
    assert not gauge.busy()
    clock["wall"] += 0.010
    clock["cpu"] += 0.009  # 0.9 of a core
    assert gauge.busy()
    clock["wall"] += 0.001  # too soon to look again: the last answer stands
    assert gauge.busy()
    clock["wall"] += 0.010
    clock["cpu"] += 0.002  # a thread waiting on a remote answer uses no CPU
    assert not gauge.busy()
    clock["wall"] += 0.004
    clock["cpu"] += 0.008  # two threads busy at once: more than a core
    assert gauge.busy()


async def test_when_the_first_in_line_gives_up_the_next_one_watches_the_core(
    load: type[Load],
) -> None:
    pacer = Pacer(at_once=1)
    first = anyio.CancelScope()
    second_in = anyio.Event()

    async def first_turn() -> None:
        with first:
            async with pacer.place():
                pass

    async def second_turn() -> None:
        async with pacer.place():
            second_in.set()

    # this test holds the only place throughout: only the watcher can let the second in
    async with anyio.create_task_group() as group, pacer.place():
        group.start_soon(first_turn)
        await anyio.lowlevel.checkpoint()
        group.start_soon(second_turn)
        await anyio.lowlevel.checkpoint()
        assert pacer.waiting == 2
        first.cancel()
        await anyio.lowlevel.checkpoint()
        assert pacer.waiting == 1
        load.busy = False
        with anyio.fail_after(5):
            await second_in.wait()
