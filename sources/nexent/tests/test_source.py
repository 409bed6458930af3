"""The nexent-provider Source end to end: the provider error matrix, receipts, switches, secrets."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mnemon_source_nexent as nexent
import pytest
from mnemon_source_nexent import (
    NEXENT_FAILURES,
    mask_secret,
    nexent_code,
    provider_failure,
    source_error,
)
from mnemon_source_nexent.models import (
    NonRetryableProviderError,
    ProviderError,
    ProviderErrorCode,
    ProviderErrorSeverity,
    RetryableProviderError,
)
from nexent_fake import PLUGINS, FakeService

from mnemon import ActionError, RouteError, SourceError, load_profile
from mnemon_testing import MemoryCompositionRunner, SelectAll

API_KEY = "sk-live-0123456789abcdef"
SCOPE = {"user_id": "ada", "tenant_id": "acme", "agent_id": "planner", "session_id": "s-9"}


def allow(offer: object) -> bool:
    return True


@pytest.fixture
def service() -> Iterator[FakeService]:
    fake = FakeService()
    yield fake
    fake.close()


def settings(tmp_path: Path, endpoint: str, **extra: Any) -> dict[str, Any]:
    plugin = {"name": "reference", "endpoint": endpoint, "api_key": API_KEY}
    plugin.update(extra.pop("plugin", {}))
    return {
        "plugin_dir": str(PLUGINS),
        "plugin": plugin,
        "nexent_shim": True,
        "data_dir": str(tmp_path),
        **extra,
    }


async def runner_for(tmp_path: Path, endpoint: str, **extra: Any) -> tuple[Any, SelectAll]:
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    await runner.mount(nexent, instance_id="mem", config=settings(tmp_path, endpoint, **extra))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    return runner, strategy


def reasons(strategy: SelectAll) -> set[tuple[str, str | None]]:
    return {(c.facts.availability, c.facts.reason) for c in strategy.seen}


# ---------------------------------------------------------------- the failure table


def problem(code: ProviderErrorCode, severity: ProviderErrorSeverity) -> ProviderError:
    return ProviderError(code=code, message="text tok-SECRET", severity=severity)


@pytest.mark.parametrize("code", list(ProviderErrorCode), ids=lambda c: c.value)
def test_every_nexent_code_maps_and_maps_back(code: ProviderErrorCode) -> None:
    raised = RetryableProviderError(
        "text tok-SECRET", problem(code, ProviderErrorSeverity.RETRYABLE)
    )
    failure = provider_failure(raised)
    assert failure is not None
    error = source_error(failure, "the call")
    mapped, kind = NEXENT_FAILURES[code]
    assert (error.code, error.origin_code) == (mapped, code.value)
    assert error.kind == (kind or "transient")
    assert nexent_code(error) == code
    assert "tok-SECRET" not in str(error)


def test_the_table_covers_the_kinds() -> None:
    def kind(code: ProviderErrorCode) -> str:
        raised = NonRetryableProviderError("x", problem(code, ProviderErrorSeverity.NON_RETRYABLE))
        failure = provider_failure(raised)
        assert failure is not None
        return source_error(failure, "x").kind

    kinds = {code: kind(code) for code in ProviderErrorCode}
    assert kinds[ProviderErrorCode.RATE_LIMITED] == "transient"
    assert kinds[ProviderErrorCode.UNAUTHORIZED] == "access"
    assert kinds[ProviderErrorCode.SCHEMA_MISMATCH] == "terminal"
    assert kinds[ProviderErrorCode.PARTIAL_ACCEPTANCE] == "degraded"
    assert kinds[ProviderErrorCode.UNKNOWN] == "terminal"  # severity decides for `unknown`
    assert nexent_code(SourceError("unauthorized")) == ProviderErrorCode.UNAUTHORIZED
    assert nexent_code(SourceError("unsafe-path")) == ProviderErrorCode.UNKNOWN


# ---------------------------------------------------------------- the error matrix


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("status", "headers", "code", "kind", "origin", "retry_after"),
    [
        (401, {}, "unauthorized", "access", "unauthorized", None),
        (403, {}, "forbidden", "access", "forbidden", None),
        (429, {"Retry-After": "7"}, "rate_limited", "transient", "rate_limited", 7.0),
        (503, {}, "provider_error", "transient", "provider_error", None),
        (418, {}, "unknown", "terminal", "unknown", None),
    ],
    ids=["401", "403", "429", "5xx", "other-4xx"],
)
async def test_the_provider_error_matrix(
    tmp_path: Path,
    service: FakeService,
    caplog: pytest.LogCaptureFixture,
    status: int,
    headers: dict[str, str],
    code: str,
    kind: str,
    origin: str,
    retry_after: float | None,
) -> None:
    caplog.set_level(logging.INFO)
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        service.fail_next(status, headers)
        with pytest.raises(RouteError) as failed:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    error = failed.value
    assert (error.code, error.kind, error.origin_code, error.retry_after) == (
        code,
        kind,
        origin,
        retry_after,
    )
    assert error.retryable == (kind == "transient")
    logged = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert API_KEY not in str(error) + logged
    assert len(service.requests) == 1  # no automatic retry


async def test_a_read_past_the_instance_timeout_is_transient_timeout(
    tmp_path: Path, service: FakeService
) -> None:
    service.stalling = True
    runner, _ = await runner_for(tmp_path, service.url, timeout_seconds=0.05)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(RouteError) as failed:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    service.stall.set()
    # the host's limit or the provider's own (it is handed the same `timeout_seconds`)
    assert (failed.value.code, failed.value.kind) == ("timeout", "transient")


async def test_a_connection_error_is_provider_error(tmp_path: Path) -> None:
    runner, _ = await runner_for(tmp_path, closed_port())
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(RouteError) as failed:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    assert (failed.value.code, failed.value.kind, failed.value.origin_code) == (
        "provider_error",
        "transient",
        "provider_error",
    )


async def test_an_access_refusal_disables_until_an_operator_re_enables(
    tmp_path: Path, service: FakeService
) -> None:
    runner, strategy = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        service.fail_next(401)
        with pytest.raises(RouteError):
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    # a new host on the same data folder: the refusal was persisted
    runner, strategy = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        assert turn.view.routes == ()
        await turn.release()
        assert ("unavailable", "provider-access-revoked") in reasons(strategy)
        client = runner.management_client("source:mem", SCOPE)
        status = await client.read("status", {})
        assert status["disabled"] == "unauthorized"
        await client.mutate("enable", {}, confirmed=True, expected_revision=await client.revision())
        turn = await runner.begin_turn({"scope": SCOPE})
        assert [r.id for r in turn.view.routes] == ["source:mem/search"]
        await turn.release()


# ---------------------------------------------------------------- reads and writes


async def test_search_and_ingest_carry_the_scope_and_keep_the_provider_scale(
    tmp_path: Path, service: FakeService
) -> None:
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        receipt = await turn.execute_action(
            "source:mem/ingest", {"units": [{"content": "Ada likes tea", "role": "user"}]}, allow
        )
        evidence = await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    # the provider took the unit: `accepted`, never more than its answer says
    assert (receipt.completion, receipt.status) == ("accepted", "succeeded")
    [unit] = receipt.detail["units"]
    assert (unit["unit_index"], unit["status"]) == (0, "accepted")
    assert (receipt.detail["accepted_count"], receipt.detail["rejected_count"]) == (1, 0)
    path, body, _headers = service.requests[0]
    assert path == "/ingest"
    assert {k: body[k] for k in ("tenant_id", "user_id", "agent_id", "conversation_id")} == {
        "tenant_id": "acme", "user_id": "ada", "agent_id": "planner", "conversation_id": "s-9",
    }  # fmt: skip
    assert body["idempotency_key"].startswith("mnemon:")
    assert [u["event_id"] for u in body["units"]] == [unit["event_id"]]
    assert body["units"][0]["unit_type"] == "user"
    [item] = evidence.items
    assert item.id == "ext-0"
    assert dict(item.provenance) == {"provider": "reference", "source": "reference",
                                     "is_external": True, "external_id": "ext-0",
                                     "score": 10.0, "score_scale": "provider-native"}  # fmt: skip


async def test_the_idempotency_key_is_the_callers_or_derived_from_the_write(
    tmp_path: Path, service: FakeService
) -> None:
    write = {"units": [{"content": "same words"}]}
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.execute_action("source:mem/ingest", write, allow)
        await turn.execute_action("source:mem/ingest", write, allow)
        await turn.execute_action("source:mem/ingest", write, allow, idempotency_key="k-1")
        await turn.release()
    keys = [body["idempotency_key"] for _, body, _ in service.requests]
    assert keys[0] == keys[1]
    assert keys[2] == "k-1"


async def test_partial_and_failed_ingests_say_so_per_unit(
    tmp_path: Path, service: FakeService
) -> None:
    service.reject_types = {"image"}
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        partial = await turn.execute_action(
            "source:mem/ingest",
            {"units": [{"content": "ok"}, {"content": "pic", "unit_type": "image"}]},
            allow,
        )
        failed = await turn.execute_action(
            "source:mem/ingest", {"units": [{"content": "pic", "unit_type": "image"}]}, allow
        )
        await turn.release()
    assert (partial.completion, partial.status) == ("partial", "partial")
    assert [(u["unit_index"], u["status"]) for u in partial.detail["units"]] == [
        (0, "accepted"),
        (1, "rejected"),
    ]
    assert (failed.completion, failed.status) == ("failed", "failed")
    assert failed.detail["rejected_count"] == 1


async def test_a_degradable_failure_drops_the_named_units_and_goes_ahead_once(
    tmp_path: Path, service: FakeService
) -> None:
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        service.fail_next(409, {"X-Removable-Index": "1"})
        receipt = await turn.execute_action(
            "source:mem/ingest", {"units": [{"content": "a"}, {"content": "b"}]}, allow
        )
        await turn.release()
    assert receipt.completion == "partial"
    assert [(u["unit_index"], u["status"]) for u in receipt.detail["units"]] == [
        (0, "accepted"),
        (1, "degraded"),
    ]
    assert [len(body["units"]) for _, body, _ in service.requests] == [2, 1]


async def test_a_refused_write_says_failed_with_its_codes(
    tmp_path: Path, service: FakeService
) -> None:
    runner, _ = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        service.fail_next(403)
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:mem/ingest", {"units": [{"content": "a"}]}, allow)
        service.fail_next(503)
        await turn.release()
    receipt: Any = refused.value.receipt
    assert receipt.completion == "failed"
    assert dict(receipt.detail) == {
        "error_code": "forbidden",
        "error_kind": "access",
        "origin_code": "forbidden",
    }


# ---------------------------------------------------------------- switches and scope


@pytest.mark.parametrize(
    ("environment", "extra", "routes", "offers", "reason"),
    [
        ({"EXTERNAL_MEMORY_SEARCH_ENABLED": "false"}, {}, [], ["ingest"], "search-switched-off"),
        ({"EXTERNAL_MEMORY_INGEST_ENABLED": "0"}, {}, ["search"], [], "ingest-switched-off"),
        ({}, {"search_enabled": False}, [], ["ingest"], "search-switched-off"),
        ({}, {"ingest_enabled": False}, ["search"], [], "ingest-switched-off"),
        ({"EXTERNAL_MEMORY_SEARCH_ENABLED": "off"}, {"ingest_enabled": False}, [], [],
         "external-memory-switched-off"),
        ({}, {"enabled": False}, [], [], "provider-disabled"),
    ],
    ids=["env-search", "env-ingest", "instance-search", "instance-ingest", "both", "instance"],
)  # fmt: skip
async def test_a_switched_off_capability_leaves_the_view_with_a_reason(
    tmp_path: Path,
    service: FakeService,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    extra: dict[str, Any],
    routes: list[str],
    offers: list[str],
    reason: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    runner, strategy = await runner_for(tmp_path, service.url, **extra)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        view = turn.view
        await turn.release()
    assert [r.route_id for r in view.routes] == routes
    assert [o.action_id for o in view.offers] == offers
    assert {r for _, r in reasons(strategy)} == {reason}


async def test_a_scope_without_a_user_is_unavailable(tmp_path: Path, service: FakeService) -> None:
    runner, strategy = await runner_for(tmp_path, service.url)
    async with runner:
        turn = await runner.begin_turn({"scope": {"agent_id": "planner"}})
        await turn.release()
    assert reasons(strategy) == {("unavailable", "missing-scope")}
    assert service.requests == []


# ---------------------------------------------------------------- configuration and secrets


@pytest.mark.parametrize(
    ("value", "shown"),
    [("", "***"), ("12345678", "***"), ("123456789", "123***6789"), (API_KEY, "sk-***cdef")],
)
def test_secrets_are_masked_by_nexents_rule(value: str, shown: str) -> None:
    assert mask_secret(value) == shown


async def test_management_masks_secrets_and_the_flat_form_works(
    tmp_path: Path, service: FakeService
) -> None:
    config = {
        "plugin_dir": str(PLUGINS),
        "plugin.name": "reference",
        "plugin.endpoint": service.url,
        "plugin.api_key": API_KEY,
        "nexent_shim": True,
        "data_dir": str(tmp_path),
    }
    runner = MemoryCompositionRunner()
    await runner.mount(nexent, instance_id="mem", config=config)
    await runner.mount(SelectAll(), instance_id="all", config={"required": True})
    async with runner:
        status = await runner.management_client("source:mem", SCOPE).read("status", {})
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
    assert status["config"] == {
        "name": "reference",
        "endpoint": service.url,
        "api_key": "sk-***cdef",
    }
    assert status["version"] == "1.0.0"
    assert API_KEY not in str(status) + runner.inspect().__repr__()


async def test_a_missing_required_key_makes_the_provider_misconfigured(
    tmp_path: Path, service: FakeService
) -> None:
    config = settings(tmp_path, service.url)
    del config["plugin"]["api_key"]
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    await runner.mount(nexent, instance_id="mem", config=config)
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
    assert reasons(strategy) == {("unavailable", "provider-misconfigured")}


async def test_a_plugin_added_later_is_served_without_a_restart(
    tmp_path: Path, service: FakeService
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    config = settings(tmp_path, service.url)
    config["plugin_dir"] = str(plugins)
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    await runner.mount(nexent, instance_id="mem", config=config)
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
        assert reasons(strategy) == {("unavailable", "provider-not-found")}
        target = plugins / "reference"
        target.mkdir()
        for name in ("plugin.yaml", "provider.py"):
            (target / name).write_bytes((PLUGINS / "reference" / name).read_bytes())
        turn = await runner.begin_turn({"scope": SCOPE})
        assert [r.route_id for r in turn.view.routes] == ["search"]
        await turn.release()


async def test_the_host_can_switch_an_instance_off_through_its_settings(
    tmp_path: Path, service: FakeService
) -> None:
    strategy = SelectAll()
    runner = MemoryCompositionRunner(source_configuration={"source:mem": {"ingest_enabled": False}})
    await runner.mount(nexent, instance_id="mem", config=settings(tmp_path, service.url))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        view = turn.view
        await turn.release()
    assert [o.action_id for o in view.offers] == []
    assert [r.route_id for r in view.routes] == ["search"]
    assert {r for _, r in reasons(strategy)} == {"ingest-switched-off"}


@pytest.mark.parametrize(
    ("switches", "routes", "offers", "reason"),
    [
        ({"external-memory.search": False}, [], ["ingest"], "search-switched-off"),
        ({"external-memory.ingest": False}, ["search"], [], "ingest-switched-off"),
        ({"external-memory.search": False, "external-memory.ingest": False}, [], [],
         "external-memory-switched-off"),
        ({"external-memory.search": True, "unrelated.switch": False}, ["search"], ["ingest"],
         None),
    ],
    ids=["search", "ingest", "both", "on"],
)  # fmt: skip
async def test_the_host_switches_external_memory_off_for_the_whole_deployment(
    tmp_path: Path,
    service: FakeService,
    switches: dict[str, bool],
    routes: list[str],
    offers: list[str],
    reason: str | None,
) -> None:
    strategy = SelectAll()
    runner = MemoryCompositionRunner(switches=switches)
    for entry in ("mem", "mem2"):
        await runner.mount(nexent, instance_id=entry, config=settings(tmp_path, service.url))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        view = turn.view
        await turn.release()
    # every instance at once: the switch is the deployment's, not an entry's
    assert sorted(r.route_id for r in view.routes) == sorted(routes * 2)
    assert sorted(o.action_id for o in view.offers) == sorted(offers * 2)
    assert {r for _, r in reasons(strategy)} == {reason}
    if reason is not None:
        said = [d.message for d in view.diagnostics if d.key == "source:mem"]
        assert said == [
            f"Memory Source source:mem is {'unavailable' if not routes and not offers else 'degraded'} ({reason})"
        ]


async def test_a_profile_switches_external_memory_off_and_a_host_switches_it_back(
    tmp_path: Path, service: FakeService
) -> None:
    profile = tmp_path / "mnemon.toml"
    entry = settings(tmp_path, service.url)
    profile.write_text(
        "[switches]\n"
        '"external-memory.ingest" = false\n'
        "[strategy]\n"
        'use = "general"\n'
        "[[entries]]\n"
        'id = "general"\n'
        'plugin = "general"\n'
        "[[entries]]\n"
        'id = "mem"\n'
        'use = "mnemon_source_nexent"\n'
        "[entries.config]\n"
        f"plugin_dir = {str(entry['plugin_dir'])!r}\n"
        "nexent_shim = true\n"
        f"data_dir = {str(tmp_path)!r}\n"
        "[entries.config.plugin]\n"
        'name = "reference"\n'
        f"endpoint = {service.url!r}\n"
        f"api_key = {API_KEY!r}\n",
        encoding="utf-8",
    )
    loaded = load_profile(profile)
    assert loaded.settings.switches == {"external-memory.ingest": False}
    async with loaded.open_host() as host:
        async with host.turn(scope=SCOPE) as turn:
            assert [o.action_id for o in turn.view.offers] == []
            assert [r.route_id for r in turn.view.routes] == ["search"]
        await host.reconfigure(switches={})
        async with host.turn(scope=SCOPE) as turn:
            assert [o.action_id for o in turn.view.offers] == ["ingest"]
