"""The `everos` backend: EverOS's HTTP API through `httpx.MockTransport`, end to end."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, ClassVar

import httpx
import mnemon_source_raven as raven
import pytest
from everos_fake import FakeEveros, fake_for, shape
from mnemon_source_raven import BackendContext, BackendServices, Memory
from mnemon_source_raven.everos import EverosBackend, EverosSettings, owner_id, tenant_owner
from mnemon_source_raven.testing import MemoryBackendContract

from mnemon import ActionError, CompositionRejected, RouteError, SourceError
from mnemon_testing import MemoryCompositionRunner, SelectAll, StubSource
from mnemon_testing.conformance import SourceConformance

API_KEY = "evk-live-0123456789abcdef"


def allow(offer: object) -> bool:
    return True


def unique_url() -> str:
    return f"http://everos-{uuid.uuid4().hex[:12]}.test:8000"


def backend(fake: FakeEveros, **config: Any) -> EverosBackend:
    return EverosBackend(EverosSettings.read(config), transport=fake.transport)


def entry(base_url: str, **extra: Any) -> dict[str, Any]:
    backend_config = {"base_url": base_url, **extra.pop("backend_config", {})}
    return {"backend": "everos_fake:make_backend", "backend_config": backend_config, **extra}


async def runner_for(tmp_path: Path, base_url: str, **extra: Any) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    config = {**entry(base_url, **extra), "data_dir": str(tmp_path)}
    await runner.mount(raven, instance_id="ever", config=config)
    await runner.mount(SelectAll(), instance_id="all", config={"required": False})
    return runner


# ---------------------------------------------------------------- Raven's contract


class TestEverosUserTrackContract(MemoryBackendContract):
    def make_backend(self, ctx: BackendContext) -> EverosBackend:
        return backend(FakeEveros(), **ctx.config)


class TestEverosAgentTrackContract(MemoryBackendContract):
    track = "agent"

    def make_backend(self, ctx: BackendContext) -> EverosBackend:
        return backend(FakeEveros(), **ctx.config)


class TestEverosConformance(SourceConformance):
    plugin = raven
    scopes = ({"user_id": "u1"}, {"user_id": "u2", "tenant_id": "acme"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"agent_id": "a1"}
    shared_data_reason = "entries naming one EverOS server share it: the server holds the data"
    secrets: ClassVar[dict[str, str]] = {"backend_config.api_key": API_KEY}

    def configure(self, directory: Path) -> dict[str, Any]:
        # one EverOS per harness folder, so runs never see each other's memories
        url = f"http://everos-{abs(hash(str(directory)))}.test"
        return {**entry(url), "data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "store", {"messages": [{"role": "user", "content": marker}]}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "recall", {"query": marker}


class TestEverosAgentConformance(SourceConformance):
    plugin = raven
    scopes = ({"agent_id": "a1"}, {"agent_id": "a2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"user_id": "u1"}
    shared_data_reason = "entries naming one EverOS server share it: the server holds the data"
    secrets: ClassVar[dict[str, str]] = {"backend_config.api_key": API_KEY}

    def configure(self, directory: Path) -> dict[str, Any]:
        url = f"http://everos-agent-{abs(hash(str(directory)))}.test"
        return {**entry(url), "track": "agent", "data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        # the agent track keeps what the agent itself did: its own (assistant) turns
        return "store", {"messages": [{"role": "assistant", "content": marker}]}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "recall", {"query": marker}


# ---------------------------------------------------------------- recorded shapes


async def test_a_recorded_user_search_becomes_memories_best_first() -> None:
    fake = FakeEveros()
    fake.replies["/api/v1/memory/search"] = shape("search-user.json")
    ever = backend(fake, app_id="crm", project_id="q1", include_profile=True)
    await ever.start()
    found = await ever.recall("tea", user_id="ada", top_k=5)
    await ever.stop()
    [body] = fake.bodies("/api/v1/memory/search")
    assert body == {"query": "tea", "top_k": 5, "user_id": "ada", "app_id": "crm",
                    "project_id": "q1", "include_profile": True}  # fmt: skip
    assert all(isinstance(memory, Memory) for memory in found)
    assert [m.metadata["id"] for m in found] == [
        "ada_profile",  # fetched, not ranked: first
        "ada_ep_20260301_00000002",
        "ada_ep_20260214_00000001",
    ]
    assert found[1].text.startswith("Ada said she switched")  # the summary
    assert found[2].text.startswith("Ada asked for a tea shop")  # no summary: the episode
    assert found[1].score == 0.71
    assert found[1].metadata["session_id"] == "ada.s-7"
    assert "prefers green tea to coffee" in found[0].text
    assert "updated_ms" not in found[0].text


async def test_a_recorded_search_becomes_evidence_through_the_source(tmp_path: Path) -> None:
    url = unique_url()
    fake_for(url).replies["/api/v1/memory/search"] = shape("search-user.json")
    runner = await runner_for(tmp_path, url, top_k=2)
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada", "tenant_id": "acme"}})
        evidence = await turn.execute_route("source:ever/recall", {"query": "green tea"})
        await turn.release()
    [body] = fake_for(url).bodies("/api/v1/memory/search")
    assert (body["user_id"], body["top_k"]) == ("tenant+3Dacme+3Buser+3Dada", 2)
    assert [item.id for item in evidence.items] == [
        "ada_ep_20260301_00000002",
        "ada_ep_20260214_00000001",
    ]
    assert evidence.items[0].text.startswith("Ada said she switched")
    assert dict(evidence.items[0].provenance) == {
        "backend": "make_backend",
        "track": "user",
        "score": 0.71,
        "score_scale": "normalized",
    }


async def test_a_recorded_agent_search_keeps_skills_and_cases_within_top_k() -> None:
    fake = FakeEveros()
    fake.replies["/api/v1/memory/search"] = shape("search-agent.json")
    ever = backend(fake)
    await ever.start()
    found = await ever.recall("meeting room", agent_id="planner", top_k=1)
    both = await ever.recall("meeting room", agent_id="planner", top_k=5)
    await ever.stop()
    assert [m.metadata["type"] for m in found] == ["skill"]
    assert [m.metadata["type"] for m in both] == ["skill", "case"]
    assert both[1].text == (
        "Book a meeting room for the weekly review.\n\n"
        "Rooms on the third floor are free on Friday mornings."
    )
    assert "include_profile" not in fake.bodies("/api/v1/memory/search")[0]


async def test_an_answer_of_another_shape_is_a_schema_mismatch() -> None:
    fake = FakeEveros()
    fake.replies["/api/v1/memory/search"] = {"request_id": "x", "data": {"episodes": "nope"}}
    ever = backend(fake)
    await ever.start()
    with pytest.raises(SourceError) as failed:
        await ever.recall("tea", user_id="ada", top_k=3)
    await ever.stop()
    assert (failed.value.code, failed.value.kind) == ("schema_mismatch", "terminal")


async def test_a_write_answered_in_another_shape_may_have_landed(tmp_path: Path) -> None:
    url = unique_url()
    runner = await runner_for(tmp_path, url)
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        fake_for(url).fail_next(lambda request: httpx.Response(200, text="<html>proxy</html>"))
        with pytest.raises(ActionError) as write:
            await turn.execute_action(
                "source:ever/store", {"messages": [{"role": "user", "content": "x"}]}, allow
            )
        await turn.release()
    receipt: Any = write.value.receipt
    assert (write.value.code, receipt.completion) == ("schema_mismatch", "unknown")


async def test_a_server_without_embeddings_gets_keyword_search() -> None:
    fake = FakeEveros()
    fake.health = shape("health-no-embedding.json")
    ever = backend(fake)
    await ever.start()
    await ever.recall("tea", user_id="ada", top_k=3)
    await ever.recall("rooms", agent_id="planner", top_k=3)
    await ever.stop()
    assert [b["method"] for b in fake.bodies("/api/v1/memory/search")] == ["keyword", "keyword"]


async def test_api_version_v2_uses_the_canonical_prefix() -> None:
    fake = FakeEveros()
    ever = backend(fake, api_version="v2")
    await ever.start()
    await ever.recall("tea", user_id="ada", top_k=3)
    await ever.stop()
    assert [path for _, path, _, _ in fake.requests] == ["/health", "/api/v2/memory/search"]


# ---------------------------------------------------------------- writes


async def test_store_sends_the_add_under_the_scopes_identity(tmp_path: Path) -> None:
    url = unique_url()
    runner = await runner_for(tmp_path, url, backend_config={"app_id": "crm"})
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada", "session_id": "s-9"}})
        messages = [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "I drink green tea."},
            {"role": "assistant", "content": "Noted."},
            {"role": "tool", "content": "lookup result"},
        ]
        first = await turn.execute_action("source:ever/store", {"messages": messages}, allow)
        await turn.release()
        both = {"user_id": "bob", "agent_id": "planner", "tenant_id": "acme", "session_id": "s-1"}
        turn = await runner.begin_turn({"scope": both})
        await turn.execute_action("source:ever/store", {"messages": messages[1:3]}, allow)
        await turn.release()
    fake = fake_for(url)
    adds = fake.bodies("/api/v1/memory/add")
    assert first.completion == "accepted"
    assert adds[0]["session_id"] == "ada.s-9"
    assert adds[0]["app_id"] == "crm"
    assert "project_id" not in adds[0]
    sent = [(m["role"], m["sender_id"], m["content"]) for m in adds[0]["messages"]]
    assert sent == [("user", "ada", "I drink green tea."), ("assistant", "assistant", "Noted.")]
    stamps = [m["timestamp"] for m in adds[0]["messages"]]
    assert stamps == sorted(stamps)
    assert stamps[0] > 10**12  # milliseconds
    # with both ids the assistant's turns are the agent's; the tenant keeps them apart
    senders = [m["sender_id"] for m in adds[1]["messages"]]
    assert senders == ["tenant+3Dacme+3Buser+3Dbob", "tenant+3Dacme+3Bagent+3Dplanner"]
    assert adds[1]["session_id"] == "tenant+3Dacme+3Buser+3Dbob.s-1"
    assert fake.bodies("/api/v1/memory/flush") == []  # EverOS extracts at its own boundaries


async def test_flush_after_store_flushes_and_a_failed_flush_keeps_the_add() -> None:
    fake = FakeEveros()
    ever = backend(fake, user_id="ada", project_id="launch", flush_after_store=True)
    await ever.start()
    await ever.store("s", [{"role": "user", "content": "tea"}])
    calls = len(fake.requests)
    fake.fail_next(lambda request: httpx.Response(200, json=shape("add.json")))
    fake.fail_next(lambda request: httpx.Response(503, json=shape("error-external-service.json")))
    await ever.store("s", [{"role": "user", "content": "more tea"}])
    await ever.stop()
    assert calls == 3  # health, add, flush
    assert fake.bodies("/api/v1/memory/flush")[0] == {"session_id": "ada.s", "project_id": "launch"}
    assert [path for _, path, _, _ in fake.requests][-2:] == [
        "/api/v1/memory/add",
        "/api/v1/memory/flush",
    ]


async def test_store_without_an_identity_is_refused_and_writes_nothing() -> None:
    fake = FakeEveros()
    ever = backend(fake)
    await ever.start()
    with pytest.raises(SourceError) as refused:
        await ever.store("s", [{"role": "user", "content": "tea"}])
    await ever.stop()
    assert (refused.value.code, refused.value.nothing_written) == ("invalid_payload", True)
    assert fake.bodies("/api/v1/memory/add") == []


def test_owner_ids_stay_plain_when_everos_takes_them_and_never_collide() -> None:
    assert owner_id("ada") == "ada"
    assert owner_id("ada.lovelace@example.org") == "ada.lovelace@example.org"
    assert owner_id("tenant=acme;user=ada") == "tenant+3Dacme+3Buser+3Dada"
    assert owner_id("a+b") == "a+2Bb"
    assert owner_id("..") == "+2E+2E"
    assert owner_id("José") == "Jos+C3+A9"
    ids = ["a+b", "a+2Bb", "tenant=acme;user=ada", "tenant+3Dacme+3Buser+3Dada", ".", "+2E"]
    assert len({owner_id(value) for value in ids}) == len(ids)
    # a tenant's ids: the form ids had before each identity got a backend of its own
    assert tenant_owner("acme", "user", "ada") == "tenant+3Dacme+3Buser+3Dada"
    assert tenant_owner(None, "agent", "planner") == "planner"
    assert tenant_owner("a;b", "user", "c") != tenant_owner("a", "user", "b;c")


# ---------------------------------------------------------------- failures


def answer(status: int, name: str | None = None, **headers: str) -> Any:
    return lambda request: httpx.Response(
        status, json=shape(name) if name else {"detail": "x"}, headers=headers
    )


def raise_(error: type[httpx.HTTPError]) -> Any:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error("upstream said: " + API_KEY, request=request)

    return fail


FAILURES = [
    ("401", answer(401), "unauthorized", "access", "http-401", None, "failed"),
    ("403", answer(403), "forbidden", "access", "http-403", None, "failed"),
    ("429", answer(429, None, **{"Retry-After": "7"}), "rate_limited", "transient", "http-429",
     7.0, "unknown"),
    ("422", answer(422, "error-invalid-input.json"), "invalid_payload", "terminal",
     "INVALID_INPUT", None, "failed"),
    ("503", answer(503, "error-external-service.json"), "provider_error", "transient",
     "EXTERNAL_SERVICE_UNAVAILABLE", None, "unknown"),
    ("500", answer(500, "error-internal.json"), "provider_error", "terminal", "INTERNAL_ERROR",
     None, "unknown"),
    ("502", answer(502), "provider_error", "transient", "http-502", None, "unknown"),
    ("timeout", raise_(httpx.ReadTimeout), "timeout", "transient", "timeout", None, "unknown"),
    ("connection", raise_(httpx.ConnectError), "provider_error", "transient", "connection", None,
     "unknown"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("failure", "code", "kind", "origin", "retry_after", "completion"),
    [row[1:] for row in FAILURES],
    ids=[row[0] for row in FAILURES],
)
async def test_failures_map_onto_the_taxonomy(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    failure: Any,
    code: str,
    kind: str,
    origin: str,
    retry_after: float | None,
    completion: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    url = unique_url()
    runner = await runner_for(tmp_path, url, backend_config={"api_key": API_KEY})
    fake = fake_for(url)
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        fake.fail_next(failure)
        with pytest.raises(RouteError) as read:
            await turn.execute_route("source:ever/recall", {"query": "tea"})
        fake.fail_next(failure)
        with pytest.raises(ActionError) as write:
            await turn.execute_action(
                "source:ever/store", {"messages": [{"role": "user", "content": "x"}]}, allow
            )
        await turn.release()
        shown = [str(runner.inspect())]
    error = read.value
    assert (error.code, error.kind, error.origin_code, error.retry_after) == (
        code,
        kind,
        origin,
        retry_after,
    )
    receipt: Any = write.value.receipt
    assert (write.value.code, receipt.completion) == (code, completion)
    assert receipt.detail["origin_code"] == origin
    assert len(fake.bodies("/api/v1/memory/search")) == 1  # no automatic retry
    shown += [str(error), str(write.value), receipt.model_dump_json()]
    shown += [r.getMessage() for r in caplog.records]
    assert API_KEY not in "\n".join(shown)
    assert "upstream said" not in "\n".join(shown)


async def test_the_api_key_is_sent_as_a_bearer_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVEROS_TEST_KEY", API_KEY)
    fake = FakeEveros()
    ever = backend(fake, api_key_env="EVEROS_TEST_KEY")
    await ever.start()
    await ever.recall("tea", user_id="ada", top_k=2)
    await ever.stop()
    assert {h.get("authorization") for _, _, h, _ in fake.requests} == {f"Bearer {API_KEY}"}
    assert API_KEY not in repr(EverosSettings.read({"api_key": API_KEY}))


# ---------------------------------------------------------------- start and configuration


async def test_an_unhealthy_server_fails_the_start_and_the_source_is_unavailable(
    tmp_path: Path,
) -> None:
    url = unique_url()
    fake_for(url).fail_next(answer(503, "error-external-service.json"))
    runner = MemoryCompositionRunner()
    async with runner:
        await runner.mount(raven, instance_id="ever", config=entry(url, data_dir=str(tmp_path)))
        await runner.mount(StubSource(text="other memory"), instance_id="other")
        strategy = SelectAll()
        await runner.mount(strategy, instance_id="all", config={"required": False})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        served = [c.source_key for c in turn.view.consistency]
        await turn.release()
    assert served == ["source:other"]
    reasons = {(c.facts.availability, c.facts.reason) for c in strategy.seen}
    assert ("unavailable", "backend-start-failed") in reasons
    assert [path for _, path, _, _ in fake_for(url).requests] == ["/health"]


async def test_a_health_answer_that_is_not_ok_with_reject_rejects_the_turn(
    tmp_path: Path,
) -> None:
    url = unique_url()
    fake_for(url).health = {"status": "starting"}
    runner = MemoryCompositionRunner()
    config = {**entry(url, on_failure="reject"), "data_dir": str(tmp_path)}
    async with runner:
        await runner.mount(raven, instance_id="ever", config=config)
        await runner.mount(SelectAll(), instance_id="all", config={"required": True})
        with pytest.raises(CompositionRejected):
            await runner.begin_turn({"scope": {"user_id": "ada"}})


async def test_the_built_in_name_reaches_a_real_socket_and_fails_closed(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = {
        "backend": "everos",
        "backend_config": {"base_url": f"http://127.0.0.1:{port}", "timeout_seconds": 2},
        "data_dir": str(tmp_path),
    }
    runner = MemoryCompositionRunner()
    async with runner:
        await runner.mount(raven, instance_id="ever", config=config)
        strategy = SelectAll()
        await runner.mount(strategy, instance_id="all", config={"required": False})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert turn.view.routes == ()
        await turn.release()
    assert ("unavailable", "backend-start-failed") in {
        (c.facts.availability, c.facts.reason) for c in strategy.seen
    }


@pytest.mark.parametrize(
    ("backend_config", "key"),
    [
        ({"base_url": "ftp://example.org"}, "base_url"),
        ({"api_version": "v3"}, "api_version"),
        ({"app_id": "../etc"}, "app_id"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"apikey": API_KEY}, "apikey"),
    ],
    ids=["url", "version", "app-id", "timeout", "unknown-key"],
)
async def test_bad_backend_config_names_the_key_never_the_value(
    tmp_path: Path, backend_config: dict[str, Any], key: str
) -> None:
    config = {"backend": "everos", "backend_config": backend_config, "data_dir": str(tmp_path)}
    runner = MemoryCompositionRunner()
    async with runner:
        with pytest.raises(Exception) as failed:
            await runner.mount(raven, instance_id="ever", config=config)
    messages = []
    error: BaseException | None = failed.value
    while error is not None:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    assert any(f"everos backend_config.{key}" in m for m in messages), messages
    assert not any(API_KEY in m or "../etc" in m for m in messages)


def test_the_factory_reads_its_context() -> None:
    context = BackendContext(
        config={"base_url": "http://127.0.0.1:9"},
        services=BackendServices(workspace=Path(".")),
        logger=logging.getLogger("test"),
    )
    from mnemon_source_raven.everos import make_backend

    made = make_backend(context)
    assert isinstance(made, raven.MemoryBackend)


def test_without_httpx_everos_is_a_no_op_that_says_so_once() -> None:
    script = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s')\n"
        "import mnemon_source_raven as raven\n"
        "assert 'httpx' not in sys.modules, 'imported with the package'\n"
        "raven.resolve_backend_factory('everos')\n"
        "assert 'httpx' in sys.modules\n"
        "sys.modules['httpx'] = None\n"
        "del sys.modules['mnemon_source_raven.everos']\n"
        "make = raven.resolve_backend_factory('everos')\n"
        "ctx = raven.BackendContext(config={}, services=raven.BackendServices(Path('.')))\n"
        "made = [make(ctx), make(ctx)]\n"
        "print(made[0].unavailable_reason, isinstance(made[1], raven.MemoryBackend))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["substrate-missing", "True"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1  # once, however many identities get the no-op
    assert "pip install 'mnemon-source-raven[everos]'" in warnings[0]


async def test_without_httpx_the_everos_source_is_unavailable_and_the_host_serves_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.delitem(sys.modules, "mnemon_source_raven.everos")
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    async with runner:
        # a bad key cannot be checked without the library: the entry still mounts
        config = {"backend": "everos", "backend_config": {"timeout_seconds": 0}}
        await runner.mount(raven, instance_id="ever", config={**config, "data_dir": str(tmp_path)})
        await runner.mount(StubSource(text="other memory"), instance_id="other")
        await runner.mount(strategy, instance_id="all", config={"required": False})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        view = turn.view
        await turn.release()
    assert [c.source_key for c in view.consistency] == ["source:other"]
    assert ("unavailable", "substrate-missing") in {
        (c.facts.availability, c.facts.reason) for c in strategy.seen
    }
    assert not [offer for offer in view.offers if offer.source_key == "source:ever"]
