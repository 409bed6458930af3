"""The raven-backend Source: identity, lifecycle, receipts, evidence and failures, end to end."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_raven as raven
import pytest
import raven_reference
from mnemon_source_raven import BackendContext, register_memory_backend, resolve_memory_backend
from raven_reference import EVENTS, INSTANCES, FileBackend

from mnemon import ActionError, CompositionRejected, DefinitionError, InstallError, RouteError
from mnemon_testing import MemoryCompositionRunner, SelectAll, StubSource

SECRET = "tok-REF-1"


def allow(offer: object) -> bool:
    return True


def config(directory: Path, **extra: Any) -> dict[str, Any]:
    return {"backend": "raven_reference:make_backend", "data_dir": str(directory), **extra}


def made(directory: Path, **identity: str | None) -> list[FileBackend]:
    """The reference backends made under `directory` for one identity, oldest first."""
    tenant = identity.pop("tenant_id", None)
    return [
        backend
        for backend in INSTANCES
        if directory in backend.workspace.parents
        and backend.tenant == tenant
        and all(backend.config.get(k) == v for k, v in identity.items())
    ]


def backend_of(directory: Path, user_id: str = "ada", **identity: str | None) -> FileBackend:
    return made(directory, user_id=user_id, **identity)[-1]


def events_of(backend: FileBackend) -> list[str]:
    return EVENTS[str(backend.workspace)]


async def runner_with(directory: Path, required: bool = True, **extra: Any) -> Any:
    runner = MemoryCompositionRunner()
    await runner.mount(raven, instance_id="raven", config=config(directory, **extra))
    await runner.mount(
        SelectAll(),
        instance_id="all",
        config={"source_keys": ["source:raven"], "required": required},
    )
    return runner


async def store(runner: Any, scope: dict[str, str], text: str, role: str = "user") -> Any:
    turn = await runner.begin_turn({"scope": scope})
    message = {"role": role, "content": text}
    receipt = await turn.execute_action("source:raven/store", {"messages": [message]}, allow)
    await turn.release()
    return receipt


async def recall(runner: Any, scope: dict[str, str], query: str) -> list[str]:
    turn = await runner.begin_turn({"scope": scope})
    evidence = await turn.execute_route("source:raven/recall", {"query": query})
    await turn.release()
    return [item.text for item in evidence.items]


async def test_store_calls_the_contracts_store_and_is_accepted_never_committed(
    tmp_path: Path,
) -> None:
    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada", "session_id": "s-1"}})
        receipt = await turn.execute_action(
            "source:raven/store",
            {
                "messages": [
                    {"role": "user", "content": "Ada prefers tea."},
                    {"role": "assistant", "content": "Noted."},
                ]
            },
            allow,
        )
        [offer] = [offer for offer in turn.view.offers if offer.action_id == "store"]
        await turn.release()
    assert (receipt.completion, receipt.status, receipt.committed_at) == (
        "accepted",
        "succeeded",
        None,
    )
    # store(session_id, messages), exactly: nothing the contract lacks
    assert backend_of(tmp_path).stored == [
        ("s-1", [{"role": "user", "content": "Ada prefers tea."},
                 {"role": "assistant", "content": "Noted."}]),
    ]  # fmt: skip
    assert sorted(offer.input_schema["properties"]) == ["messages"]


async def test_recall_passes_exactly_one_bare_id_and_builds_evidence(tmp_path: Path) -> None:
    async with await runner_with(tmp_path, top_k=4) as runner:
        turn = await runner.begin_turn(
            {"scope": {"user_id": "ada", "agent_id": "planner", "tenant_id": "acme"}}
        )
        await turn.execute_action(
            "source:raven/store", {"messages": [{"role": "user", "content": "green tea"}]}, allow
        )
        evidence = await turn.execute_route("source:raven/recall", {"query": "tea", "top_k": 50})
        await turn.release()
    [item] = evidence.items
    assert item.text == "green tea"
    assert item.id == "m0"  # the backend's metadata.id
    assert dict(item.provenance) == {"backend": "make_backend", "track": "user",
                                     "score": 1.0, "score_scale": "normalized"}  # fmt: skip
    # exactly one id, bare (the tenant is in the backend's own instance), top_k clipped
    backend = backend_of(tmp_path, tenant_id="acme")
    assert backend.recalls[-1] == {"user_id": "ada", "agent_id": None, "top_k": 4}


async def test_each_identity_gets_its_own_backend_made_with_the_scopes_ids(
    tmp_path: Path,
) -> None:
    static = {"user_id": "configured-user", "agent_id": "configured-agent", "colour": "blue"}
    async with await runner_with(tmp_path, backend_config=static) as runner:
        for scope in (
            {"user_id": "ada", "agent_id": "planner"},
            {"user_id": "ada", "tenant_id": "acme"},
            {"user_id": "bob", "tenant_id": "acme", "session_id": "s-1"},
            {"user_id": "ada", "agent_id": "planner", "workspace": "w", "session_id": "s-2"},
        ):
            await recall(runner, scope, "anything")
    backends = [b for b in INSTANCES if tmp_path in b.workspace.parents]
    # the scope's ids replace the configured ones, and one it lacks is not kept either
    assert [(b.tenant, b.config) for b in backends] == [
        (None, {"colour": "blue", "user_id": "ada", "agent_id": "planner"}),
        ("acme", {"colour": "blue", "user_id": "ada"}),
        ("acme", {"colour": "blue", "user_id": "bob"}),
    ]  # the session and the workspace are no part of the identity: one backend for both
    workspaces = {b.workspace for b in backends}
    assert len(workspaces) == 3
    assert {w.parent for w in workspaces} == {tmp_path / "sources" / "raven-backend" / "raven"}
    assert all(w.is_dir() for w in workspaces)


async def test_ada_and_bob_in_two_tenants_never_see_each_others_messages(
    tmp_path: Path,
) -> None:
    ada, bob = {"user_id": "ada", "tenant_id": "acme"}, {"user_id": "bob", "tenant_id": "acme"}
    async with await runner_with(tmp_path) as runner:
        receipt = await store(runner, ada, "Ada keeps the vault code")
        await store(runner, bob, "Bob keeps the bike code")
        assert receipt.completion == "accepted"
        assert await recall(runner, ada, "code") == ["Ada keeps the vault code"]
        assert await recall(runner, bob, "code") == ["Bob keeps the bike code"]
        for elsewhere in ({"user_id": "ada", "tenant_id": "globex"}, {"user_id": "ada"}):
            assert await recall(runner, elsewhere, "code") == []


async def test_a_scope_without_the_tracks_id_is_unavailable_and_makes_no_backend(
    tmp_path: Path,
) -> None:
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    await runner.mount(raven, instance_id="raven", config=config(tmp_path, track="agent"))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert {(c.facts.availability, c.facts.reason) for c in strategy.seen} == {
            ("unavailable", "missing-scope")
        }
        assert turn.view.consistency == ()
        assert not turn.view.routes
        await turn.release()
    assert [b for b in INSTANCES if tmp_path in b.workspace.parents] == []


async def test_start_once_per_identity_and_stop_at_dispose(tmp_path: Path) -> None:
    runner = MemoryCompositionRunner()
    # mounted before the Strategy: the mount-time trial build must not make a backend
    await runner.mount(raven, instance_id="raven", config=config(tmp_path))
    assert made(tmp_path) == []
    await runner.mount(SelectAll(), instance_id="all", config={"required": True})
    for _ in range(3):
        for user in ("ada", "bob"):
            turn = await runner.begin_turn({"scope": {"user_id": user}})
            await turn.release()
    ada, bob = backend_of(tmp_path, "ada"), backend_of(tmp_path, "bob")
    assert (len(made(tmp_path, user_id="ada")), events_of(ada), events_of(bob)) == (
        1,
        ["start"],
        ["start"],
    )
    await runner.dispose()
    assert (events_of(ada), events_of(bob)) == (["start", "stop"], ["start", "stop"])


async def test_the_least_recently_used_idle_backend_is_stopped_beyond_the_maximum(
    tmp_path: Path,
) -> None:
    async with await runner_with(tmp_path, max_backends=2) as runner:
        await store(runner, {"user_id": "ada"}, "Ada likes tea")
        await recall(runner, {"user_id": "bob"}, "tea")
        await recall(runner, {"user_id": "ada"}, "tea")  # ada used last: bob goes next
        await recall(runner, {"user_id": "cy"}, "tea")
        [bob] = made(tmp_path, user_id="bob")
        assert events_of(bob) == ["start", "stop"]
        assert events_of(backend_of(tmp_path, "ada")) == ["start"]
        # bob again: a new backend on bob's workspace, bob's data intact
        await store(runner, {"user_id": "bob"}, "Bob likes coffee")
        assert await recall(runner, {"user_id": "bob"}, "coffee") == ["Bob likes coffee"]
        assert len(made(tmp_path, user_id="bob")) == 2
        assert await recall(runner, {"user_id": "ada"}, "tea") == ["Ada likes tea"]


@dataclass
class SlowRecall:
    """Holds every recall of the backends it makes until `release` is set."""

    entered: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)

    def make(self, ctx: BackendContext) -> FileBackend:
        backend = FileBackend(ctx)
        plain = backend.recall

        async def recall(query: str, **ids: Any) -> Any:
            if ids.get("user_id") == "ada":
                self.entered.set()
                await self.release.wait()
            return await plain(query, **ids)

        backend.recall = recall  # type: ignore[method-assign]
        return backend


async def test_a_backend_with_a_call_in_flight_is_never_stopped_under_it(tmp_path: Path) -> None:
    slow = SlowRecall()
    raven_reference.make_slow = slow.make  # type: ignore[attr-defined]
    async with await runner_with(tmp_path, backend="raven_reference:make_slow", max_backends=1) as (
        runner
    ):
        ada_turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        found: list[Any] = []

        async def ada_recalls() -> None:
            found.append(await ada_turn.execute_route("source:raven/recall", {"query": "x"}))

        async with anyio.create_task_group() as group:
            group.start_soon(ada_recalls)
            with anyio.fail_after(5):
                await slow.entered.wait()
            # bob's turns need a backend of their own while ada's recall runs
            await recall(runner, {"user_id": "bob"}, "x")
            ada = backend_of(tmp_path, "ada")
            assert events_of(ada) == ["start"]
            slow.release.set()
        await ada_turn.release()
        assert found[0].items == ()
        # with its call done, the least recently used one is stopped
        assert events_of(ada) == ["start", "stop"]


async def test_a_failing_start_leaves_the_other_sources_serving(tmp_path: Path) -> None:
    runner = MemoryCompositionRunner()
    async with runner:
        await runner.mount(
            raven, instance_id="raven", config=config(tmp_path, backend_config={"fail_start": True})
        )
        await runner.mount(StubSource(text="other memory"), instance_id="other")
        await runner.mount(SelectAll(), instance_id="all", config={"required": False})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        served = [c.source_key for c in turn.view.consistency]
        await turn.release()
    assert served == ["source:other"]
    # one start, and stop after the failed start
    assert events_of(backend_of(tmp_path)) == ["start", "stop"]


async def test_a_failing_start_with_reject_rejects_a_turn_that_needs_it(tmp_path: Path) -> None:
    extra = {"backend_config": {"fail_start": True}, "on_failure": "reject"}
    async with await runner_with(tmp_path, **extra) as runner:
        with pytest.raises(CompositionRejected):
            await runner.begin_turn({"scope": {"user_id": "ada"}})


async def test_a_backend_exception_is_a_transient_provider_error_never_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with await runner_with(tmp_path, backend_config={"fail_recall": True}) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        with pytest.raises(RouteError) as read:
            await turn.execute_route("source:raven/recall", {"query": "x"})
        backend_of(tmp_path).store = _raising  # type: ignore[method-assign,assignment]
        with pytest.raises(ActionError) as write:
            await turn.execute_action(
                "source:raven/store", {"messages": [{"role": "user", "content": "x"}]}, allow
            )
        await turn.release()
    assert (read.value.code, read.value.kind, read.value.retryable) == (
        "provider_error",
        "transient",
        True,
    )
    receipt: Any = write.value.receipt
    assert (write.value.code, receipt.completion) == ("provider_error", "unknown")
    assert dict(receipt.detail) == {
        "error_code": "provider_error",
        "error_kind": "transient",
        "origin_code": "RuntimeError",  # the exception's class, never its text
    }
    shown = [str(read.value), str(write.value), receipt.model_dump_json()]
    shown += [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert SECRET not in "\n".join(shown)


async def _raising(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError(f"store failed {SECRET}")


async def test_a_store_answering_false_fails_its_receipt(tmp_path: Path) -> None:
    async def refuse(session_id: str, messages: list[dict[str, Any]]) -> bool:
        return False

    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        backend_of(tmp_path).store = refuse  # type: ignore[method-assign,assignment]
        with pytest.raises(ActionError) as write:
            await turn.execute_action(
                "source:raven/store", {"messages": [{"role": "user", "content": "x"}]}, allow
            )
        await turn.release()
    receipt: Any = write.value.receipt
    assert (receipt.completion, receipt.status) == ("failed", "failed")


@dataclass(frozen=True)
class OwnMemory:
    """A backend's own memory type, shaped like Raven's `Memory`."""

    text: Any
    score: Any = 0.5
    metadata: Any = field(default_factory=dict)


async def test_a_backend_may_return_its_own_memory_objects(tmp_path: Path) -> None:
    async def own(query: str, **ids: Any) -> list[Any]:
        return [OwnMemory("plain memory", 1, {"id": "own-1"}), OwnMemory("second", 0.25)]

    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        backend_of(tmp_path).recall = own  # type: ignore[method-assign,assignment]
        evidence = await turn.execute_route("source:raven/recall", {"query": "x"})
        await turn.release()
    assert [(i.id, i.text, i.provenance["score"]) for i in evidence.items] == [
        ("own-1", "plain memory", 1.0),
        (evidence.items[1].id, "second", 0.25),
    ]
    assert evidence.items[1].id.startswith("sha256:")  # no metadata id: a digest of its text


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        ((OwnMemory("x"),), "must return a list"),
        ([OwnMemory(b"bytes")], "text must be a str"),
        ([OwnMemory("x", "high")], "score must be finite"),
        ([OwnMemory("x", True)], "score must be finite"),
        ([OwnMemory("x", math.nan)], "score must be finite"),
        ([OwnMemory("x", math.inf)], "score must be finite"),
        ([OwnMemory("x", 0.5, [("id", "m0")])], "metadata must be a mapping"),
        (["just text"], "text must be a str"),
    ],
    ids=["tuple", "bytes-text", "text-score", "bool-score", "nan", "inf", "list-metadata", "str"],
)
async def test_a_recall_of_another_shape_is_a_schema_mismatch(
    tmp_path: Path, answer: Any, rule: str
) -> None:
    async def odd(query: str, **ids: Any) -> Any:
        return answer

    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        backend_of(tmp_path).recall = odd  # type: ignore[method-assign,assignment]
        with pytest.raises(RouteError) as read:
            await turn.execute_route("source:raven/recall", {"query": "x"})
        await turn.release()
    assert (read.value.code, read.value.kind) == ("schema_mismatch", "terminal")
    assert rule in str(read.value.__cause__)  # the Source's own message, for the host developer


async def test_a_user_only_backend_serves_nothing_on_the_agent_track(tmp_path: Path) -> None:
    extra = {"backend": "raven_reference:make_user_only_backend", "track": "agent"}
    async with await runner_with(tmp_path, **extra) as runner:
        await store(runner, {"agent_id": "planner"}, "tea", role="assistant")
        assert await recall(runner, {"agent_id": "planner"}, "tea") == []


def helped(memory_id: str, **extra: Any) -> dict[str, Any]:
    return {"memory_id": memory_id, "helpful": True, **extra}


async def recalled_ids(turn: Any, query: str) -> list[str]:
    evidence = await turn.execute_route("source:raven/recall", {"query": query})
    return [item.id for item in evidence.items]


async def test_feedback_is_one_dict_naming_recalled_memories_and_the_identity(
    tmp_path: Path,
) -> None:
    scope = {"user_id": "ada", "agent_id": "planner"}
    async with await runner_with(tmp_path) as runner:
        await store(runner, scope, "green tea")
        turn = await runner.begin_turn({"scope": scope})
        assert await recalled_ids(turn, "tea") == ["m0"]
        receipt = await turn.execute_action(
            "source:raven/feedback", {"items": [helped("m0")]}, allow
        )
        await turn.release()
        later = await runner.begin_turn({"scope": scope})  # a later turn may too
        await later.execute_action(
            "source:raven/feedback",
            {"items": [{**helped("m0"), "helpful": False}, helped("m0")]},
            allow,
        )
        await later.release()
    assert receipt.completion == "accepted"
    # one dict per call: the checked items, and whose memories they are, from the scope
    assert backend_of(tmp_path).feedback_seen == [
        {"type": "memory_usage", "items": [{"memory_id": "m0", "helpful": True}],
         "user_id": "ada", "agent_id": "planner"},
        {"type": "memory_usage", "items": [{"memory_id": "m0", "helpful": False},
                                           {"memory_id": "m0", "helpful": True}],
         "user_id": "ada", "agent_id": "planner"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "scope",
    [{"user_id": "bob"}, {"user_id": "ada", "tenant_id": "acme"}],
    ids=["another-user", "same-user-another-tenant"],
)
async def test_feedback_on_a_memory_this_identity_was_not_shown_is_refused(
    tmp_path: Path, scope: dict[str, str]
) -> None:
    async with await runner_with(tmp_path) as runner:
        await store(runner, {"user_id": "ada"}, "green tea")
        await store(runner, scope, "green tea")  # it has an `m0` of its own, never recalled
        ada = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert await recalled_ids(ada, "tea") == ["m0"]  # ada's m0 was shown to ada only
        await ada.release()
        turn = await runner.begin_turn({"scope": scope})
        refusals = []
        for items in ([helped("m0")], [helped("never-recalled")]):
            with pytest.raises(ActionError) as refused:
                await turn.execute_action("source:raven/feedback", {"items": items}, allow)
            refusals.append(refused.value)
        await turn.release()
    for refusal in refusals:
        assert refusal.code == "memory-not-recalled"
        assert getattr(refusal.receipt, "completion", None) == "failed"
        assert "never-recalled" not in str(refusal)
    assert all(b.feedback_seen == [] for b in made(tmp_path))  # nothing reached a backend


@pytest.mark.parametrize(
    "value",
    [
        {"items": [helped("m0", user_id="bob")]},
        {"items": [helped("m0")], "user_id": "bob"},
        {"items": [{"memory_id": "m0"}]},
        {"items": [{**helped("m0"), "helpful": "yes"}]},
        {"items": [{**helped("m0"), "memory_id": 0}]},
        {"items": [helped("m0"), helped("m0", note="x")]},
        {"items": []},
        {"signals": [helped("m0")]},
    ],
    ids=[
        "identity-smuggled-in-an-item",
        "identity-smuggled-beside",
        "missing-helpful",
        "helpful-not-boolean",
        "id-not-string",
        "second-item-extra-key",
        "no-items",
        "a-list-of-signals",
    ],
)
async def test_feedback_input_is_checked_like_any_input(
    tmp_path: Path, value: dict[str, Any]
) -> None:
    async with await runner_with(tmp_path) as runner:
        await store(runner, {"user_id": "ada"}, "green tea")
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert await recalled_ids(turn, "tea") == ["m0"]
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:raven/feedback", value, allow)
        [offer] = [offer for offer in turn.view.offers if offer.action_id == "feedback"]
        await turn.release()
    assert refused.value.code == "invalid-input"
    assert backend_of(tmp_path).feedback_seen == []
    item = offer.input_schema["properties"]["items"]["items"]
    assert item["additionalProperties"] is False
    assert sorted(item["required"]) == sorted(item["properties"]) == ["helpful", "memory_id"]


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"backend": "no such thing!"}, "must be `module:callable`"),
        ({"backend": "raven_missing_module:make"}, "cannot import .*: no such module"),
        ({"backend": "raven_reference:no_such_factory"}, "no such attribute"),
        ({"backend": "raven_reference:EVENTS"}, "is not callable"),
        ({"backend": "never-registered"}, "no memory backend named"),
        ({"backend": "raven_reference:make_backend", "top_k": 101}, r"configuration\.top_k"),
        ({"backend": "raven_reference:make_backend", "track": "team"}, r"configuration\.track"),
        ({"backend": "raven_reference:make_backend", "max_backends": 0}, "max_backends"),
        ({"backend": "raven_reference:make_backend", "topk": 3}, "did you mean 'top_k'"),
    ],
    ids=["malformed", "missing-module", "missing-attribute", "not-callable", "unknown-name",
         "top-k", "track", "max-backends", "typo"],
)  # fmt: skip
async def test_a_configuration_naming_nothing_usable_is_refused_naming_the_key(
    tmp_path: Path, settings: dict[str, Any], rule: str
) -> None:
    runner = MemoryCompositionRunner()
    async with runner:
        with pytest.raises((CompositionRejected, InstallError)) as failed:
            await runner.mount(raven, instance_id="raven", config=settings)
    error: BaseException | None = failed.value
    messages = []
    while error is not None:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    assert any(__import__("re").search(rule, m) for m in messages), messages


def test_a_registered_backend_name_resolves_to_its_factory() -> None:
    register_memory_backend("reference-dual", lambda: raven_reference.make_backend)
    assert resolve_memory_backend("reference-dual") is raven_reference.make_backend
    with pytest.raises(DefinitionError, match="already registered"):
        register_memory_backend("reference-dual", lambda: raven_reference.make_backend)
    with pytest.raises(DefinitionError, match="no memory backend named 'absent'"):
        resolve_memory_backend("absent")


async def test_a_registered_check_refuses_a_bad_backend_config_at_mount(tmp_path: Path) -> None:
    def check(backend_config: Any) -> None:
        if "colour" in backend_config:
            raise DefinitionError("reference backend_config.colour: not a key of it")

    register_memory_backend("reference-checked", lambda: raven_reference.make_backend, check=check)
    runner = MemoryCompositionRunner()
    async with runner:
        with pytest.raises((CompositionRejected, InstallError)) as failed:
            await runner.mount(
                raven,
                instance_id="raven",
                config=config(tmp_path, backend="reference-checked", backend_config={"colour": 1}),
            )
        await runner.mount(
            raven,
            instance_id="fine",
            config=config(tmp_path, backend="reference-checked", backend_config={"user_id": "x"}),
        )
    assert "backend_config.colour" in str(failed.value) + str(failed.value.__cause__)


async def test_a_factory_may_be_a_coroutine(tmp_path: Path) -> None:
    async def make(ctx: BackendContext) -> FileBackend:
        return FileBackend(ctx)

    raven_reference.make_async = make  # type: ignore[attr-defined]
    async with await runner_with(tmp_path, backend="raven_reference:make_async") as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert [r.id for r in turn.view.routes] == ["source:raven/recall"]
        await turn.release()


@pytest.mark.parametrize(
    ("switches", "routes", "offers", "reason", "started"),
    [
        ({"external-memory.search": False}, [], ["feedback", "store"], "search-switched-off",
         True),
        ({"external-memory.ingest": False}, ["recall"], [], "ingest-switched-off", True),
        ({"external-memory.search": False, "external-memory.ingest": False}, [], [],
         "external-memory-switched-off", False),
    ],
    ids=["search", "ingest", "both"],
)  # fmt: skip
async def test_the_hosts_external_memory_switches_take_reads_or_writes_away(
    tmp_path: Path,
    switches: dict[str, bool],
    routes: list[str],
    offers: list[str],
    reason: str,
    started: bool,
) -> None:
    strategy = SelectAll()
    runner = MemoryCompositionRunner(switches=switches)
    await runner.mount(raven, instance_id="raven", config=config(tmp_path))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        view = turn.view
        await turn.release()
    assert [r.route_id for r in view.routes] == routes
    assert sorted(o.action_id for o in view.offers) == offers
    assert {c.facts.reason for c in strategy.seen} == {reason}
    # with both off no backend is even made
    assert bool(made(tmp_path)) is started


async def test_a_long_memory_is_an_excerpt_within_the_routes_item_ceiling(tmp_path: Path) -> None:
    runner = await runner_with(tmp_path)
    async with runner:
        await store(runner, {"user_id": "ada"}, "tea " * 4_999)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        [route] = [r for r in turn.view.routes if r.route_id == "recall"]
        found = await turn.execute_route("source:raven/recall", {"query": "tea"})
        await turn.release()
    [item] = found.items  # kept, never left out whole
    assert len(item.text) == min(route.max_item_characters, len("tea " * 4_999))
    assert item.provenance.get("excerpt", False) == (route.max_item_characters < 4 * 4_999)
