"""A Source's coded failure (kind, retry-after, foreign code) reaches hosts, receipts, telemetry."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mnemon import ActionError, MemoryHost, RouteError, SourceError
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

MESSAGE = "upstream said: token tok-SECRET-55 over quota for ada"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def mnemon_observe_source_call(
        self, phase: str, error_code: str | None, origin_code: str | None,
        retry_after: float | None,
    ) -> None:  # fmt: skip
        self.events.append(("source", {k: v for k, v in locals().items() if k != "self"}))

    def mnemon_observe_route(
        self, error_code: str | None, origin_code: str | None, retry_after: float | None
    ) -> None:
        self.events.append(("route", {k: v for k, v in locals().items() if k != "self"}))

    def mnemon_observe_action(
        self, completion: str | None, error_code: str | None, origin_code: str | None,
        retry_after: float | None,
    ) -> None:  # fmt: skip
        self.events.append(("action", {k: v for k, v in locals().items() if k != "self"}))


def test_source_error_keeps_retry_after_and_origin_code() -> None:
    error = SourceError("rate_limited", MESSAGE, retry_after=7, origin_code="http-429")
    assert (error.kind, error.retryable, error.retry_after, error.origin_code) == (
        "transient",
        True,
        7.0,
        "http-429",
    )
    plain = SourceError("forbidden")
    assert (plain.kind, plain.retry_after, plain.origin_code) == ("access", None, None)


@pytest.mark.parametrize(
    "arguments",
    [
        {"retry_after": -1},
        {"retry_after": math.inf},
        {"retry_after": math.nan},
        {"retry_after": True},
        {"retry_after": "7"},
        {"origin_code": "has space"},
        {"origin_code": ""},
        {"origin_code": "x" * 65},
        {"origin_code": "code\n"},
    ],
    ids=lambda arguments: repr(arguments),
)
def test_source_error_refuses_a_bad_retry_after_or_origin_code(arguments: dict[str, Any]) -> None:
    name = next(iter(arguments))
    with pytest.raises(ValueError, match=name):
        SourceError("timeout", **arguments)


async def test_route_action_receipt_and_observers_carry_the_codes_never_the_text() -> None:
    async def failing_query(source: FakeSource, request: Any) -> Any:
        raise SourceError("rate_limited", MESSAGE, retry_after=7, origin_code="rate_limited")

    async def failing_mutate(source: FakeSource, request: Any) -> Any:
        raise SourceError("forbidden", MESSAGE, origin_code="http-403")

    recorder = Recorder()
    source, _ = fake_source(Probe(on_query=failing_query, on_mutate=failing_mutate))
    async with MemoryHost(observers=[recorder]) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(scope={"user_id": "ada"}) as turn:
            with pytest.raises(RouteError) as read:
                await turn.execute_route("source:a/lookup", {"query": "q"})
            with pytest.raises(ActionError) as write:
                await turn.execute_action("source:a/store", {}, lambda offer: True)
    route_error, action_error = read.value, write.value
    assert (route_error.code, route_error.kind, route_error.retryable) == (
        "rate_limited",
        "transient",
        True,
    )
    assert (route_error.retry_after, route_error.origin_code) == (7.0, "rate_limited")
    assert (action_error.code, action_error.kind, action_error.origin_code) == (
        "forbidden",
        "access",
        "http-403",
    )
    assert action_error.retry_after is None
    receipt: Any = action_error.receipt
    assert receipt.completion == "failed"  # an access refusal: nothing was written
    assert dict(receipt.detail) == {
        "error_code": "forbidden",
        "error_kind": "access",
        "origin_code": "http-403",
    }
    events = {name: event for name, event in recorder.events if name != "source"}
    assert events["route"] == {"error_code": "rate_limited", "origin_code": "rate_limited",
                               "retry_after": 7.0}  # fmt: skip
    assert events["action"] == {"completion": "failed", "error_code": "forbidden",
                                "origin_code": "http-403", "retry_after": None}  # fmt: skip
    calls = [e for name, e in recorder.events if name == "source" and e["phase"] != "facts"]
    assert {(c["phase"], c["origin_code"], c["retry_after"]) for c in calls} >= {
        ("query", "rate_limited", 7.0),
        ("mutate", "http-403", None),
    }
    for text in (str(route_error), str(action_error), receipt.model_dump_json()):
        assert "tok-SECRET" not in text
        assert "over quota" not in text
    assert "tok-SECRET" not in str(recorder.events)


async def test_an_unknown_failure_keeps_an_empty_receipt_detail() -> None:
    async def crashing_mutate(source: FakeSource, request: Any) -> Any:
        raise RuntimeError(MESSAGE)

    source, _ = fake_source(Probe(on_mutate=crashing_mutate))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(scope={"user_id": "ada"}) as turn:
            with pytest.raises(ActionError) as write:
                await turn.execute_action("source:a/store", {}, lambda offer: True)
    error = write.value
    assert (error.code, error.kind, error.origin_code, error.retry_after) == (
        "source-failed",
        None,
        None,
        None,
    )
    assert getattr(error.receipt, "completion", None) == "unknown"
    assert dict(getattr(error.receipt, "detail", {})) == {}
