"""Observer hooks: a host watches generations, turns, Source calls, routes and actions."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pluggy
import pytest

from mnemon import ActionError, MemoryHost, RouteError, SourceError, hookimpl
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

SECRET = "tok-SECRET-7f3a"
MEMORY = "memory-MARKER-91c2"


class Recorder:
    """An observer implementing every hook, marked and unmarked alike."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    def mnemon_observe_generation(
        self, state: str, generation_id: str | None, source_count: int, reason: str | None
    ) -> None:
        self.events.append(("generation", locals()))

    def mnemon_observe_turn(
        self, duration: float, outcome: str, source_count: int, diagnostic_codes: tuple[str, ...]
    ) -> None:
        self.events.append(("turn", locals()))

    def mnemon_observe_source_call(
        self, phase: str, type_id: str, role: str, outcome: str, error_code: str | None,
        duration: float,
    ) -> None:  # fmt: skip
        self.events.append(("source", locals()))

    def mnemon_observe_route(
        self, type_id: str, route_id: str, outcome: str, error_code: str | None, items: int,
        truncated: bool, duration: float,
    ) -> None:  # fmt: skip
        self.events.append(("route", locals()))

    def mnemon_observe_action(
        self, type_id: str, action_id: str, completion: str | None, error_code: str | None,
        duration: float,
    ) -> None:  # fmt: skip
        self.events.append(("action", locals()))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in event.items() if k != "self"}
            for name, event in self.events
            if name == kind
        ]


async def test_every_hook_sees_coarse_facts_and_never_content_or_ids() -> None:
    async def failing_query(source: FakeSource, request: Any) -> Any:
        raise SourceError("rate_limited", f"slow down {SECRET}")

    recorder = Recorder()
    source, _ = fake_source(Probe(text=MEMORY, on_query=failing_query))
    async with MemoryHost(observers=[recorder]) as host:
        await host.mount(source, instance_id="a", config={"token": SECRET})
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(scope={"user_id": "ada-7", "tenant_id": "acme-9"}) as turn:
            with pytest.raises(RouteError) as failed:
                await turn.execute_route("source:a/lookup", {"query": MEMORY})
            assert failed.value.code == "rate_limited"
            receipt = await turn.execute_action("source:a/store", {}, lambda offer: True)
            with pytest.raises(ActionError):
                await turn.execute_action("source:a/store", {}, lambda offer: False)
    generations = recorder.of("generation")
    assert [g["state"] for g in generations][:2] == ["incomplete", "serving"]
    assert generations[-1]["state"] == "disposed"
    assert generations[0]["reason"] == "missing-strategy"
    [turn_event] = recorder.of("turn")
    assert turn_event["outcome"] == "composed"
    assert turn_event["source_count"] == 1
    assert turn_event["duration"] >= 0
    phases = [(s["phase"], s["outcome"], s["error_code"]) for s in recorder.of("source")]
    assert ("facts", "ok", None) in phases
    assert ("project", "ok", None) in phases
    assert ("query", "failed", "rate_limited") in phases
    assert ("mutate", "ok", None) in phases
    assert ("dispose", "ok", None) in phases
    assert {s["type_id"] for s in recorder.of("source")} == {"fake"}
    [route] = recorder.of("route")
    assert (route["route_id"], route["outcome"], route["error_code"]) == (
        "lookup",
        "failed",
        "rate_limited",
    )
    actions = recorder.of("action")
    assert [(a["completion"], a["error_code"]) for a in actions] == [
        (receipt.completion, None),
        (None, "not-authorized"),
    ]
    everything = repr(recorder.events)
    for forbidden in (SECRET, MEMORY, "ada-7", "acme-9", "view:", "grant"):
        assert forbidden not in everything


async def test_a_timed_out_read_is_observed_as_a_timeout() -> None:
    async def hang(source: FakeSource, request: Any) -> Any:
        await anyio.sleep_forever()

    recorder = Recorder()
    slow, _ = fake_source(Probe(on_facts=hang))
    async with MemoryHost(source_timeout=0.05, observers=[recorder]) as host:
        await host.mount(slow, instance_id="slow")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            codes = {d.code for d in turn.view.diagnostics}
    assert ("facts", "timeout") in [(s["phase"], s["outcome"]) for s in recorder.of("source")]
    [turn_event] = recorder.of("turn")
    assert turn_event["diagnostic_codes"] == tuple(sorted(codes))


class Misspelt:
    def mnemon_observe_turns(self, duration: float) -> None:
        raise AssertionError("never called")


class UnknownArgument:
    def mnemon_observe_turn(self, duration: float, query_text: str) -> None:
        raise AssertionError("never called")


@pytest.mark.parametrize(
    ("observer", "message"),
    [
        (Misspelt(), "unknown hook 'mnemon_observe_turns'"),
        (UnknownArgument(), r"Argument\(s\) \{'query_text'\} are declared in the hookimpl"),
    ],
    ids=["misspelt-hook", "unknown-argument"],
)
def test_a_bad_observer_is_refused_when_it_registers(observer: object, message: str) -> None:
    with pytest.raises(pluggy.PluginValidationError, match=message):
        MemoryHost(observers=[observer])


async def test_an_observer_that_raises_never_breaks_a_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def mnemon_observe_turn(self, duration: float) -> None:
            raise RuntimeError(f"observer bug with {SECRET}")

    recorder = Recorder()
    caplog.set_level(logging.INFO, logger="mnemon")
    source, _ = fake_source()
    async with MemoryHost(observers=[Broken(), recorder]) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            assert turn.view.fragments
    assert len(recorder.of("turn")) == 1  # the other observer still heard it
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("mnemon_observe_turn" in message for message in warnings)
    assert all(SECRET not in message for message in warnings)


class ProfileObserver:
    """Named by a profile's [[observers]]; made with no arguments, it records turn outcomes."""

    outcomes: list[str] = []  # noqa: RUF012 - shared on purpose: the profile makes the instance

    def mnemon_observe_turn(self, outcome: str) -> None:
        self.outcomes.append(outcome)


async def test_a_profile_registers_its_observers(tmp_path: Any) -> None:
    from mnemon import DefinitionError, load_profile

    profile = tmp_path / "mnemon.toml"
    notes = tmp_path / "notes.md"
    notes.write_text("From the profile.", encoding="utf-8")
    profile.write_text(
        f"""
max_concurrent_compositions = 8
[strategy]
use = "focus"
[[entries]]
id = "focus"
use = "mnemon_example_focus"
[entries.config]
source_keys = ["source:notes"]
[[entries]]
id = "notes"
use = "mnemon_example_notes"
[entries.config]
path = "{notes}"
[[observers]]
use = "tests.test_observers:ProfileObserver"
[[observers]]
use = "tests.test_observers:Misspelt"
enabled = false
""",
        encoding="utf-8",
    )
    ProfileObserver.outcomes.clear()
    loaded = load_profile(profile)
    assert loaded.settings.max_concurrent_compositions == 8
    async with loaded.open_host() as host, host.turn(scope={"user_id": "ada"}):
        pass
    assert ProfileObserver.outcomes == ["composed"]
    profile.write_text('[[observers]]\nuse = "tests.no_such_module:Observer"\n', encoding="utf-8")
    with pytest.raises(DefinitionError, match=r"observers use 'tests.no_such_module:Observer'"):
        async with load_profile(profile).open_host():
            pass


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"name": "Has Spaces"}, "telemetry name"),
        ({"operation": "a query with words"}, "telemetry operation"),
        ({"error_code": "x" * 65}, "telemetry error_code"),
        ({"counts": {"results": -1}}, "telemetry count"),
        ({"counts": {"results": True}}, "telemetry count"),
        ({"attributes": {"user": "ada lovelace"}}, "telemetry attribute"),
        ({"attributes": {f"k{i}": "v" for i in range(9)}}, "at most 8"),
    ],
)
def test_source_telemetry_refuses_what_is_not_a_code(arguments: dict[str, Any], words: str) -> None:
    from mnemon.sdk import SourceTelemetry

    reporting = SourceTelemetry(None, "stub")
    call: dict[str, Any] = {"name": "stub.calls", "operation": "search", "outcome": "ok"}
    call.update(arguments)
    with pytest.raises(ValueError, match=words):
        reporting.record(call.pop("name"), duration=0.1, **call)
