"""Turn policies: one per turn, shared by concurrent reads, a read() that can only narrow."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mnemon import Evidence, EvidenceItem, MemoryHost, RouteError, View
from mnemon.sdk import PolicyRequest, RouteReader
from tests.kit import Probe, fake_source, strategy_plugin
from tests.test_embedding import embedder_plugin


class Policies:
    """Records every policy a Strategy's create_turn makes and what each saw."""

    def __init__(self, behaviour: Any) -> None:
        self.behaviour = behaviour
        self.made: list[Policy] = []

    def create_turn(self, view: View) -> Policy:
        policy = Policy(view, self.behaviour)
        self.made.append(policy)
        return policy


class Policy:
    def __init__(self, view: View, behaviour: Any) -> None:
        self.view = view
        self.behaviour = behaviour
        self.requests: list[PolicyRequest] = []
        self.readers: list[RouteReader] = []

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        self.requests.append(request)
        self.readers.append(read)
        return await self.behaviour(self, request, read)  # type: ignore[no-any-return]


async def passthrough(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
    await anyio.sleep(0.01)
    return await read()


async def mount(host: MemoryHost, policies: Policies, probe: Probe | None = None) -> Probe:
    source, probe = fake_source(probe)
    await host.mount(source, instance_id="a")
    await host.mount(strategy_plugin(create_turn=policies.create_turn), instance_id="strategy")
    return probe


async def test_concurrent_reads_in_one_turn_share_one_policy() -> None:
    policies = Policies(passthrough)
    async with MemoryHost() as host:
        await mount(host, policies)
        turn = await host.begin_turn()
        assert policies.made == []  # made lazily, on the first read
        results: list[Evidence] = []

        async def read() -> None:
            results.append(await turn.execute_route("source:a/lookup", {"query": "q"}))

        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(read)
        assert len(policies.made) == 1
        assert len(policies.made[0].requests) == 2
        assert policies.made[0].view == turn.view
        second = await host.begin_turn()
        assert second.view.id == turn.view.id
        await second.execute_route("source:a/lookup", {})
        assert len(policies.made) == 2
        assert policies.made[1] is not policies.made[0]
    assert [len(result.items) for result in results] == [1, 1]


async def test_a_policy_can_replay_without_calling_the_source() -> None:
    cache: dict[str, Evidence] = {}

    async def replaying(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        query = str(request.input.get("query", "")).lower()
        if query in cache:
            replay = cache[query]
            return replay.model_copy(update={"output": {"replayed": True}})
        cache[query] = await read()
        return cache[query]

    policies = Policies(replaying)
    async with MemoryHost() as host:
        probe = await mount(host, policies)
        turn = await host.begin_turn()
        first = await turn.execute_route("source:a/lookup", {"query": "Ada"})
        second = await turn.execute_route("source:a/lookup", {"query": "ada"})
        third = await turn.execute_route("source:a/lookup", {"query": "ada"})
    assert len(probe.queries) == 1
    assert first.output is None
    assert second.output == {"replayed": True}
    assert third.items == first.items


async def test_a_continuation_cannot_widen_ceilings() -> None:
    async def widening(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        return await read(limits={"max_results": request.route.max_results + 1})

    async with MemoryHost() as host:
        probe = await mount(host, Policies(widening))
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="would widen the ceiling 8") as caught:
            await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "invalid-budget"
    assert probe.queries == []


async def test_a_continuation_may_narrow_and_the_source_sees_it() -> None:
    async def narrowing(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        return await read(limits={"max_results": 2, "max_characters": 300})

    async with MemoryHost() as host:
        probe = await mount(host, Policies(narrowing))
        turn = await host.begin_turn()
        await turn.execute_route("source:a/lookup", {}, limits={"max_characters": 500})
    route = probe.queries[0].route
    assert (route.max_results, route.max_characters) == (2, 300)


async def test_a_continuation_cannot_exceed_max_calls() -> None:
    async def greedy(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        for _ in range(3):
            evidence = await read()
        return evidence

    async with MemoryHost() as host:
        probe = await mount(host, Policies(greedy))
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="call budget is exhausted"):
            await turn.execute_route("source:a/lookup", {})
    assert len(probe.queries) == 2


async def test_a_continuation_is_dead_after_the_policy_returns() -> None:
    async def leaking(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        return await read()

    policies = Policies(leaking)
    async with MemoryHost() as host:
        probe = await mount(host, policies)
        turn = await host.begin_turn()
        await turn.execute_route("source:a/lookup", {})
        kept = policies.made[0].readers[0]
        with pytest.raises(RouteError, match="used after it returned"):
            await kept()
    assert len(probe.queries) == 1


async def test_a_continuation_revalidates_its_input() -> None:
    async def rewriting(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        return await read({"query": 42})

    async with MemoryHost() as host:
        probe = await mount(host, Policies(rewriting))
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="property 'query': fails type"):
            await turn.execute_route("source:a/lookup", {"query": "fine"})
    assert probe.queries == []


async def test_what_a_policy_returns_is_normalized() -> None:
    async def inflating(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        evidence = await read()
        extra = tuple(EvidenceItem(id=f"x{i}", text="z" * 10) for i in range(20))
        return evidence.model_copy(update={"items": evidence.items + extra})

    async with MemoryHost() as host:
        await mount(host, Policies(inflating))
        turn = await host.begin_turn()
        evidence = await turn.execute_route("source:a/lookup", {}, limits={"max_results": 3})
    assert len(evidence.items) == 3
    assert evidence.truncated


async def test_a_failing_policy_is_a_route_error() -> None:
    async def broken(policy: Policy, request: PolicyRequest, read: RouteReader) -> Evidence:
        raise ValueError("policy bug")

    async with MemoryHost() as host:
        await mount(host, Policies(broken))
        turn = await host.begin_turn()
        with pytest.raises(RouteError, match="the turn policy failed") as caught:
            await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "policy-failed"


async def test_a_policy_sees_the_vector_spaces_installed_in_the_host() -> None:
    policies = Policies(passthrough)
    plugin, _ = embedder_plugin()
    async with MemoryHost() as host:
        await mount(host, policies)
        turn = await host.begin_turn()
        await turn.execute_route("source:a/lookup", {})
        await host.mount(plugin, instance_id="words")
        turn = await host.begin_turn()
        await turn.execute_route("source:a/lookup", {})
    before, after = (policy.requests[0] for policy in policies.made)
    # a ranker may offer them; the policy still reads only through the route
    assert before.vector_spaces == ()
    assert [space.key for space in after.vector_spaces] == ["test.words@1"]
    assert after.vector_spaces[0].dimensions == 8
