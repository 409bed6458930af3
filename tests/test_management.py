"""The management plane: a catalog without data, confirmed and revision-fenced mutations."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from mnemon import ManagementError, ManagementResult, MemoryHost, RevisionConflict, SourceError
from mnemon.sdk import (
    FactsRequest,
    ManageRequest,
    ProjectionRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    define_memory_source,
)
from tests.kit import Plugin, strategy_plugin

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
        "additionalProperties": False}  # fmt: skip
NOTHING = {"type": "object", "properties": {}, "additionalProperties": False}
MANIFEST = {
    "type_id": "ledger",
    "package_name": "mnemon-test-ledger",
    "role": "notes",
    "capabilities": ["project", "write"],
    "consistency": "exact-snapshot",
    "management": {
        "label": "Ledger",
        "description": "Per-user text.",
        "fields": [
            {"id": "api-token", "label": "API token", "input": "secret"},
            {"id": "mode", "label": "Mode", "input": "select", "options": ["fast", "safe"]},
        ],
        "operations": [
            {
                "id": "show",
                "kind": "read",
                "description": "Show the text.",
                "input_schema": NOTHING,
            },
            {"id": "set", "kind": "mutate", "description": "Set the text.", "input_schema": TEXT},
        ],
    },
}


class Ledger:
    """Text per user, with a revision per user; the secret lives only in configuration."""

    def __init__(self, init: SourceInit, store: dict[str, list[str]]) -> None:
        self.key = init.instance_key
        self.token = init.configuration.get("token")
        self.store = store
        self.seen: list[ManageRequest] = []

    def _user(self, scope: Any) -> str:
        return scope.user_id or "-"

    def _revision(self, user: str) -> str:
        return f"r{len(self.store.get(user, []))}"

    async def facts(self, request: FactsRequest) -> SourceFacts:
        return SourceFacts(
            instance_key=self.key,
            type_id="ledger",
            role="notes",
            availability="ready",
            revision=self._revision(self._user(request.scope)),
            capabilities=("project",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        history = self.store.get(self._user(request.scope), [])
        text = history[-1] if history else ""
        fragments = [{"source_key": self.key, "mode": request.mode, "text": text}] if text else []
        return ViewContribution.model_validate({"fragments": fragments})

    async def manage(self, request: ManageRequest) -> ManagementResult | Any:
        self.seen.append(request)
        user = self._user(request.scope)
        history = self.store.setdefault(user, [])
        if request.operation.id == "show":
            return {"text": history[-1] if history else "", "revision": self._revision(user)}
        if request.expected_revision != self._revision(user):  # re-checked under "our lock"
            raise RevisionConflict("revision conflict")
        history.append(request.input["text"])
        return ManagementResult(
            source_key=self.key,
            operation="set",
            output={"ok": True},
            revision=self._revision(user),
        )


def ledger_plugin(store: dict[str, list[str]], kind: type[Ledger] = Ledger) -> Plugin:
    return Plugin(sources=[define_memory_source(MANIFEST, lambda init: kind(init, store))])


async def open_host(
    store: dict[str, list[str]], kind: type[Ledger] = Ledger, **host: Any
) -> MemoryHost:
    memory = MemoryHost(**host)
    plugin = ledger_plugin(store, kind)
    await memory.mount(plugin, instance_id="ledger", config={"token": "tok-SECRET-9"})
    await memory.mount(strategy_plugin(), instance_id="strategy")
    return memory


async def test_the_catalog_lists_forms_and_operations_never_data() -> None:
    store = {"u1": ["private text"]}
    host = await open_host(store)
    catalog = host.management_catalog()
    async with host.turn(scope={"user_id": "u1"}):
        pass
    await host.dispose()
    assert [entry.source_key for entry in catalog] == ["source:ledger"]
    entry = catalog[0]
    assert [op.id for op in entry.operations] == ["show", "set"]
    assert [field.input for field in entry.fields] == ["secret", "select"]
    dumped = "".join(e.model_dump_json() for e in catalog)
    assert "tok-SECRET-9" not in dumped
    assert "private text" not in dumped
    assert "grant" not in dumped


async def test_an_unconfirmed_mutation_is_rejected() -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store)
    client = host.management_client("source:ledger", {"user_id": "u1"})
    with pytest.raises(ManagementError, match="confirm it") as caught:
        await client.mutate("set", {"text": "x"}, expected_revision="r0")
    assert caught.value.code == "unconfirmed"
    await host.dispose()
    assert store == {}


async def test_a_stale_expected_revision_raises_revision_conflict() -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store)
    client = host.management_client("source:ledger", {"user_id": "u1"})
    assert await client.revision() == "r0"
    result = await client.mutate("set", {"text": "first"}, confirmed=True, expected_revision="r0")
    assert (result.output, result.revision) == ({"ok": True}, "r1")
    with pytest.raises(RevisionConflict, match="revision conflict"):
        await client.mutate("set", {"text": "second"}, confirmed=True, expected_revision="r0")
    with pytest.raises(ManagementError, match="needs the expected revision"):
        await client.mutate("set", {"text": "third"}, confirmed=True)
    assert await client.read("show") == {"text": "first", "revision": "r1"}
    await host.dispose()
    assert store == {"u1": ["first"]}


async def test_a_clients_scope_is_captured_at_creation() -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store)
    scope = {"user_id": "u1"}
    client = host.management_client("source:ledger", scope)
    scope["user_id"] = "intruder"
    await client.mutate("set", {"text": "mine"}, confirmed=True, expected_revision="r0")
    other = host.management_client("source:ledger", {"user_id": "u2"})
    assert await other.read("show") == {"text": "", "revision": "r0"}
    await host.dispose()
    assert client.scope.user_id == "u1"
    assert store == {"u1": ["mine"], "u2": []}


async def test_the_capability_ceiling_does_not_bind_management() -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store, source_capabilities={"*": ["status"]})
    async with host.turn(scope={"user_id": "u1"}) as turn:
        assert turn.view.fragments == ()
    client = host.management_client("source:ledger", {"user_id": "u1"})
    await client.mutate("set", {"text": "allowed"}, confirmed=True, expected_revision="r0")
    await host.dispose()
    assert store == {"u1": ["allowed"]}


@pytest.mark.parametrize(
    ("key", "operation", "payload", "message"),
    [
        ("source:nobody", "show", {}, "has no management plane"),
        ("source:ledger", "erase", {}, "no management operation 'erase'"),
        ("source:ledger", "set", {"text": 5}, "property 'text': fails type"),
        ("source:ledger", "set", {"text": "x", "extra": True}, "unsupported property 'extra'"),
    ],
    ids=["unknown-source", "unknown-operation", "wrong-type", "extra-property"],
)
async def test_bad_management_requests_are_refused(
    key: str, operation: str, payload: dict[str, Any], message: str
) -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store)
    with pytest.raises(ManagementError, match=message):
        await host.execute_management(
            {
                "source_key": key,
                "operation": operation,
                "input": payload,
                "confirmed": True,
                "expected_revision": "r0",
            }
        )
    await host.dispose()
    assert store == {}


class FailingLedger(Ledger):
    """A Ledger whose `set` never finishes, or fails with memory text and a secret in hand."""

    async def manage(self, request: ManageRequest) -> ManagementResult | Any:
        text = request.input.get("text", "") if request.operation.id == "set" else ""
        if text == "never answers":
            await anyio.sleep_forever()
        if text.startswith("crash"):
            raise RuntimeError(f"cannot store {text!r} with {self.token}")
        if text.startswith("busy"):
            raise SourceError("rate_limited", f"{text} is queued", retry_after=2)
        return await super().manage(request)


async def test_a_mutation_past_the_deadline_is_a_retryable_timeout_and_stores_nothing() -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store, FailingLedger, source_timeout=0.05)
    client = host.management_client("source:ledger", {"user_id": "u1"})
    with pytest.raises(ManagementError) as caught:
        await client.mutate(
            "set", {"text": "never answers"}, confirmed=True, expected_revision="r0"
        )
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)
    assert str(caught.value) == (
        "management source:ledger/set: Memory Source source:ledger manage() timed out"
    )
    # the Source's call was cancelled, not left running: the next mutation is served at once
    await client.mutate("set", {"text": "kept"}, confirmed=True, expected_revision="r0")
    await host.dispose()
    assert store == {"u1": ["kept"]}


async def test_a_failing_mutation_is_reported_without_its_text_or_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store: dict[str, list[str]] = {}
    host = await open_host(store, FailingLedger)
    client = host.management_client("source:ledger", {"user_id": "u1"})
    with caplog.at_level(logging.INFO, logger="mnemon"):
        with pytest.raises(ManagementError) as crashed:
            await client.mutate(
                "set", {"text": "crash diary"}, confirmed=True, expected_revision="r0"
            )
        with pytest.raises(ManagementError) as busy:
            await client.mutate(
                "set", {"text": "busy diary"}, confirmed=True, expected_revision="r0"
            )
    await host.dispose()
    assert (crashed.value.code, crashed.value.retryable) == ("source-failed", False)
    # a SourceError keeps its code and retry advice; its message stays with the Source
    assert (busy.value.code, busy.value.retryable, busy.value.retry_after) == (
        "rate_limited",
        True,
        2.0,
    )
    shown = [str(crashed.value), str(busy.value), caplog.text]
    assert all("diary" not in text and "tok-SECRET-9" not in text for text in shown)
    assert "source:ledger/set" in str(crashed.value)
    assert store == {}
