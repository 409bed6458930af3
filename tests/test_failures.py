"""Failures: sanitized outages, deadlines, cancellation, late results, disposal mid-read."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from mnemon import CompositionRejected, CompositionUnavailable, MemoryHost
from mnemon.sdk import ViewContribution
from tests.kit import FakeSource, Probe, fake_source, strategy_plugin

SECRET_URL = "https://admin:s3cr3t-token@db.internal:5432/memory"


async def test_an_optional_source_whose_facts_raise_is_isolated_without_leaking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(source: FakeSource, request: Any) -> Any:
        raise ConnectionError(f"cannot reach {SECRET_URL}")

    caplog.set_level(logging.INFO, logger="mnemon")
    failing, _ = fake_source(Probe(on_facts=broken))
    healthy, _ = fake_source(Probe(text="healthy memory"))
    async with MemoryHost() as host:
        await host.mount(failing, instance_id="broken")
        await host.mount(healthy, instance_id="healthy")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            view, wake = turn.view, turn.wake()
        report = host.inspect()
    assert [(d.code, d.key, d.message) for d in view.diagnostics] == [
        ("source-facts-failed", "source:broken", "Memory Source source:broken facts() failed")
    ]
    assert [f.source_key for f in view.fragments] == ["source:healthy"]
    assert "healthy memory" in wake
    records = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    for public in (view.model_dump_json(), wake, str(report), records):
        assert "s3cr3t" not in public
        assert "db.internal" not in public


async def test_two_hung_facts_start_together_and_both_time_out() -> None:
    events: list[str] = []

    async def hang(source: FakeSource, request: Any) -> Any:
        events.append(f"start {source.key}")
        try:
            await anyio.sleep_forever()
        finally:
            events.append(f"stop {source.key}")

    first, _ = fake_source(Probe(on_facts=hang))
    second, _ = fake_source(Probe(on_facts=hang))
    async with MemoryHost(source_timeout=0.05) as host:
        await host.mount(first, instance_id="a")
        await host.mount(second, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            codes = [(d.key, d.code, d.message) for d in turn.view.diagnostics]
            assert turn.view.fragments == ()
    assert codes == [
        ("source:a", "source-facts-timeout", "Memory Source source:a facts() timed out"),
        ("source:b", "source-facts-timeout", "Memory Source source:b facts() timed out"),
    ]
    # both had started before either was stopped, and both were stopped: nothing left running
    assert sorted(events[:2]) == ["start source:a", "start source:b"]
    assert sorted(events[2:]) == ["stop source:a", "stop source:b"]


async def test_a_required_sources_project_failure_rejects_the_turn() -> None:
    async def broken(source: FakeSource, request: Any) -> Any:
        raise RuntimeError(f"disk error at {SECRET_URL}")

    source, _ = fake_source(Probe(on_project=broken))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(required=True), instance_id="strategy")
        with pytest.raises(
            CompositionRejected, match=r"required Memory Source source:a project\(\) failed"
        ) as caught:
            await host.begin_turn()
        assert "s3cr3t" not in str(caught.value)
        assert caught.value.__cause__ is None
        assert host.inspect()["serving"]["leases"] == 0


async def test_an_optional_project_failure_drops_the_sources_offers_and_grant() -> None:
    async def broken(source: FakeSource, request: Any) -> Any:
        raise RuntimeError("boom")

    failing, _ = fake_source(Probe(on_project=broken))
    healthy, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(failing, instance_id="a")
        await host.mount(healthy, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            view = turn.view
    assert [(d.key, d.code) for d in view.diagnostics] == [("source:a", "source-project-failed")]
    assert {r.source_key for r in view.routes} == {"source:b"}
    assert {o.source_key for o in view.offers} == {"source:b"}
    assert [g.source_key for g in view.grants] == ["source:b"]
    assert [c.source_key for c in view.consistency] == ["source:b"]


async def test_a_late_projection_after_its_timeout_does_not_change_the_view() -> None:
    async def late(source: FakeSource, request: Any) -> ViewContribution:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.02)
        raise AssertionError("unreachable")  # pragma: no cover

    async def swallowing(source: FakeSource, request: Any) -> ViewContribution:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            pass
        # a misbehaving Source that returns after being cancelled: its result is late
        return ViewContribution.model_validate(
            {
                "fragments": [{"source_key": source.key, "mode": request.mode, "text": "LATE"}],
                "grant": {"source_key": source.key, "value": "late"},
            }
        )

    first, _ = fake_source(Probe(on_project=late))
    second, _ = fake_source(Probe(on_project=swallowing))
    async with MemoryHost(source_timeout=0.05) as host:
        await host.mount(first, instance_id="a")
        await host.mount(second, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            view, wake = turn.view, turn.wake()
    assert [(d.key, d.code) for d in view.diagnostics] == [
        ("source:a", "source-project-timeout"),
        ("source:b", "source-project-timeout"),
    ]
    assert view.fragments == ()
    assert view.grants == ()
    assert "LATE" not in wake


async def test_the_callers_cancellation_propagates_as_cancellation() -> None:
    stopped: list[str] = []

    async def hang(source: FakeSource, request: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(source.key)

    source, _ = fake_source(Probe(on_facts=hang))
    async with MemoryHost(source_timeout=10) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        entered = False
        with anyio.move_on_after(0.05) as scope:
            async with host.turn():
                entered = True
        assert scope.cancelled_caught
        assert not entered
        assert stopped == ["source:a"]
        assert host.inspect()["serving"]["leases"] == 0
        assert host.inspect()["diagnostics"] == []


async def test_a_source_turning_the_callers_cancel_into_an_error_does_not_hide_it() -> None:
    async def convert(source: FakeSource, request: Any) -> Any:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("converted") from None

    source, _ = fake_source(Probe(on_facts=convert))
    async with MemoryHost(source_timeout=10) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        with anyio.move_on_after(0.05) as scope:
            await host.begin_turn()
        assert scope.cancelled_caught
        assert host.inspect()["serving"]["leases"] == 0


async def test_disposing_the_host_aborts_a_pending_read_at_once() -> None:
    started = anyio.Event()
    stopped: list[str] = []
    outcome: list[BaseException] = []

    async def hang(source: FakeSource, request: Any) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(source.key)

    source, probe = fake_source(Probe(on_facts=hang))
    host = MemoryHost(source_timeout=30)
    await host.mount(strategy_plugin(), instance_id="strategy")
    await host.mount(source, instance_id="a")

    async def open_turn() -> None:
        try:
            await host.begin_turn()
        except CompositionUnavailable as exc:
            outcome.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(open_turn)
            await started.wait()
            await host.dispose()
    assert len(outcome) == 1
    assert "disposed during composition" in str(outcome[0])
    assert stopped == ["source:a"]
    assert probe.disposed == ["source:a"]
    with pytest.raises(CompositionUnavailable, match="disposed"):
        await host.begin_turn()


async def test_a_project_returning_another_revision_is_not_pinned() -> None:
    async def moved(source: FakeSource, request: Any) -> ViewContribution:
        contribution = source.default_contribution(request)
        return contribution.model_copy(update={"revision": "r2"})

    source, _ = fake_source(Probe(on_project=moved))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            assert [(d.key, d.code) for d in turn.view.diagnostics] == [
                ("source:a", "source-project-failed")
            ]
            assert turn.view.fragments == ()


async def test_a_source_reports_why_it_is_unavailable_only_as_a_code() -> None:
    async def damaged(source: FakeSource, request: Any) -> Any:
        return source.default_facts().model_copy(
            update={"availability": "unavailable", "reason": "damaged-file"}
        )

    async def chatty(source: FakeSource, request: Any) -> Any:
        facts = source.default_facts().model_dump()
        return {**facts, "availability": "degraded", "reason": f"cannot open {SECRET_URL}"}

    first, _ = fake_source(Probe(on_facts=damaged))
    async with MemoryHost() as host:
        await host.mount(first, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            assert [(d.key, d.code, d.message) for d in turn.view.diagnostics] == [
                (
                    "source:a",
                    "source-unavailable",
                    "Memory Source source:a is unavailable (damaged-file)",
                )
            ]
            assert "is unavailable (damaged-file)" in turn.wake()
    second, _ = fake_source(Probe(on_facts=chatty))
    async with MemoryHost() as host:
        await host.mount(second, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        # free text where a code belongs breaks the contract: the Source is dropped, coded
        async with host.turn() as turn:
            assert [(d.key, d.code) for d in turn.view.diagnostics] == [
                ("source:b", "source-facts-invalid")
            ]
            assert "s3cr3t" not in turn.wake()
            assert "s3cr3t" not in turn.view.model_dump_json()


async def test_a_failing_sources_exception_is_logged_only_at_debug_on_mnemon_loggers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The logging policy: the author's traceback at DEBUG on `mnemon.*`, nowhere else."""

    def fail(phase: str) -> Any:
        async def raising(source: FakeSource, request: Any) -> Any:
            raise ConnectionError(f"{phase} cannot reach {SECRET_URL}")

        return raising

    caplog.set_level(logging.DEBUG)  # the root logger: every logger's records are captured
    probe = Probe(on_project=fail("project"), on_query=fail("query"), on_mutate=fail("mutate"))
    broken, _ = fake_source(probe)
    facts_only, _ = fake_source(Probe(on_facts=fail("facts")))
    async with MemoryHost() as host:
        await host.mount(broken, instance_id="broken")
        await host.mount(facts_only, instance_id="facts")
        await host.mount(strategy_plugin(required=False), instance_id="strategy")
        async with host.turn() as turn:
            assert {d.code for d in turn.view.diagnostics} == {
                "source-facts-failed",
                "source-project-failed",
            }
    # the route and action need a View in which the Source projected: serve it healthy first
    probe.on_project = None
    async with MemoryHost() as host:
        await host.mount(broken, instance_id="broken")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            with pytest.raises(Exception, match="failed") as route:
                await turn.execute_route("source:broken/lookup", {"query": "x"})
            with pytest.raises(Exception, match=r"failed|unknown") as action:
                await turn.execute_action("source:broken/store", {}, lambda offer: True)
    for raised in (route.value, action.value):
        assert "s3cr3t" not in str(raised)

    leaking = [
        record
        for record in caplog.records
        if "s3cr3t" in record.getMessage()
        or (record.exc_info and "s3cr3t" in str(record.exc_info[1]))
    ]
    phases = {str(record.exc_info[1]).split()[0] for record in leaking if record.exc_info}
    assert phases == {"facts", "project", "query", "mutate"}  # the author can debug each one
    for record in leaking:
        assert record.levelno == logging.DEBUG, (record.name, record.levelname)
        assert record.name.startswith("mnemon."), record.name
        assert "s3cr3t" not in record.getMessage()  # only the attached exception carries it
