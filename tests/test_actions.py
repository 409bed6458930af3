"""Action execution: authorization every time, honest receipts, own grants only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mnemon import (
    ActionError,
    ActionOffer,
    MemoryHost,
    MemoryTurn,
    MutationReceipt,
    RevisionConflict,
    SourceError,
)
from mnemon.sdk import MutationRequest, create_mutation_receipt
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

OFFER = "source:a/store"


@pytest.fixture
async def host() -> AsyncIterator[MemoryHost]:
    async with MemoryHost(source_timeout=1) as memory:
        yield memory


async def open_turn(host: MemoryHost, *plugins: Any) -> MemoryTurn:
    for index, plugin in enumerate(plugins):
        await host.mount(plugin, instance_id="a" if index == 0 else f"p{index}")
    await host.mount(strategy_plugin(), instance_id="strategy")
    return await host.begin_turn()


def receipt(**fields: Any) -> Any:
    async def mutate(source: FakeSource, request: MutationRequest) -> Any:
        base = {
            "view_id": request.view.id,
            "offer_id": request.offer.id,
            "source_key": source.key,
            "idempotency_key": request.idempotency_key,
        }
        return {**base, **fields}

    return mutate


async def test_a_denying_authorize_sees_the_offer_and_nothing_is_written(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    seen: list[ActionOffer] = []

    def deny(offer: ActionOffer) -> bool:
        seen.append(offer)
        return False

    with pytest.raises(ActionError, match="not currently authorized") as caught:
        await turn.execute_action(OFFER, {}, deny)
    assert caught.value.code == "not-authorized"
    assert caught.value.receipt is None
    assert [offer.id for offer in seen] == [OFFER]
    assert seen[0] == turn.view.offer(OFFER)
    assert probe.mutations == []


async def test_authorize_is_asked_on_every_execution(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    answers = iter([True, False, True])
    asked = 0

    async def changing_mind(offer: ActionOffer) -> bool:
        nonlocal asked
        asked += 1
        await anyio.lowlevel.checkpoint()
        return next(answers)

    first = await turn.execute_action(OFFER, {}, changing_mind)
    with pytest.raises(ActionError, match="not currently authorized"):
        await turn.execute_action(OFFER, {}, changing_mind)
    third = await turn.execute_action(OFFER, {}, changing_mind)
    assert asked == 3
    assert len(probe.mutations) == 2
    assert first.completion == third.completion == "accepted"


async def test_an_allowed_write_returns_a_receipt_bound_to_view_and_offer(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    result = await turn.execute_action(OFFER, {}, lambda offer: True, idempotency_key="k-1")
    assert (result.view_id, result.offer_id, result.source_key) == (turn.view.id, OFFER, "source:a")
    assert result.completion == "accepted"
    assert result.status == "succeeded"
    assert result.committed_at is None
    assert result.idempotency_key == "k-1"
    assert probe.mutations[0].idempotency_key == "k-1"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"completion": "committed", "status": "succeeded"}, "must carry committed_at"),
        ({"completion": "failed", "status": "succeeded"}, "contradicts"),
        (
            {"completion": "accepted", "status": "succeeded", "committed_at": "2026-01-01T00:00:00+00:00"},
            "only a committed receipt may carry committed_at",
        ),
        (
            {"completion": "committed", "status": "succeeded", "committed_at": "yesterday"},
            "ISO 8601",
        ),
        ({"completion": "committed", "status": "succeeded", "offer_id": "source:a/other",
          "committed_at": "2026-01-01T00:00:00+00:00"}, "bound to another"),
        ({"completion": "accepted", "status": "succeeded", "idempotency_key": "forged"},
         "bound to another"),
    ],
    ids=["committed-without-time", "failed-succeeded", "time-without-commit", "bad-time",
         "other-offer", "other-key"],
)  # fmt: skip
async def test_dishonest_receipts_are_rejected(
    host: MemoryHost, fields: dict[str, Any], message: str
) -> None:
    source, probe = fake_source(Probe(on_mutate=receipt(**fields)))
    turn = await open_turn(host, source)
    with pytest.raises(ActionError, match=message) as caught:
        await turn.execute_action(OFFER, {}, lambda offer: True)
    assert caught.value.code == "contract"
    assert isinstance(caught.value.receipt, MutationReceipt)
    # the write may have happened: the core reports what it knows, no more
    assert caught.value.receipt.completion == "unknown"
    assert caught.value.receipt.committed_at is None
    assert len(probe.mutations) == 1


async def test_a_committed_receipt_keeps_the_sources_commit_time(host: MemoryHost) -> None:
    async def commit(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        return create_mutation_receipt(
            request, completion="committed", committed_at="2026-11-30T10:00:00+00:00"
        )

    source, _ = fake_source(Probe(on_mutate=commit))
    turn = await open_turn(host, source)
    result = await turn.execute_action(OFFER, {}, lambda offer: True)
    assert (result.completion, result.committed_at) == ("committed", "2026-11-30T10:00:00+00:00")


@pytest.mark.parametrize(
    ("error", "completion"),
    [
        (SourceError("invalid_payload", "bad"), "failed"),
        (SourceError("forbidden", "no"), "failed"),
        (SourceError("provider_error", "flaky"), "unknown"),
        (ConnectionResetError("reset by peer"), "unknown"),
    ],
    ids=["refused-terminal", "refused-access", "transient", "transport"],
)
async def test_failed_writes_report_honestly(
    host: MemoryHost, error: Exception, completion: str
) -> None:
    async def fail(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        raise error

    source, _ = fake_source(Probe(on_mutate=fail))
    turn = await open_turn(host, source)
    with pytest.raises(ActionError, match=r"mutate\(\) failed") as caught:
        await turn.execute_action(OFFER, {}, lambda offer: True)
    assert caught.value.receipt.completion == completion
    assert caught.value.receipt.status == "failed"
    assert "reset by peer" not in str(caught.value)


async def test_a_timed_out_write_is_unknown(host: MemoryHost) -> None:
    async def hang(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    source, _ = fake_source(Probe(on_mutate=hang))
    async with MemoryHost(source_timeout=0.05) as fast:
        turn = await open_turn(fast, source)
        with pytest.raises(ActionError, match="may or may not have happened") as caught:
            await turn.execute_action(OFFER, {}, lambda offer: True)
        assert caught.value.code == "timeout"
        assert (caught.value.receipt.completion, caught.value.receipt.status) == (
            "unknown",
            "cancelled",
        )
        await turn.release()


async def test_a_revision_conflict_passes_through(host: MemoryHost) -> None:
    async def stale(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        raise RevisionConflict("revision conflict: document is at r9")

    source, _ = fake_source(Probe(on_mutate=stale))
    turn = await open_turn(host, source)
    with pytest.raises(RevisionConflict, match="at r9"):
        await turn.execute_action(OFFER, {}, lambda offer: True)


async def test_invalid_input_is_refused_before_authorization(host: MemoryHost) -> None:
    source, probe = fake_source()
    turn = await open_turn(host, source)
    asked: list[ActionOffer] = []
    with pytest.raises(ActionError, match="unsupported property 'x'") as caught:
        await turn.execute_action(OFFER, {"x": 1}, lambda offer: asked.append(offer) or True)
    assert caught.value.code == "invalid-input"
    assert asked == []
    with pytest.raises(ActionError, match="not in this View"):
        await turn.execute_action("source:a/nope", {}, lambda offer: True)
    with pytest.raises(ActionError, match="idempotency key"):
        await turn.execute_action(OFFER, {}, lambda offer: True, idempotency_key="")
    assert probe.mutations == []


async def test_writes_receive_their_own_grant_or_none(host: MemoryHost) -> None:
    readable, readable_probe = fake_source()
    write_only, write_probe = fake_source(capabilities=("write",), routes=())
    turn = await open_turn(host, readable, write_only)
    await turn.execute_action(OFFER, {}, lambda offer: True)
    await turn.execute_action("source:p1/store", {}, lambda offer: True)
    own = readable_probe.mutations[0]
    assert own.grant is not None
    assert own.grant.source_key == "source:a"
    assert write_probe.mutations[0].grant is None
    assert "source:a" not in write_probe.mutations[0].model_dump_json()
    assert write_probe.project_calls == 0


async def test_a_retryable_failure_that_wrote_nothing_says_failed(host: MemoryHost) -> None:
    async def busy(source: FakeSource, request: MutationRequest) -> MutationReceipt:
        raise SourceError("timeout", "lock busy", nothing_written=True)

    source, _ = fake_source(Probe(on_mutate=busy))
    turn = await open_turn(host, source)
    with pytest.raises(ActionError) as caught:
        await turn.execute_action(OFFER, {}, lambda offer: True)
    assert caught.value.retryable
    assert caught.value.receipt.completion == "failed"
