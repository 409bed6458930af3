"""Nexent providers as their authors write them: the call shapes, answers, tenants and telemetry.

Every provider here is written against Nexent's own modules (`nexent.memory.models`,
`nexent.memory.providers.retry`), never against mnemon's copies of them.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mnemon_source_nexent as nexent
import pytest
from nexent_fake import PLUGINS, FakeService

from mnemon import ActionError, RouteError, hookimpl
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


def provider_folder(root: Path, name: str, code: str, **manifest: Any) -> Path:
    """A plugin folder with `plugin.yaml` and `provider.py` holding `code` (class `Provider`)."""
    folder = root / name
    folder.mkdir(parents=True)
    lines = [
        f"name: {name}",
        'version: "0.1.0"',
        "entry_point: provider.py",
        "class_name: Provider",
        f"implements: {manifest.pop('implements', '[searchable, ingestible]')}",
    ]
    lines += [f"{key}: {value}" for key, value in manifest.items()]
    (folder / "plugin.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "provider.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return folder


async def runner_for(
    tmp_path: Path, plugin_dir: Path, plugin: dict[str, Any], **extra: Any
) -> tuple[MemoryCompositionRunner, SelectAll]:
    strategy = SelectAll()
    runner = MemoryCompositionRunner(observers=extra.pop("observers", ()))
    config = {"plugin_dir": str(plugin_dir), "plugin": plugin, "data_dir": str(tmp_path), **extra}
    await runner.mount(nexent, instance_id="mem", config=config)
    await runner.mount(strategy, instance_id="all", config={"required": False})
    return runner, strategy


def reasons(strategy: SelectAll) -> set[tuple[str, str | None]]:
    return {(c.facts.availability, c.facts.reason) for c in strategy.seen}


# ---------------------------------------------------------------- the call shapes


RECORDING = """
from nexent.memory.models import (
    MemoryIngestResult, MemorySearchResult, UnitIngestResult, UnitIngestStatus,
)

CALLS = []


class Provider:
    def __init__(self, config):
        CALLS.append(("init", dict(config)))

    @property
    def provider_name(self):
        return "recording"

    async def search(self, request, limit=5, filters=None):
        CALLS.append(("search", request, limit, filters))
        return [
            MemorySearchResult(external_id=f"r{i}", content=f"note {i}", score=1.0 / (i + 1),
                               source="recording", is_external=True)
            for i in range(limit)
        ]

    async def ingest(self, request):
        CALLS.append(("ingest", request))
        results = [UnitIngestResult(unit_id=u.event_id, status=UnitIngestStatus.ACCEPTED)
                   for u in request.units]
        return MemoryIngestResult(provider="recording", status="ok",
                                  accepted_count=len(results), unit_results=results)
"""


def imported(folder: Path) -> Any:
    """The provider module the host imported from the plugin folder `folder`."""
    [module] = [
        m
        for key, m in sys.modules.items()
        if key.startswith("_mnemon_nexent_plugins.") and Path(m.__file__ or "").parent == folder
    ]
    return module


async def test_the_route_limit_and_filters_reach_search_and_the_request_is_nexents(
    tmp_path: Path,
) -> None:
    provider_folder(tmp_path / "plugins", "recording", RECORDING)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "recording"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        evidence = await turn.execute_route(
            "source:mem/search", {"query": "tea", "top_k": 3, "filters": {"kind": "fact"}}
        )
        plain = await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    [_, request, limit, filters], [_, _, default_limit, no_filters] = [
        c for c in imported(tmp_path / "plugins" / "recording").CALLS if c[0] == "search"
    ]
    assert (limit, filters) == (3, {"kind": "fact"})
    # without top_k: the default, within what the View lets the route return
    assert no_filters is None
    assert 1 <= default_limit <= 10
    assert (request.query, request.tenant_id, request.user_id, request.agent_id) == (
        "tea",
        "acme",
        "ada",
        "planner",
    )
    assert (request.conversation_id, request.top_k, request.limit) == ("s-9", 3, 3)
    assert [i.id for i in evidence.items] == ["r0", "r1", "r2"]
    assert len(plain.items) == default_limit
    assert evidence.items[0].provenance["is_external"] is True


async def test_the_constructor_gets_the_parameters_and_timeout_seconds(tmp_path: Path) -> None:
    provider_folder(
        tmp_path / "plugins",
        "recording",
        RECORDING,
        config_schema="[{key: region, type: string, default: eu}, {key: api_key, type: secret}]",
    )
    plugin = {"name": "recording", "api_key": API_KEY}
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", plugin, timeout_seconds=4)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    [(_, config)] = [
        c for c in imported(tmp_path / "plugins" / "recording").CALLS if c[0] == "init"
    ]
    # as Nexent's build_provider: `plugin.` stripped, `name` not passed, the instance's timeout
    assert config == {"region": "eu", "api_key": API_KEY, "timeout_seconds": 4.0}


async def test_units_are_nexents_and_a_provider_without_filters_still_searches(
    tmp_path: Path,
) -> None:
    code = RECORDING.replace("async def search(self, request, limit=5, filters=None)",
                             "async def search(self, request, limit=5)")  # fmt: skip
    code = code.replace("CALLS.append((\"search\", request, limit, filters))",
                        "CALLS.append((\"search\", request, limit, None))")  # fmt: skip
    provider_folder(tmp_path / "plugins", "older", code)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "older"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        found = await turn.execute_route("source:mem/search", {"query": "tea", "top_k": 2})
        with pytest.raises(RouteError) as refused:
            await turn.execute_route("source:mem/search", {"query": "tea", "filters": {"a": 1}})
        receipt = await turn.execute_action(
            "source:mem/ingest",
            {"units": [{"content": "Ada likes tea", "role": "user"}, {"content": "ok", "role": "assistant"}]},
            allow,
            idempotency_key="k-7",
        )  # fmt: skip
        await turn.release()
    assert len(found.items) == 2
    assert refused.value.code == "invalid_payload"
    assert receipt.completion == "accepted"
    [(_, request)] = [c for c in imported(tmp_path / "plugins" / "older").CALLS if c[0] == "ingest"]
    assert request.idempotency_key == "k-7"
    assert [(u.unit_type, u.unit_content, u.unit_index) for u in request.units] == [
        ("user", "Ada likes tea", 0),
        ("agent", "ok", 1),
    ]
    assert len({u.event_id for u in request.units}) == 2
    assert {u.event_type for u in request.units} == {"message"}


# ---------------------------------------------------------------- answers that break the contract


BROKEN_INGEST = """
from nexent.memory.models import MemoryIngestResult, UnitIngestResult, UnitIngestStatus


class Provider:
    def __init__(self, config):
        self.mode = config["mode"]

    async def search(self, request, limit=5, filters=None):
        return [{"content": "a dict is not a result"}] if self.mode == "dict" else "nothing"

    async def ingest(self, request):
        units = [UnitIngestResult(unit_id=u.event_id, status=UnitIngestStatus.ACCEPTED)
                 for u in request.units]
        if self.mode == "missing":
            units = units[:-1]
        if self.mode == "renamed":
            units = [UnitIngestResult(unit_id="u0", status=u.status) for u in units]
        counted = len(units) + (1 if self.mode == "counts" else 0)
        return MemoryIngestResult(provider="broken", status="ok", accepted_count=counted,
                                  unit_results=units)
"""


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("missing", "one unit result per unit"),
        ("renamed", "named by its event_id"),
        ("counts", "counts disagree"),
    ],
)
async def test_an_ingest_answer_that_breaks_the_contract_is_refused_and_said_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str, words: str
) -> None:
    provider_folder(tmp_path / "plugins", "broken", BROKEN_INGEST)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "broken", "mode": mode})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(ActionError) as refused:
            await turn.execute_action(
                "source:mem/ingest", {"units": [{"content": "a"}, {"content": "b"}]}, allow
            )
        await turn.release()
    assert refused.value.code == "schema_mismatch"
    assert words in "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    # the provider ran: something may have been stored, so the receipt claims nothing
    assert refused.value.receipt is not None
    assert refused.value.receipt.completion == "unknown"


async def test_a_search_answer_that_is_not_results_is_refused(tmp_path: Path) -> None:
    provider_folder(tmp_path / "plugins", "broken", BROKEN_INGEST)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "broken", "mode": "x"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(RouteError) as refused:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    assert refused.value.code == "schema_mismatch"


# ---------------------------------------------------------------- tenants


async def test_each_tenant_has_its_own_instance_credentials_and_access_state(
    tmp_path: Path, service: FakeService
) -> None:
    plugin = {"name": "reference", "endpoint": service.url, "api_key": API_KEY}
    tenants = {"globex": {"plugin": {"api_key": "sk-globex-000000000000"}}}
    runner, _strategy = await runner_for(tmp_path, PLUGINS, plugin, tenants=tenants)
    globex = {**SCOPE, "tenant_id": "globex"}
    async with runner:
        for scope in (SCOPE, globex):
            turn = await runner.begin_turn({"scope": scope})
            await turn.execute_route("source:mem/search", {"query": "tea"})
            await turn.release()
        keys = [headers["Authorization"] for _, _, headers in service.requests]
        assert keys == [f"Bearer {API_KEY}", "Bearer sk-globex-000000000000"]
        # globex's credential is refused: only globex's instance switches off
        turn = await runner.begin_turn({"scope": globex})
        service.fail_next(401)
        with pytest.raises(RouteError):
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
        turn = await runner.begin_turn({"scope": globex})
        assert turn.view.routes == ()
        await turn.release()
        turn = await runner.begin_turn({"scope": SCOPE})
        assert [r.route_id for r in turn.view.routes] == ["search"]
        await turn.release()
        status = await runner.management_client("source:mem", globex).read("status", {})
    assert status["disabled"] == "unauthorized"
    assert status["config"]["api_key"] == "sk-***0000"


async def test_a_tenant_switched_off_or_not_listed_is_not_served(
    tmp_path: Path, service: FakeService
) -> None:
    plugin = {"name": "reference", "endpoint": service.url, "api_key": API_KEY}
    tenants = {"acme": {"enabled": False}, "globex": {}}
    runner, strategy = await runner_for(
        tmp_path, PLUGINS, plugin, tenants=tenants, tenants_only=True
    )
    async with runner:
        for tenant in ("acme", "globex", "initech"):
            turn = await runner.begin_turn({"scope": {**SCOPE, "tenant_id": tenant}})
            await turn.release()
    assert reasons(strategy) == {
        ("unavailable", "provider-disabled"),
        ("ready", None),
        ("unavailable", "tenant-not-configured"),
    }


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("key", "value"),
    [("endpoint", "not a url"), ("endpoint", 42), ("api_key", 12345), ("limit", "many")],
)
async def test_a_value_of_the_wrong_type_makes_the_provider_misconfigured(
    tmp_path: Path, service: FakeService, caplog: pytest.LogCaptureFixture, key: str, value: Any
) -> None:
    folder = tmp_path / "plugins" / "reference"
    folder.mkdir(parents=True)
    (folder / "provider.py").write_bytes((PLUGINS / "reference" / "provider.py").read_bytes())
    manifest = (PLUGINS / "reference" / "plugin.yaml").read_text(encoding="utf-8")
    manifest += "  - key: limit\n    type: integer\n    required: false\n"
    (folder / "plugin.yaml").write_text(manifest, encoding="utf-8")
    plugin = {"name": "reference", "endpoint": service.url, "api_key": API_KEY, key: value}
    runner, strategy = await runner_for(tmp_path, tmp_path / "plugins", plugin)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
    assert reasons(strategy) == {("unavailable", "provider-misconfigured")}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{key}: must be" in logged
    assert str(value) not in logged
    assert API_KEY not in logged


async def test_text_forms_of_numbers_and_booleans_are_accepted(tmp_path: Path) -> None:
    provider_folder(
        tmp_path / "plugins",
        "recording",
        RECORDING,
        config_schema="[{key: top, type: number}, {key: verbose, type: boolean}]",
    )
    plugin = {"name": "recording", "top": "2.5", "verbose": "true"}
    runner, strategy = await runner_for(tmp_path, tmp_path / "plugins", plugin)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
    assert reasons(strategy) == {("ready", None)}


@pytest.mark.parametrize("broken", ["manifest", "name"])
async def test_status_never_shows_a_secret_it_cannot_tell_from_the_schema(
    tmp_path: Path, service: FakeService, broken: str
) -> None:
    folder = tmp_path / "plugins" / "reference"
    folder.mkdir(parents=True)
    for name in ("plugin.yaml", "provider.py"):
        (folder / name).write_bytes((PLUGINS / "reference" / name).read_bytes())
    if broken == "manifest":
        (folder / "plugin.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    plugin = {
        "name": "reference" if broken == "manifest" else "refrence",
        "endpoint": service.url,
        "api_key": API_KEY,
    }
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", plugin)
    async with runner:
        status = await runner.management_client("source:mem", SCOPE).read("status", {})
    assert API_KEY not in str(status)
    assert status["config"]["api_key"] == "sk-***cdef"
    # a broken plugin of that name says why; a name no plugin has is not found
    expected = "provider-invalid-yaml" if broken == "manifest" else "provider-not-found"
    assert status["problem"] == expected


async def test_a_plugin_missing_its_class_name_says_missing_field(
    tmp_path: Path, service: FakeService
) -> None:
    folder = tmp_path / "plugins" / "reference"
    folder.mkdir(parents=True)
    for name in ("plugin.yaml", "provider.py"):
        (folder / name).write_bytes((PLUGINS / "reference" / name).read_bytes())
    manifest = folder / "plugin.yaml"
    kept = [line for line in manifest.read_text(encoding="utf-8").splitlines()
            if not line.startswith("class_name:")]  # fmt: skip
    manifest.write_text("\n".join(kept) + "\n", encoding="utf-8")
    plugin = {"name": "reference", "endpoint": service.url, "api_key": API_KEY}
    runner, strategy = await runner_for(tmp_path, tmp_path / "plugins", plugin)
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
        status = await runner.management_client("source:mem", SCOPE).read("status", {})
    assert reasons(strategy) == {("unavailable", "provider-missing-field")}
    assert list(status["problems"]) == [
        {"folder": "reference", "code": "missing_field", "field": "class_name"}
    ]


# ---------------------------------------------------------------- telemetry and the debug log


class Recorder:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    @hookimpl
    def mnemon_observe_source_operation(
        self,
        type_id: str,
        name: str,
        operation: str,
        outcome: str,
        error_code: str | None,
        counts: Any,
        attributes: Any,
    ) -> None:
        self.seen.append(
            {
                "name": name,
                "operation": operation,
                "outcome": outcome,
                "error_code": error_code,
                "counts": dict(counts),
                "attributes": dict(attributes),
            }
        )


async def test_provider_calls_are_reported_under_nexents_span_name(
    tmp_path: Path, service: FakeService
) -> None:
    recorder = Recorder()
    service.reject_types = {"image"}
    plugin = {"name": "reference", "endpoint": service.url, "api_key": API_KEY}
    runner, _ = await runner_for(tmp_path, PLUGINS, plugin, observers=[recorder])
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.execute_action(
            "source:mem/ingest",
            {"units": [{"content": "tea"}, {"content": "pic", "unit_type": "image"}]},
            allow,
        )
        await turn.execute_route("source:mem/search", {"query": "tea"})
        service.fail_next(429, {"Retry-After": "3"})
        with pytest.raises(RouteError):
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    assert {r["name"] for r in recorder.seen} == {nexent.SPAN_NAME}
    ingest, search, throttled = recorder.seen
    assert ingest["counts"] == {"units_accepted": 1, "units_rejected": 1, "units_degraded": 0}
    assert (search["operation"], search["outcome"], search["counts"]) == (
        "search",
        "ok",
        {"results": 1},
    )
    assert (throttled["outcome"], throttled["error_code"]) == ("failed", "rate_limited")
    # low-cardinality only: the provider's name, never a query, an id or a key
    assert {tuple(r["attributes"].items()) for r in recorder.seen} == {(("provider", "reference"),)}
    assert "ada" not in str(recorder.seen)
    assert "tea" not in str(recorder.seen)


UNKNOWN_FAILURE = """
from nexent.memory.models import ProviderError, ProviderErrorCode, ProviderErrorSeverity
from nexent.memory.providers.retry import RetryableProviderError


class Provider:
    def __init__(self, config):
        pass

    async def search(self, request, limit=5, filters=None):
        error = ProviderError(code=ProviderErrorCode.UNKNOWN, message="boom tok-9",
                              severity=ProviderErrorSeverity.RETRYABLE)
        raise RetryableProviderError("upstream said tok-9", error)

    async def ingest(self, request):
        raise ValueError("not a Nexent exception tok-9")
"""


async def test_the_debug_log_names_the_exception_class_and_origin_code(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mnemon")
    provider_folder(tmp_path / "plugins", "unknown", UNKNOWN_FAILURE)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "unknown"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(RouteError) as failed:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        with pytest.raises(ActionError) as raised:
            await turn.execute_action("source:mem/ingest", {"units": [{"content": "a"}]}, allow)
        await turn.release()
    assert (failed.value.code, failed.value.kind, failed.value.origin_code) == (
        "unknown",
        "transient",
        "unknown",
    )
    assert raised.value.code == "provider_error"
    debug = [r.getMessage() for r in caplog.records if r.name == "mnemon.sources.nexent"]
    assert "the Nexent provider search raised RetryableProviderError (origin code unknown)" in debug
    said = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert "tok-9" not in said + str(failed.value) + str(raised.value)


# ---------------------------------------------------------------- the real Nexent installed


REAL_NEXENT = {
    "nexent/__init__.py": "",
    "nexent/memory/__init__.py": "",
    "nexent/memory/providers/__init__.py": "",
    "nexent/memory/models.py": """
        from enum import Enum
        from pydantic import BaseModel

        class ProviderErrorCode(str, Enum):
            UNAUTHORIZED = "unauthorized"
            RATE_LIMITED = "rate_limited"

        class ProviderErrorSeverity(str, Enum):
            RETRYABLE = "retryable"
            NON_RETRYABLE = "non_retryable"

        class ProviderError(BaseModel):
            code: ProviderErrorCode
            message: str
            severity: ProviderErrorSeverity
            retry_after_seconds: int | None = None

        class MemorySearchRequest(BaseModel):
            query: str
            tenant_id: str
            user_id: str
            agent_id: str | None = None
            conversation_id: str | None = None
            top_k: int = 5
            limit: int = 5
            installed: str = "the real one"
    """,
    "nexent/memory/providers/retry.py": """
        from ..models import ProviderError

        class NonRetryableProviderError(Exception):
            def __init__(self, message, error):
                super().__init__(message)
                self.error = error

        class RetryableProviderError(Exception):
            def __init__(self, message, error):
                super().__init__(message)
                self.error = error
    """,
}

USES_REAL = """
from nexent.memory.models import ProviderError, ProviderErrorCode, ProviderErrorSeverity
from nexent.memory.providers.retry import NonRetryableProviderError, RetryableProviderError

SEEN = []


class Provider:
    def __init__(self, config):
        pass

    async def search(self, request, limit=5, filters=None):
        SEEN.append(request.installed)
        if request.query == "throttle":
            error = ProviderError(code=ProviderErrorCode.RATE_LIMITED, message="slow down",
                                  severity=ProviderErrorSeverity.RETRYABLE, retry_after_seconds=2)
            raise RetryableProviderError("429", error)
        error = ProviderError(code=ProviderErrorCode.UNAUTHORIZED, message="bad key",
                              severity=ProviderErrorSeverity.NON_RETRYABLE)
        raise NonRetryableProviderError("401", error)

    async def ingest(self, request):
        raise AssertionError("not called")
"""


@pytest.fixture
def real_nexent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `nexent` package on the path standing for the real SDK, and no shim in the way."""
    root = tmp_path / "site"
    for name, text in REAL_NEXENT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    for name in [m for m in sys.modules if m == "nexent" or m.startswith("nexent.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m == "nexent" or m.startswith("nexent.")]:
        del sys.modules[name]


async def test_with_the_real_nexent_installed_its_own_classes_are_used_and_mapped(
    tmp_path: Path, real_nexent: Path
) -> None:
    provider_folder(tmp_path / "plugins", "real", USES_REAL)
    runner, _strategy = await runner_for(tmp_path, tmp_path / "plugins", {"name": "real"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        with pytest.raises(RouteError) as throttled:
            await turn.execute_route("source:mem/search", {"query": "throttle"})
        with pytest.raises(RouteError) as refused:
            await turn.execute_route("source:mem/search", {"query": "tea"})
        await turn.release()
    assert not getattr(sys.modules["nexent"], "__mnemon_shim__", False)
    assert (throttled.value.code, throttled.value.retry_after) == ("rate_limited", 2.0)
    assert (refused.value.code, refused.value.kind) == ("unauthorized", "access")
    # the request was built from the installed package's own model
    assert imported(tmp_path / "plugins" / "real").SEEN == ["the real one", "the real one"]


async def test_a_long_memory_is_an_excerpt_within_the_routes_item_ceiling(tmp_path: Path) -> None:
    code = RECORDING.replace('content=f"note {i}"', 'content=f"note {i} " + "tea " * 20_000')
    provider_folder(tmp_path / "plugins", "long", code)
    runner, _ = await runner_for(tmp_path, tmp_path / "plugins", {"name": "long"})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        [route] = turn.view.routes
        found = await turn.execute_route("source:mem/search", {"query": "tea", "top_k": 1})
        await turn.release()
    [item] = found.items  # kept, not left out whole
    assert len(item.text) <= route.max_item_characters
    assert item.text.startswith("note 0 tea")
    assert item.provenance["excerpt"] is True
