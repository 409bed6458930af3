"""Composition: determinism, derived offers, spec validation, projection and the View."""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from typing import Any

import orjson
import pydantic
import pytest

from mnemon import CompositionRejected, Fragment, MemoryHost, ReadGrant, Scope, View
from mnemon.sdk import SourceFacts, ViewContribution, ViewSpec
from tests.kit import FakeSource, Probe, fake_source, select_all, strategy_plugin


async def composed(
    *plugins: Any, host: MemoryHost | None = None, **turn: Any
) -> tuple[MemoryHost, View, str]:
    host = host or MemoryHost()
    for index, plugin in enumerate(plugins):
        await host.mount(plugin, instance_id=f"p{index}" if index else "a")
    async with host.turn(**turn) as pinned:
        return host, pinned.view, pinned.wake()


async def test_a_replayed_composition_gives_an_identical_id() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(scope={"user_id": "u1"}) as first:
            pass
        async with host.turn(scope={"user_id": "u1"}) as second:
            pass
        async with host.turn(scope={"user_id": "u2"}) as other:
            pass
    assert first.view.id == second.view.id
    assert re.fullmatch(r"view:[0-9a-f]{64}", first.view.id)
    assert first.view.id == f"view:{first.view.digest}"
    assert other.view.id != first.view.id
    body = first.view.model_dump(
        mode="json", exclude={"id", "digest", "generation_id", "created_at"}
    )
    canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    assert hashlib.sha256(canonical).hexdigest() == first.view.digest
    assert sorted(body) == [
        "consistency", "diagnostics", "explanation", "extensions", "fragments", "grants",
        "guidance", "offers", "policy_routes", "request", "routes", "strategy_key",
        "strategy_type_id", "tool_ids",
    ]  # fmt: skip


async def test_a_non_deterministic_strategy_is_rejected_and_its_lease_released() -> None:
    counter = itertools.count()

    def drifting(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        spec = select_all(request, sources, contributions)
        return spec.model_copy(update={"explanation": f"call {next(counter)}"})

    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(drifting), instance_id="strategy")
        with pytest.raises(CompositionRejected, match="is not deterministic"):
            await host.begin_turn()
        assert host.inspect()["serving"]["leases"] == 0


async def test_an_undeclared_route_is_rejected_and_the_source_disposed_once() -> None:
    def forging(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        return {
            "strategy_type_id": "select-all",
            "sources": [{"source_key": "source:a", "route_ids": ["exfiltrate"]}],
            "explanation": "forged",
        }

    source, probe = fake_source()
    host = MemoryHost()
    await host.mount_all([(source, "a", None), (strategy_plugin(forging), "strategy", None)])
    with pytest.raises(CompositionRejected, match="route 'exfiltrate', which Source source:a"):
        await host.begin_turn()
    await host.dispose()
    await host.dispose()
    assert probe.disposed == ["source:a"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"capabilities": ("project", "search", "write", "graph")},
            "undeclared capability 'graph'",
        ),
        ({"route_ids": ("lookup", "secret-route")}, "undeclared route 'secret-route'"),
        ({"action_ids": ("erase",)}, "undeclared action 'erase'"),
        ({"role": "narrative"}, "reports role 'narrative'"),
        ({"type_id": "other"}, "reports type 'other'"),
        ({"instance_key": "source:b"}, "reports instance key 'source:b'"),
    ],
    ids=["capability", "route", "action", "role", "type", "key"],
)
async def test_facts_contradicting_the_manifest_cost_only_their_source(
    change: dict[str, Any], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def lying(source: FakeSource, request: Any) -> SourceFacts:
        return source.default_facts().model_copy(update=change)

    source, probe = fake_source(Probe(on_facts=lying))
    other, _ = fake_source()
    caplog.set_level(logging.DEBUG, logger="mnemon")
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(other, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            assert [c.source_key for c in turn.view.consistency] == ["source:b"]
            assert [(d.key, d.code, d.message) for d in turn.view.diagnostics] == [
                (
                    "source:a",
                    "source-facts-invalid",
                    "Memory Source source:a facts() broke its contract",
                )
            ]
    assert probe.project_calls == 0
    # which rule broke (with what the Source said) is logged for its author, at DEBUG only
    said = [r for r in caplog.records if message in r.getMessage()]
    assert said
    assert all(r.levelno == logging.DEBUG for r in said)


async def test_grant_values_never_appear_in_the_view_or_the_wake() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            public = turn.view.model_dump_json() + turn.wake() + str(host.inspect())
    assert "grant-token-42" not in public
    assert turn.view.routes
    assert turn.view.offers
    assert [g.source_key for g in turn.view.grants] == ["source:a"]
    assert turn.view.grants[0].digest.startswith("grant:")


async def test_the_capability_ceiling_removes_routes_and_actions() -> None:
    source, _ = fake_source()
    async with MemoryHost(source_capabilities={"source:a": ["project", "search"]}) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            assert [route.id for route in turn.view.routes] == ["source:a/lookup"]
            assert turn.view.offers == ()
        await host.reconfigure(source_capabilities={"*": ["write"]})
        async with host.turn() as turn:
            assert turn.view.fragments == ()
            assert [offer.id for offer in turn.view.offers] == ["source:a/store"]


async def test_a_source_left_with_nothing_by_the_ceiling_is_unavailable() -> None:
    seen: list[str] = []

    def record(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        seen.extend(s.facts.availability for s in sources)
        return select_all(request, sources, contributions)

    source, _ = fake_source()
    async with MemoryHost(source_capabilities={"source:a": ["archive"]}) as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(record), instance_id="strategy")
        async with host.turn() as turn:
            assert turn.view.fragments == ()
            assert turn.view.routes == ()
    assert seen == ["unavailable", "unavailable"]


async def test_routes_are_derived_from_live_facts_and_cannot_be_forged() -> None:
    async def fewer(source: FakeSource, request: Any) -> SourceFacts:
        return source.default_facts().model_copy(update={"route_ids": ("lookup",)})

    offered: list[list[str]] = []

    def record(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        offered.append([route.id for s in sources for route in s.routes])
        return select_all(request, sources, contributions)

    source, _ = fake_source(Probe(on_facts=fewer), routes=("lookup", "browse-all"))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(record), instance_id="strategy")
        async with host.turn() as turn:
            assert [route.id for route in turn.view.routes] == ["source:a/lookup"]
    assert offered == [["lookup"], ["lookup"]]


def spec_with(**selection: Any) -> Any:
    type_id = selection.pop("_type", "select-all")

    def compose(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
        return {
            "strategy_type_id": type_id,
            "sources": [{"source_key": "source:a", **selection}],
            "explanation": "test",
        }

    return compose


@pytest.mark.parametrize(
    ("compose", "message"),
    [
        (spec_with(source_key="source:zzz"), "unknown Source 'source:zzz'"),
        (
            spec_with(projection={"mode": "eager", "max_characters": 20_000}),
            "allocated 20000 projection characters; the budget is 16000",
        ),
        (spec_with(action_ids=["store", "store"]), "selected a action of source:a twice"),
        (spec_with(_type="other"), "returned a spec for 'other'"),
        (
            spec_with(projection={"mode": "sideways", "max_characters": 1}),
            "ViewSpec.sources[0].projection.mode: Input should be",
        ),
        (lambda *args: {"sources": []}, "ViewSpec.strategy_type_id: Field required"),
    ],
    ids=["unknown-source", "over-budget", "duplicate-action", "wrong-type", "bad-mode", "no-type"],
)
async def test_invalid_specs_are_rejected_with_the_rule_named(compose: Any, message: str) -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(compose), instance_id="strategy")
        with pytest.raises(CompositionRejected, match=re.escape(message)):
            await host.begin_turn()


async def test_strategy_maxima_and_roles_are_enforced() -> None:
    one, _ = fake_source()
    two, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(one, instance_id="a")
        await host.mount(two, instance_id="b")
        await host.mount(strategy_plugin(max_sources=1), instance_id="narrow")
        with pytest.raises(CompositionRejected, match="selected 2 Sources; its maximum is 1"):
            await host.begin_turn()
    async with MemoryHost() as host:
        await host.mount(one, instance_id="a")
        await host.mount(strategy_plugin(max_routes=1, max_sources=4), instance_id="narrow")
        await host.mount(two, instance_id="b")
        with pytest.raises(CompositionRejected, match="selected 2 routes; its maximum is 1"):
            await host.begin_turn()
    async with MemoryHost() as host:
        await host.mount(one, instance_id="a")
        await host.mount(strategy_plugin(roles=["narrative"]), instance_id="picky")
        with pytest.raises(CompositionRejected, match="unsupported role 'notes'"):
            await host.begin_turn()


async def test_a_required_unavailable_source_rejects_and_an_optional_one_is_skipped() -> None:
    async def down(source: FakeSource, request: Any) -> SourceFacts:
        return source.default_facts().model_copy(update={"availability": "unavailable"})

    def everyone(required: bool) -> Any:
        def compose(request: Any, sources: Any, contributions: Any) -> dict[str, Any]:
            return {
                "strategy_type_id": "select-all",
                "sources": [
                    {"source_key": s.key, "required": required, "route_ids": []} for s in sources
                ],
                "explanation": "everyone",
            }

        return compose

    source, probe = fake_source(Probe(on_facts=down))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        unmount = await host.mount(strategy_plugin(everyone(True)), instance_id="strategy")
        with pytest.raises(
            CompositionRejected, match="required Memory Source source:a is unavailable"
        ):
            await host.begin_turn()
        await unmount()
        await host.mount(strategy_plugin(everyone(False)), instance_id="lenient")
        async with host.turn() as turn:
            assert turn.view.consistency == ()
    assert probe.project_calls == 0


@pytest.mark.parametrize(
    ("contribution", "message"),
    [
        (
            lambda key, request: ViewContribution(
                fragments=(
                    Fragment(
                        source_key=key, mode=request.mode, text="x" * (request.max_characters + 1)
                    ),
                )
            ),
            "returned 8001 characters; at most 8000",
        ),
        (
            lambda key, request: ViewContribution(
                fragments=(Fragment(source_key=key, mode="routed", text="x"),)
            ),
            "returned a routed fragment; eager was requested",
        ),
        (
            lambda key, request: ViewContribution(
                fragments=(Fragment(source_key="source:b", mode=request.mode, text="x"),)
            ),
            "returned a fragment of 'source:b'",
        ),
        (
            lambda key, request: ViewContribution(),
            "returned no read grant, but routes were selected",
        ),
        (
            lambda key, request: ViewContribution(grant=ReadGrant(source_key="source:b", value=1)),
            "returned a grant of another Source",
        ),
        (lambda key, request: {"fragments": "nope"}, r"project\(\)\.fragments"),
    ],
    ids=[
        "too-long",
        "wrong-mode",
        "foreign-fragment",
        "missing-grant",
        "foreign-grant",
        "malformed",
    ],
)
async def test_projections_breaking_the_contract_cost_only_their_source(
    contribution: Any, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def project(source: FakeSource, request: Any) -> Any:
        return contribution(source.key, request)

    source, _ = fake_source(Probe(on_project=project))
    other, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(other, instance_id="b")
        unmount = await host.mount(strategy_plugin(), instance_id="strategy")
        # optional: the View is served without it, with a coded diagnostic and no detail
        async with host.turn() as turn:
            assert [c.source_key for c in turn.view.consistency] == ["source:b"]
            assert {f.source_key for f in turn.view.fragments} == {"source:b"}
            assert [(d.key, d.code, d.message) for d in turn.view.diagnostics] == [
                (
                    "source:a",
                    "source-project-invalid",
                    "Memory Source source:a project() broke its contract",
                )
            ]
        # the rule that broke is for the plugin's author, at DEBUG only
        assert not [r for r in caplog.records if r.levelno >= logging.INFO and "returned" in r.msg]
        await unmount()
        # required: the turn is rejected, and the host's developer learns which rule broke
        await host.mount(strategy_plugin(required=True), instance_id="strict")
        with pytest.raises(CompositionRejected, match=message):
            await host.begin_turn()


async def test_projection_budget_is_allocated_per_source_and_in_total() -> None:
    first, probe = fake_source(Probe(text="a" * 50_000))
    second, _ = fake_source(probe)
    async with MemoryHost() as host:
        await host.mount(first, instance_id="a")
        await host.mount(second, instance_id="b")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(budget={"max_projection_characters": 1001}) as turn:
            lengths = {f.source_key: len(f.text) for f in turn.view.fragments}
    assert lengths == {"source:a": 500, "source:b": 500}
    assert [r.max_characters for r in probe.project_requests] == [500, 500]
    assert {r.expected_revision for r in probe.project_requests} == {"r1"}


async def test_the_view_is_frozen_and_carries_consistency_and_request() -> None:
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn(
            scope={"user_id": "u1", "workspace": "w"}, scenario="agent.root-turn"
        ) as turn:
            view = turn.view
    with pytest.raises(Exception, match="frozen"):
        view.explanation = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.routes[0].input_schema["type"] = "string"  # type: ignore[index]
    assert view.request.scope.user_id == "u1"
    assert view.request.scenario == "agent.root-turn"
    assert [(c.source_key, c.consistency, c.revision) for c in view.consistency] == [
        ("source:a", "exact-snapshot", "r1")
    ]
    assert view.routes[0].max_results == 8
    assert view.routes[0].max_characters == 12_000


async def test_a_strategy_cannot_change_what_it_was_given() -> None:
    def vandal(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        sources[0].facts.hints["injected"] = True
        return select_all(request, sources, contributions)

    source, _ = fake_source(Probe(hints={"size": "small"}))
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(vandal), instance_id="strategy")
        with pytest.raises(CompositionRejected, match=r"compose\(\) failed") as caught:
            await host.begin_turn()
    assert isinstance(caught.value.__cause__, TypeError)


async def test_a_strategy_rejecting_a_missing_instance_is_reported_as_is() -> None:
    def strict(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        raise CompositionRejected("strict: required Source source:docs is not installed")

    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(strict), instance_id="strategy")
        with pytest.raises(CompositionRejected, match="strict: required Source source:docs"):
            await host.begin_turn()


@pytest.mark.parametrize(
    "value",
    ["a\tb", "a\x7fb", "a\x85b", "a\u202eb", "a\u2028b", "a\u200bb", "\ufeffa", "x" * 301, ""],
    ids=[
        "tab",
        "del",
        "nel",
        "bidi-override",
        "line-separator",
        "zero-width",
        "bom",
        "301",
        "empty",
    ],
)
def test_identity_values_are_plain_visible_text(value: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        Scope(user_id=value)
    assert Scope(user_id="ada lovelace-1815 🙂 λ").user_id == "ada lovelace-1815 🙂 λ"
