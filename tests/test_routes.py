"""Route execution: lookup, input validation, call ledger, narrowing, evidence normalization."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from mnemon import Evidence, EvidenceItem, MemoryHost, MemoryTurn, RouteError, SourceError
from mnemon.sdk import QueryRequest
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin


def items(*texts: str) -> Any:
    async def query(source: FakeSource, request: QueryRequest) -> Evidence:
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=source.key,
            items=tuple(EvidenceItem(id=str(i), text=text) for i, text in enumerate(texts)),
        )

    return query


@pytest.fixture
async def host() -> AsyncIterator[MemoryHost]:
    async with MemoryHost(source_timeout=1) as memory:
        yield memory


async def open_turn(host: MemoryHost, *plugins: Any, **turn: Any) -> MemoryTurn:
    for index, plugin in enumerate(plugins):
        await host.mount(plugin, instance_id="a" if index == 0 else f"p{index}")
    await host.mount(strategy_plugin(), instance_id="strategy")
    return await host.begin_turn(turn or None)


async def test_a_route_reads_the_pinned_grant(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    evidence = await turn.execute_route("source:a/lookup", {"query": "ada"})
    assert evidence.view_id == turn.view.id
    assert evidence.route_id == "source:a/lookup"
    assert evidence.source_key == "source:a"
    assert [item.text for item in evidence.items] == ["remembered text"]
    request = probe.queries[0]
    assert request.view.model_dump() == {
        "id": turn.view.id,
        "scope": turn.view.request.scope.model_dump(),
    }
    assert request.input == {"query": "ada"}
    assert request.grant.source_key == "source:a"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"query": "x", "extra": 1}, "unsupported property 'extra'"),
        ({"query": 5}, "property 'query': fails type"),
        ({"query": "x" * 201}, "property 'query': fails maxLength"),
        (["query"], "must be a JSON object"),
        ({"query": float("nan")}, r"non-finite number nan at \$\.query"),
    ],
    ids=["unexpected-property", "wrong-type", "too-long", "not-an-object", "nan"],
)
async def test_invalid_route_input_is_rejected_before_the_source_runs(
    host: MemoryHost, payload: Any, message: str
) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    with pytest.raises(RouteError, match=message) as caught:
        await turn.execute_route("source:a/lookup", payload)
    assert caught.value.code in ("invalid-input", "refused")
    assert probe.queries == []
    # a rejected input is not a dispatch: both calls of the budget remain
    await turn.execute_route("source:a/lookup", {"query": "ok"})
    await turn.execute_route("source:a/lookup", {"query": "ok"})


async def test_cyclic_input_is_rejected(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    cyclic: dict[str, Any] = {"query": "x"}
    cyclic["self"] = cyclic
    with pytest.raises(RouteError, match=r"cycle at \$\.self"):
        await turn.execute_route("source:a/lookup", cyclic)
    assert probe.queries == []


async def test_an_unknown_route_raises(host: MemoryHost) -> None:
    source, _ = fake_source()
    turn = await open_turn(host, source)
    with pytest.raises(RouteError, match="route 'source:a/nope' is not in this View") as caught:
        await turn.execute_route("source:a/nope", {})
    assert caught.value.code == "unknown-route"


async def test_calls_beyond_max_calls_raise_and_failed_reads_still_count(host: MemoryHost) -> None:
    attempts = 0

    async def flaky(source: FakeSource, request: QueryRequest) -> Evidence:
        nonlocal attempts
        attempts += 1
        raise SourceError("rate_limited", "slow down")

    source, _ = fake_source(Probe(on_query=flaky))
    turn = await open_turn(host, source)
    for _ in range(2):
        with pytest.raises(RouteError, match=r"query\(\) failed \(rate_limited\)") as caught:
            await turn.execute_route("source:a/lookup", {})
        assert caught.value.code == "rate_limited"
        assert caught.value.retryable
    with pytest.raises(RouteError, match="call budget is exhausted") as caught:
        await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "call-budget-exhausted"
    assert attempts == 2


async def test_the_ledger_is_per_turn(host: MemoryHost) -> None:
    source, _ = fake_source()
    first = await open_turn(host, source)
    await first.execute_route("source:a/lookup", {})
    await first.execute_route("source:a/lookup", {})
    second = await host.begin_turn()
    await second.execute_route("source:a/lookup", {})


async def test_over_budget_items_are_omitted_whole_and_truncated_is_set(host: MemoryHost) -> None:
    source, _ = fake_source(Probe(on_query=items("a" * 60, "b" * 50, "c" * 30, "d" * 10)))
    turn = await open_turn(host, source, budget={"max_evidence_characters": 100})
    evidence = await turn.execute_route("source:a/lookup", {})
    # 60 fits, 50 would pass 100 and is omitted whole, then 30 and 10 still fit
    assert [item.text[0] for item in evidence.items] == ["a", "c", "d"]
    assert all(len(item.text) in (60, 30, 10) for item in evidence.items)
    assert evidence.truncated


async def test_results_beyond_max_results_are_omitted(host: MemoryHost) -> None:
    source, _ = fake_source(Probe(on_query=items(*"abcdef")))
    turn = await open_turn(host, source, budget={"max_evidence_results": 4})
    evidence = await turn.execute_route("source:a/lookup", {})
    assert [item.text for item in evidence.items] == ["a", "b", "c", "d"]
    assert evidence.truncated
    everything = await turn.execute_route("source:a/lookup", {}, limits={"max_results": 10})
    assert len(everything.items) == 4


async def test_a_narrower_budget_reaches_the_source_and_the_view_keeps_its_own(
    host: MemoryHost,
) -> None:
    source, probe = fake_source(Probe(on_query=items("x" * 40, "y" * 40, "z")))
    turn = await open_turn(host, source)
    evidence = await turn.execute_route(
        "source:a/lookup", {}, limits={"max_results": 2, "max_characters": 50}
    )
    route = probe.queries[0].route
    assert (route.max_results, route.max_characters) == (2, 50)
    assert [len(item.text) for item in evidence.items] == [40, 1]
    assert evidence.truncated
    pinned = turn.view.route("source:a/lookup")
    assert pinned is not None
    assert (pinned.max_results, pinned.max_characters) == (8, 12_000)


async def test_a_per_item_ceiling_reaches_the_source_and_longer_items_are_omitted_whole(
    host: MemoryHost,
) -> None:
    def excerpting(source: FakeSource, request: QueryRequest) -> Any:
        # a Source that owns excerpts: the long memory comes back within the item ceiling
        ceiling = request.route.max_item_characters
        return items("s" * 30, ("L" * 8_000)[:ceiling], "u" * 300)(source, request)

    source, probe = fake_source(Probe(on_query=excerpting))
    turn = await open_turn(host, source)
    pinned = turn.view.route("source:a/lookup")
    assert pinned is not None
    assert pinned.max_item_characters == pinned.max_characters == 12_000
    evidence = await turn.execute_route("source:a/lookup", {}, limits={"max_item_characters": 200})
    assert probe.queries[0].route.max_item_characters == 200
    # the excerpt fits; the 300-character item ignored the ceiling and is omitted whole
    assert [len(item.text) for item in evidence.items] == [30, 200]
    assert evidence.truncated
    # an item ceiling is never wider than the read itself
    await turn.execute_route("source:a/lookup", {}, limits={"max_characters": 100})
    assert probe.queries[1].route.max_item_characters == 100


@pytest.mark.parametrize(
    "limits",
    [
        {"max_results": 0},
        {"max_characters": 0},
        {"max_item_characters": 0},
        {"max_results": -1},
        {"max_results": 1.5},
    ],
    ids=["zero-results", "zero-characters", "zero-item-characters", "negative", "fraction"],
)
async def test_invalid_execution_budgets_are_rejected_before_the_source_runs(
    host: MemoryHost, limits: dict[str, Any]
) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    with pytest.raises(RouteError, match=r"route 'source:a/lookup' limits\.max_"):
        await turn.execute_route("source:a/lookup", {}, limits=limits)
    assert probe.queries == []


async def test_evidence_bound_elsewhere_is_rejected(host: MemoryHost) -> None:
    async def foreign(source: FakeSource, request: QueryRequest) -> Evidence:
        return Evidence(view_id="view:other", route_id=request.route.id, source_key=source.key)

    source, _ = fake_source(Probe(on_query=foreign))
    turn = await open_turn(host, source)
    with pytest.raises(RouteError, match="bound to another View") as caught:
        await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "contract"


async def test_a_failing_query_never_leaks_its_text(host: MemoryHost) -> None:
    async def broken(source: FakeSource, request: QueryRequest) -> Evidence:
        raise RuntimeError("postgres://admin:hunter2@db/memory refused")

    source, _ = fake_source(Probe(on_query=broken))
    turn = await open_turn(host, source)
    with pytest.raises(RouteError) as caught:
        await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "source-failed"
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None


async def test_a_hung_query_times_out(host: MemoryHost) -> None:
    async def hang(source: FakeSource, request: QueryRequest) -> Evidence:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    source, _ = fake_source(Probe(on_query=hang))
    async with MemoryHost(source_timeout=0.05) as fast:
        turn = await open_turn(fast, source)
        with pytest.raises(RouteError, match=r"query\(\) timed out") as caught:
            await turn.execute_route("source:a/lookup", {})
        assert caught.value.code == "timeout"
        await turn.release()


async def test_reads_receive_only_their_own_sources_grant(host: MemoryHost) -> None:
    first, first_probe = fake_source(Probe(text="alpha memory"))
    second, second_probe = fake_source(Probe(text="beta memory"))
    turn = await open_turn(host, first, second)
    evidence = await turn.execute_route("source:p1/lookup", {})
    assert [item.text for item in evidence.items] == ["beta memory"]
    request = second_probe.queries[0]
    dumped = request.model_dump_json()
    assert "alpha" not in dumped
    assert "source:a" not in dumped
    assert request.grant.source_key == "source:p1"
    assert first_probe.queries == []


async def test_released_turns_refuse_to_execute(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    await turn.release()
    await turn.release()
    with pytest.raises(RouteError, match="released") as caught:
        await turn.execute_route("source:a/lookup", {})
    assert caught.value.code == "released"
    assert probe.queries == []
