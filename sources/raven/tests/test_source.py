"""The raven-backend Source: identity, lifecycle, receipts, evidence and failures, end to end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

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


def backend_of(directory: Path) -> FileBackend:
    workspace = str(directory / "sources" / "raven-backend" / "raven")
    return [b for b in INSTANCES if str(b._folder) == workspace][-1]


def events_of(directory: Path) -> list[str]:
    return EVENTS[str(directory / "sources" / "raven-backend" / "raven")]


async def runner_with(directory: Path, required: bool = True, **extra: Any) -> Any:
    runner = MemoryCompositionRunner()
    await runner.mount(raven, instance_id="raven", config=config(directory, **extra))
    await runner.mount(
        SelectAll(),
        instance_id="all",
        config={"source_keys": ["source:raven"], "required": required},
    )
    return runner


async def test_store_is_accepted_never_committed_and_carries_its_metadata(tmp_path: Path) -> None:
    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada", "session_id": "s-1"}})
        receipt = await turn.execute_action(
            "source:raven/store",
            {
                "messages": [
                    {"role": "user", "content": "Ada prefers tea."},
                    {"role": "assistant", "content": "Noted."},
                ],
                "app_id": "app-1",
                "project_id": "p-1",
                "is_final": True,
            },
            allow,
        )
        assert (receipt.completion, receipt.status, receipt.committed_at) == (
            "accepted",
            "succeeded",
            None,
        )
        session, messages, metadata = backend_of(tmp_path).stored[-1]
        assert session == "s-1"
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert metadata == {"user_id": "ada", "app_id": "app-1", "project_id": "p-1",
                            "is_final": True}  # fmt: skip
        await turn.release()


async def test_recall_passes_exactly_one_id_and_builds_evidence(tmp_path: Path) -> None:
    async with await runner_with(tmp_path, top_k=4) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada", "agent_id": "planner"}})
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
    # exactly one id, and top_k clipped to the configured maximum
    assert backend_of(tmp_path).recalls[-1] == {"user_id": "ada", "agent_id": None, "top_k": 4}


async def test_an_item_without_metadata_id_gets_a_digest_of_its_text(tmp_path: Path) -> None:
    from mnemon_source_raven import Memory

    async def recall(self: Any, query: str, **ids: Any) -> list[Memory]:
        return [Memory(text="plain memory", score=0.5)]

    async with await runner_with(tmp_path) as runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        backend_of(tmp_path).recall = recall.__get__(backend_of(tmp_path))  # type: ignore[method-assign]
        evidence = await turn.execute_route("source:raven/recall", {"query": "x"})
        await turn.release()
    assert evidence.items[0].id.startswith("sha256:")


async def test_the_tenant_is_part_of_the_id_the_backend_receives(tmp_path: Path) -> None:
    async with await runner_with(tmp_path) as runner:
        for tenant in ("acme", "globex"):
            turn = await runner.begin_turn({"scope": {"user_id": "ada", "tenant_id": tenant}})
            await turn.execute_route("source:raven/recall", {"query": "x"})
            await turn.release()
    ids = [call["user_id"] for call in backend_of(tmp_path).recalls]
    assert ids == ["tenant=acme;user=ada", "tenant=globex;user=ada"]
    scope = raven.backend_identity
    from mnemon import Scope

    assert scope(Scope(user_id="tenant=acme;user=ada"), "user") is None  # never impersonates


async def test_a_scope_without_the_tracks_id_is_unavailable_and_never_calls(
    tmp_path: Path,
) -> None:
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    await runner.mount(raven, instance_id="raven", config=config(tmp_path, track="agent"))
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert {(c.facts.availability, c.facts.reason) for c in strategy.seen} == {
            ("unavailable", "missing-identity")
        }
        assert turn.view.consistency == ()
        assert not turn.view.routes
        await turn.release()
    # not started, not stopped, never asked: the backend saw nothing of this scope
    assert events_of(tmp_path) == []
    assert backend_of(tmp_path).recalls == []


async def test_start_once_per_runtime_and_stop_at_dispose(tmp_path: Path) -> None:
    runner = MemoryCompositionRunner()
    # mounted before the Strategy: the mount-time trial build must not start the backend
    await runner.mount(raven, instance_id="raven", config=config(tmp_path))
    assert "start" not in events_of(tmp_path)
    await runner.mount(SelectAll(), instance_id="all", config={"required": True})
    for _ in range(3):
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        await turn.release()
    assert events_of(tmp_path) == ["start"]
    await runner.dispose()
    assert events_of(tmp_path) == ["start", "stop"]


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
    assert events_of(tmp_path) == ["start", "stop"]  # one start, stop after the failed start


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


async def test_a_user_only_backend_serves_nothing_on_the_agent_track(tmp_path: Path) -> None:
    extra = {"backend": "raven_reference:make_user_only_backend", "track": "agent"}
    async with await runner_with(tmp_path, **extra) as runner:
        turn = await runner.begin_turn({"scope": {"agent_id": "planner"}})
        await turn.execute_action(
            "source:raven/store", {"messages": [{"role": "user", "content": "tea"}]}, allow
        )
        evidence = await turn.execute_route("source:raven/recall", {"query": "tea"})
        await turn.release()
    assert evidence.items == ()


def helped(memory_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "memory_usage", "memory_id": memory_id, "helpful": True, **extra}


async def recalled_ids(turn: Any, query: str) -> list[str]:
    evidence = await turn.execute_route("source:raven/recall", {"query": query})
    return [item.id for item in evidence.items]


async def store_tea(runner: Any, scope: dict[str, str]) -> None:
    turn = await runner.begin_turn({"scope": scope})
    message = {"role": "user", "content": "green tea"}
    await turn.execute_action("source:raven/store", {"messages": [message]}, allow)
    await turn.release()


async def test_feedback_on_a_recalled_memory_is_handed_on_with_the_identity(
    tmp_path: Path,
) -> None:
    async with await runner_with(tmp_path) as runner:
        await store_tea(runner, {"user_id": "ada"})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert await recalled_ids(turn, "tea") == ["m0"]
        receipt = await turn.execute_action(
            "source:raven/feedback", {"signals": [helped("m0")]}, allow
        )
        await turn.release()
        later = await runner.begin_turn({"scope": {"user_id": "ada"}})  # a later turn may too
        await later.execute_action(
            "source:raven/feedback", {"signals": [{**helped("m0"), "helpful": False}]}, allow
        )
        await later.release()
    assert receipt.completion == "accepted"
    # exactly the contract's keys, and whose memory it is, from the scope
    assert backend_of(tmp_path).feedback_seen == [
        {"type": "memory_usage", "memory_id": "m0", "helpful": True, "user_id": "ada"},
        {"type": "memory_usage", "memory_id": "m0", "helpful": False, "user_id": "ada"},
    ]


@pytest.mark.parametrize(
    "scope",
    [{"user_id": "bob"}, {"user_id": "ada", "tenant_id": "acme"}],
    ids=["another-user", "same-user-another-tenant"],
)
async def test_feedback_on_a_memory_this_identity_was_not_shown_is_refused(
    tmp_path: Path, scope: dict[str, str]
) -> None:
    async with await runner_with(tmp_path) as runner:
        await store_tea(runner, {"user_id": "ada"})
        await store_tea(runner, scope)  # it has an `m0` of its own, never recalled
        ada = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert await recalled_ids(ada, "tea") == ["m0"]  # ada's m0 was shown to ada only
        await ada.release()
        turn = await runner.begin_turn({"scope": scope})
        refusals = []
        for signals in ([helped("m0")], [helped("never-recalled")]):
            with pytest.raises(ActionError) as refused:
                await turn.execute_action("source:raven/feedback", {"signals": signals}, allow)
            refusals.append(refused.value)
        await turn.release()
    for refusal in refusals:
        assert refusal.code == "memory-not-recalled"
        assert getattr(refusal.receipt, "completion", None) == "failed"
        assert "never-recalled" not in str(refusal)
    assert backend_of(tmp_path).feedback_seen == []  # nothing reached the backend


@pytest.mark.parametrize(
    "signals",
    [
        [helped("m0", user_id="bob")],
        [helped("m0", skill="search")],
        [{"type": "memory_usage", "memory_id": "m0"}],
        [{**helped("m0"), "helpful": "yes"}],
        [{**helped("m0"), "memory_id": 0}],
        [{**helped("m0"), "type": "skill_usage"}],
        [helped("m0"), helped("m0", note="x")],
        [],
    ],
    ids=[
        "identity-smuggled",
        "extra-key",
        "missing-helpful",
        "helpful-not-boolean",
        "id-not-string",
        "unknown-type",
        "second-item-extra-key",
        "no-signals",
    ],
)
async def test_feedback_items_are_checked_like_any_input(
    tmp_path: Path, signals: list[dict[str, Any]]
) -> None:
    async with await runner_with(tmp_path) as runner:
        await store_tea(runner, {"user_id": "ada"})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        assert await recalled_ids(turn, "tea") == ["m0"]
        with pytest.raises(ActionError) as refused:
            await turn.execute_action("source:raven/feedback", {"signals": signals}, allow)
        [offer] = [offer for offer in turn.view.offers if offer.action_id == "feedback"]
        await turn.release()
    assert refused.value.code == "invalid-input"
    assert backend_of(tmp_path).feedback_seen == []
    item = offer.input_schema["properties"]["signals"]["items"]
    assert item["additionalProperties"] is False
    assert (
        sorted(item["required"]) == sorted(item["properties"]) == ["helpful", "memory_id", "type"]
    )


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"backend": "no such thing!"}, "must be `module:callable`"),
        ({"backend": "raven_missing_module:make"}, "cannot import"),
        ({"backend": "raven_reference:not_a_backend"}, "not a MemoryBackend"),
        ({"backend": "never-registered"}, "no memory backend named"),
        ({"backend": "raven_reference:make_backend", "top_k": 101}, r"configuration\.top_k"),
        ({"backend": "raven_reference:make_backend", "track": "team"}, r"configuration\.track"),
        ({"backend": "raven_reference:make_backend", "topk": 3}, "did you mean 'top_k'"),
    ],
    ids=["malformed", "missing-module", "not-a-backend", "unknown-name", "top-k", "track", "typo"],
)
async def test_bad_configuration_names_the_key(
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
    # with both off the backend is not even started
    assert ("start" in events_of(tmp_path)) is started
