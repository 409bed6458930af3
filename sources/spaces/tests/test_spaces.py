"""The spaces Source from the user's side: configuration, routes, actions, grants, failures."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_spaces as spaces
import pytest
from mnemon_source_spaces import SQLITE_PROVIDER, define_spaces_source
from spaces_kit import (
    ADA,
    BOB,
    FORGET,
    INSPECT,
    KEY,
    LINK,
    RECALL,
    RELATED,
    REMEMBER,
    SelectSpaces,
    allow,
    config,
    open_spaces,
    recall,
    remember,
    scope_turn,
    texts,
)
from spaces_test_provider import memory_provider

from mnemon import (
    ActionError,
    InstallError,
    ManagementError,
    RouteError,
    SourceProvenance,
    render_wake,
)
from mnemon.sdk import PluginContext, SourceInit, install_memory
from mnemon_testing import MemoryCompositionRunner

TWO_SPACES = [
    {"name": "personal", "writable": True, "description": "What the user asked to keep"},
    {"name": "team", "writable": False, "description": "Shared team conventions"},
]


class WithProviders:
    """A plugin installing the spaces Source with extra Provider types."""

    def __init__(self, *providers: Any) -> None:
        self.definition = define_spaces_source([SQLITE_PROVIDER, *providers])

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, sources=[self.definition])


def _listing(directory: Path) -> list[Path]:
    return list(directory.iterdir())


async def count_memories(runner: MemoryCompositionRunner, scope: dict[str, str], space: str) -> int:
    page = await runner.management_client(KEY, scope).read("list", {"space": space, "limit": 100})
    return len(page["memories"])


# ------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"colour": "red"}, r"spaces configuration\.colour: unknown key"),
        ({"data_dir": "relative/dir"}, r"spaces configuration\.data_dir: must be an absolute path"),
        ({"spaces": []}, r"spaces configuration\.spaces: must be a non-empty list"),
        (
            {"spaces": [{"name": "Bad Name", "writable": True}]},
            r"spaces configuration\.spaces\[0\]\.name",
        ),
        (
            {"spaces": [{"name": "a", "writable": True}, {"name": "a"}]},
            r"spaces\[1\]\.name: duplicate space",
        ),
        (
            {"spaces": [{"name": "a", "writable": "yes"}]},
            r"spaces\[0\]\.writable: must be true or false",
        ),
        ({"spaces": [{"name": "a", "mode": "rw"}]}, r"spaces\[0\]\.mode: unknown key"),
        (
            {"spaces": TWO_SPACES, "default_space": "team"},
            r"default_space: must name a writable space",
        ),
        ({"scope_keys": ["user"]}, r"scope_keys\[0\]: must be one of"),
        ({"scope_keys": []}, r"scope_keys: must be a non-empty list"),
        (
            {"provider": {"type": "postgres"}},
            r"provider\.type: unknown Provider type; known: sqlite",
        ),
        (
            {"provider": {"type": "sqlite", "path": "rel.db"}},
            r"provider\.path: must be an absolute file path",
        ),
        ({"provider": {"type": "sqlite", "wal": False}}, r"provider\.wal: unknown key"),
        ({"provider_timeout": 0}, r"provider_timeout: must be a number"),
        ({"provider_token": 42}, r"provider_token: must be a non-empty string"),
    ],
    ids=[
        "unknown-key",
        "relative-data-dir",
        "no-spaces",
        "bad-space-name",
        "duplicate-space",
        "writable-not-bool",
        "space-unknown-key",
        "read-only-default",
        "bad-scope-key",
        "no-scope-keys",
        "unknown-provider",
        "relative-provider-path",
        "provider-unknown-key",
        "zero-timeout",
        "token-not-string",
    ],
)
async def test_invalid_configuration_is_refused_at_mount_and_nothing_is_published(
    tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(SelectSpaces(), instance_id="strategy")
        before = runner.inspect()
        with pytest.raises(InstallError, match=message):
            await runner.mount(spaces, instance_id="spaces", config=config(tmp_path, **extra))
        after = runner.inspect()
    assert after["registry_revision"] == before["registry_revision"]
    assert after["entries"] == ["strategy"]
    assert not _listing(tmp_path), "a refused mount created files"


def test_the_read_configuration_never_shows_a_credential() -> None:
    from mnemon_source_spaces._config import read_settings

    init = SourceInit(
        instance_key="source:spaces",
        provenance=SourceProvenance(entry_id="spaces", package_name="p", type_id="spaces"),
        configuration={
            "data_dir": "/srv/memory",
            "provider": {"type": "sqlite", "token": "tok-in-provider-9"},
            "provider_token": "tok-top-level-9",
        },
    )
    settings = read_settings(init)
    assert settings.provider_configuration == {"token": "tok-in-provider-9"}
    assert "tok-" not in repr(settings)
    assert "tok-" not in str(settings)


async def test_a_relative_data_dir_is_taken_from_the_profiles_folder(tmp_path: Path) -> None:
    async with MemoryCompositionRunner(config_dir=tmp_path) as runner:
        await runner.mount(spaces, instance_id="spaces", config={"data_dir": "memory"})
        await runner.mount(SelectSpaces(), instance_id="strategy")
        turn = await scope_turn(runner, ADA)
        await remember(turn, "kept beside the profile")
        await turn.release()
    assert (tmp_path / "memory" / "sources" / "spaces" / "spaces" / "spaces.sqlite3").is_file()


async def test_a_secret_in_configuration_never_shows_in_a_refusal(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError) as refused:
            await runner.mount(
                spaces,
                instance_id="spaces",
                config=config(tmp_path, provider={"type": "sqlite", "token": "tok-123", "x": 1}),
            )
    assert "tok-123" not in str(refused.value)
    assert "provider.x: unknown key" in str(refused.value)


# ------------------------------------------------------------------------- the View


async def test_the_view_offers_what_the_provider_and_spaces_allow(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=TWO_SPACES) as runner:
        turn = await scope_turn(runner, ADA)
        view = turn.view
        await remember(turn, "Ada likes tea")
        await turn.release()
    assert [route.route_id for route in view.routes] == ["inspect", "recall", "related"]
    assert [offer.action_id for offer in view.offers] == ["remember", "link", "forget"]
    assert view.consistency[0].consistency == "namespace-pinned-live-read"
    wake = render_wake(view)
    shown = view.model_dump_json() + wake
    assert "personal (writable)" in wake
    assert "team (read-only)" in wake
    for hidden in (str(tmp_path), "s1-", "sqlite3"):
        assert hidden not in shown, f"{hidden!r} shows in the View or the Wake"
    assert "ada" not in wake, "a scope id shows in the Wake"


async def test_without_writable_spaces_there_are_no_actions(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=[{"name": "team", "writable": False}]) as runner:
        turn = await scope_turn(runner, ADA)
        assert [offer.action_id for offer in turn.view.offers] == []
        assert [route.route_id for route in turn.view.routes] == ["inspect", "recall", "related"]
        await turn.release()


async def test_a_query_only_provider_offers_recall_and_nothing_it_cannot_do(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider(["search"], type_id="query-only"))
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "query-only"}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        assert [route.route_id for route in turn.view.routes] == ["inspect", "recall"]
        assert turn.view.offers == ()
        evidence = await recall(turn, "anything")
        assert evidence.items == ()
        directory = await turn.execute_route(INSPECT, {})
        assert '"capabilities":["search"]' in directory.items[0].text
        await turn.release()


async def test_live_capabilities_narrow_routes_and_actions(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory", "live": ["search", "get"]}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        assert [route.route_id for route in turn.view.routes] == ["inspect", "recall"]
        assert turn.view.offers == ()
        await turn.release()


@pytest.mark.parametrize("availability", ["degraded", "unavailable"])
async def test_provider_health_reaches_the_view_as_a_coded_diagnostic(
    tmp_path: Path, availability: str
) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory", "availability": availability}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        view = turn.view
        await turn.release()
    assert [(d.code, d.message) for d in view.diagnostics] == [
        (f"source-{availability}", f"Memory Source {KEY} is {availability} (upstream-maintenance)")
    ]
    assert bool(view.routes) == (availability == "degraded")


async def test_a_scope_missing_a_configured_id_is_unavailable_and_ids_partition(
    tmp_path: Path,
) -> None:
    async with await open_spaces(tmp_path, scope_keys=["tenant_id", "user_id"]) as runner:
        turn = await scope_turn(runner, {"user_id": "ada"})
        assert turn.view.consistency == ()
        assert [d.message for d in turn.view.diagnostics] == [
            f"Memory Source {KEY} is unavailable (missing-scope)"
        ]
        await turn.release()
        first = await scope_turn(runner, {"tenant_id": "acme", "user_id": "ada"})
        await remember(first, "Acme's Ada prefers dark mode")
        await first.release()
        other = await scope_turn(runner, {"tenant_id": "globex", "user_id": "ada"})
        assert texts(await recall(other, "dark mode")) == []
        await other.release()
        again = await scope_turn(runner, {"tenant_id": "acme", "user_id": "ada"})
        assert texts(await recall(again, "dark mode")) == ["Acme's Ada prefers dark mode"]
        await again.release()


# ------------------------------------------------------------------------- recall


async def test_recall_ranks_with_tiers_and_clean_provenance(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(
            turn, "Ada prefers green tea every morning", tags=["drinks"], entities=["Ada"]
        )
        await remember(turn, "Ada planted green beans in the garden")
        await remember(turn, "The morning standup moved to nine o'clock")
        await remember(turn, "Nothing to do with the query at all")
        evidence = await recall(turn, "green tea morning")
        await turn.release()
    assert texts(evidence) == [
        "Ada prefers green tea every morning",
        "Ada planted green beans in the garden",
        "The morning standup moved to nine o'clock",
    ]
    tiers = [item.provenance["tier"] for item in evidence.items]
    assert tiers[0] == "strong"
    assert tiers[1] != "strong"
    assert tiers[2] != "strong"
    first = evidence.items[0]
    assert first.provenance["space"] == "memories"
    assert first.provenance["memory"] == first.id
    assert list(first.provenance["tags"]) == ["drinks"]
    assert list(first.metadata["entities"]) == ["Ada"]
    datetime.fromisoformat(first.provenance["created_at"])
    assert "s1-" not in evidence.model_dump_json()


async def test_recall_fits_the_route_ceilings_with_marked_excerpts(tmp_path: Path) -> None:
    long_text = "filler words " * 300 + "the needle sits here " + "more filler " * 300
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        for index in range(5):
            await remember(turn, f"needle {index} " + long_text)
        await remember(turn, "a short needle")
        evidence = await turn.execute_route(
            RECALL,
            {"query": "needle", "limit": 6},
            limits={"max_results": 4, "max_characters": 1_000},
        )
        await turn.release()
    assert len(evidence.items) == 4
    assert sum(len(item.text) for item in evidence.items) <= 1_000
    excerpts = [item for item in evidence.items if item.metadata["excerpt"]]
    assert excerpts
    assert all("…" in item.text for item in excerpts)
    assert "a short needle" in texts(evidence), "a short memory was cut to make room"


async def test_recall_can_name_spaces_and_refuses_unknown_ones(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=TWO_SPACES) as runner:
        client = runner.management_client(KEY, ADA)
        revision = await client.revision()
        await client.mutate(
            "remember",
            {"space": "team", "text": "Team uses tabs"},
            confirmed=True,
            expected_revision=revision,
        )
        turn = await scope_turn(runner, ADA)
        await remember(turn, "Ada uses tabs too", space="personal")
        assert sorted(texts(await recall(turn, "tabs"))) == ["Ada uses tabs too", "Team uses tabs"]
        assert texts(await recall(turn, "tabs", spaces=["team"])) == ["Team uses tabs"]
        with pytest.raises(RouteError) as refused:
            await recall(turn, "tabs", spaces=["elsewhere"])
        assert refused.value.code == "invalid_payload"
        await turn.release()


@pytest.mark.parametrize(
    "query",
    ['"', "NEAR(tea", "tea AND OR NOT", "*", "{text}: tea", "tea' OR 1=1 --", "🙂", "---"],
)
async def test_user_text_never_breaks_the_search_syntax(tmp_path: Path, query: str) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "Ada likes tea")
        evidence = await recall(turn, query)
        await turn.release()
    assert texts(evidence) in ([], ["Ada likes tea"])


async def test_reads_are_live_inside_the_pinned_namespaces(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        before = turn.view
        await remember(turn, "written during this very turn")
        assert texts(await recall(turn, "during this turn")) == ["written during this very turn"]
        await turn.release()
        later = await scope_turn(runner, ADA)
        assert later.view.consistency == before.consistency, "content writes changed the revision"
        await later.release()


async def test_inspect_shows_the_directory_and_health(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=TWO_SPACES) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "one", entities=["Ada"])
        await remember(turn, "two", entities=["Ada", "Bob"])
        item = (await turn.execute_route(INSPECT, {})).items[0]
        await turn.release()
    import json

    directory = json.loads(item.text)
    assert directory["health"]["availability"] == "ready"
    assert directory["spaces"][0] == {
        "name": "personal",
        "writable": True,
        "memories": 2,
        "description": "What the user asked to keep",
        "entities": [{"name": "Ada", "memories": 2}, {"name": "Bob", "memories": 1}],
    }
    assert directory["spaces"][1]["memories"] == 0


# ------------------------------------------------------------------------- ids and writes


async def test_related_link_and_forget_follow_the_ids_recall_returned(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "Ada builds the Analytical Engine")
        await remember(turn, "Charles designed the Difference Engine")
        found = await recall(turn, "engine")
        first, second = (item.id for item in found.items)
        linked = await turn.execute_action(
            LINK, {"from": first, "to": second, "relation": "cites"}, allow
        )
        assert linked.completion == "committed"
        assert linked.detail["created"] is True
        related = await turn.execute_route(RELATED, {"id": first})
        assert [
            (item.id, item.provenance["relation"], item.provenance["direction"])
            for item in related.items
        ] == [(second, "cites", "outgoing")]
        back = await turn.execute_route(RELATED, {"id": second})
        assert [item.provenance["direction"] for item in back.items] == ["incoming"]
        gone = await turn.execute_action(FORGET, {"id": second}, allow)
        assert gone.detail["forgotten"] is True
        assert len((await recall(turn, "engine")).items) == 1
        await turn.release()


async def test_an_id_from_another_scope_is_refused_everywhere(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        ada = await scope_turn(runner, ADA)
        receipt = await remember(ada, "Ada's private note")
        handle = receipt.detail["memory"]
        await ada.release()
        bob = await scope_turn(runner, BOB)
        for call in (
            bob.execute_route(RELATED, {"id": handle}),
            bob.execute_action(FORGET, {"id": handle}, allow),
            bob.execute_action(FORGET, {"id": handle.split("~")[0]}, allow),
        ):
            with pytest.raises((RouteError, ActionError)) as refused:
                await call
            assert refused.value.code == "not_found"
        await bob.release()
        assert await count_memories(runner, ADA, "memories") == 1


async def test_without_get_only_handles_of_this_view_are_accepted(tmp_path: Path) -> None:
    no_get = memory_provider(["search", "remember", "forget", "link", "related"], type_id="no-get")
    async with await open_spaces(
        tmp_path, plugin=WithProviders(no_get), provider={"type": "no-get"}
    ) as runner:
        first = await scope_turn(runner, ADA)
        old = (await remember(first, "kept note")).detail["memory"]
        await first.release()
        turn = await scope_turn(runner, {"user_id": "ada", "agent_id": "other-agent"})
        found = (await recall(turn, "kept")).items[0].id
        assert found != old, "handles are bound to the View that returned them"
        tampered = found[:-1] + ("0" if found[-1] != "0" else "1")
        for refused_id in (old, found.split("~")[0], tampered):
            with pytest.raises(ActionError) as refused:
                await turn.execute_action(FORGET, {"id": refused_id}, allow)
            assert refused.value.code == "not_found"
            assert refused.value.receipt.completion == "failed"
        with pytest.raises(RouteError) as bare:
            await turn.execute_route(RELATED, {"id": found.split("~")[0]})
        assert bare.value.code == "forbidden", "a bare id needs get to be looked up"
        done = await turn.execute_action(FORGET, {"id": found}, allow)
        assert done.detail["forgotten"] is True
        await turn.release()


async def test_with_get_related_accepts_a_raw_id_held_by_exactly_one_space(
    tmp_path: Path,
) -> None:
    provider = memory_provider()
    layout = [{"name": "a", "writable": True}, {"name": "b", "writable": True}]
    async with await open_spaces(
        tmp_path, plugin=WithProviders(provider), provider={"type": "memory"}, spaces=layout
    ) as runner:
        client = runner.management_client(KEY, ADA)
        revision = await client.revision()
        one = await client.mutate(
            "remember",
            {"space": "a", "text": "only in a"},
            confirmed=True,
            expected_revision=revision,
        )
        raw = one.output["id"]
        turn = await scope_turn(runner, ADA)
        related = await turn.execute_route(RELATED, {"id": raw})
        assert related.items == ()
        with pytest.raises(ActionError) as refused:
            await turn.execute_action(FORGET, {"id": raw}, allow)
        assert refused.value.code == "not_found", "a write needs a handle of this View"
        await turn.release()
        assert await count_memories(runner, ADA, "a") == 1


async def test_an_id_held_by_two_visible_spaces_is_ambiguous(tmp_path: Path) -> None:
    import sqlite3

    from mnemon_source_spaces import ProviderInit, RememberRequest

    store = tmp_path / "twins.sqlite3"
    layout = [{"name": "a", "writable": True}, {"name": "b", "writable": True}]
    async with await open_spaces(
        tmp_path, spaces=layout, provider={"type": "sqlite", "path": str(store)}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "in a", space="a")
        await remember(turn, "in b", space="b")
        connection = sqlite3.connect(store)
        try:
            parents = [
                row[0] for row in connection.execute("SELECT parent FROM namespaces WHERE slot > 0")
            ]
        finally:
            connection.close()
        assert len(parents) == 2
        # the same child id in both parents, written by another client of the same store
        adapter = await SQLITE_PROVIDER.open(
            ProviderInit(
                instance_key="k", data_directory=str(tmp_path), configuration={"path": str(store)}
            )
        )
        try:
            for parent in parents:
                await adapter.remember(
                    RememberRequest(parent=parent, text="twin", memory_id="twin-1")
                )
        finally:
            await adapter.dispose()
        with pytest.raises(RouteError) as refused:
            await turn.execute_route(RELATED, {"id": "twin-1"})
        assert refused.value.code == "invalid_payload"
        handles = [item.id for item in (await recall(turn, "twin")).items]
        assert len(handles) == 2, "each twin has its own handle"
        done = await turn.execute_action(FORGET, {"id": handles[0]}, allow)
        assert done.detail["forgotten"] is True
        assert len((await recall(turn, "twin")).items) == 1
        await turn.release()


async def test_the_write_scope_check_refuses_read_only_spaces_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with await open_spaces(tmp_path, spaces=TWO_SPACES) as runner:
        client = runner.management_client(KEY, ADA)
        revision = await client.revision()
        team = await client.mutate(
            "remember",
            {"space": "team", "text": "team rule"},
            confirmed=True,
            expected_revision=revision,
        )
        turn = await scope_turn(runner, ADA)
        with pytest.raises(ActionError) as refused:
            await remember(turn, "sneaky", space="team")
        assert refused.value.code == "forbidden"
        assert refused.value.receipt.completion == "failed"
        rule = (await recall(turn, "team rule")).items[0].id
        with pytest.raises(ActionError) as forget_refused:
            await turn.execute_action(FORGET, {"id": rule}, allow)
        assert forget_refused.value.code == "forbidden"
        mine = (await remember(turn, "my rule", space="personal")).detail["memory"]
        with pytest.raises(ActionError) as cross:
            await turn.execute_action(LINK, {"from": mine, "to": rule}, allow)
        assert cross.value.code == "invalid_payload"
        await turn.release()
        assert await count_memories(runner, ADA, "team") == 1
        assert team.output["duplicate"] is False


async def test_a_repeated_idempotency_key_returns_the_existing_memory(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        first = await remember(turn, "remember me once", idempotency_key="k-1")
        again = await remember(turn, "remember me once", idempotency_key="k-1")
        by_field = await turn.execute_action(
            REMEMBER, {"text": "by field", "idempotency_key": "k-2"}, allow
        )
        by_field_again = await turn.execute_action(
            REMEMBER, {"text": "by field", "idempotency_key": "k-2"}, allow
        )
        with pytest.raises(ActionError) as clash:
            await turn.execute_action(
                REMEMBER, {"text": "x", "idempotency_key": "k-3"}, allow, idempotency_key="k-4"
            )
        assert clash.value.code == "invalid_payload"
        await turn.release()
        assert await count_memories(runner, ADA, "memories") == 2
    assert first.detail["duplicate"] is False
    assert again.detail["duplicate"] is True
    assert again.detail["memory"] == first.detail["memory"]
    assert again.idempotency_key == "k-1"
    # a duplicate reports when the memory it points at was committed, not now
    assert (again.committed_at or "") <= (first.committed_at or "")
    assert by_field_again.detail["duplicate"] is True
    assert by_field_again.detail["memory"] == by_field.detail["memory"]


async def test_receipts_are_committed_with_the_views_revision(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        receipt = await remember(turn, "a durable thing")
        revision = turn.view.consistency[0].revision
        await turn.release()
    assert receipt.completion == "committed"
    assert receipt.status == "succeeded"
    assert receipt.revision == revision
    moment = datetime.fromisoformat(receipt.committed_at or "")
    assert moment.utcoffset() is not None
    assert moment.utcoffset().total_seconds() == 0
    assert re.fullmatch(r"[0-9a-f]{16}~[0-9a-f]{20}", receipt.detail["memory"])


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"text": "x" * 8_001}, "invalid-input"),
        ({"text": ""}, "invalid-input"),
        ({"text": "  \t\n "}, "invalid_payload"),
        ({"text": "bell \x07"}, "invalid_payload"),
        ({"text": "carriage\rreturn"}, "invalid_payload"),
        ({"text": "reversed \u202e text"}, "invalid_payload"),
        ({"text": "one\u2028two"}, "invalid_payload"),
        ({"text": "ok", "tags": ["t"] * 17}, "invalid-input"),
        ({"text": "ok", "tags": ["x" * 65]}, "invalid-input"),
        ({"text": "ok", "tags": ["bad\x00tag"]}, "invalid_payload"),
        ({"text": "ok", "entities": ["Ada \u202eLovelace"]}, "invalid_payload"),
        ({"text": "ok", "entities": ["e"] * 17}, "invalid-input"),
        ({"text": "ok", "space": "Not A Space"}, "invalid-input"),
        ({"text": "ok", "space": "nowhere"}, "invalid_payload"),
        ({"text": "ok", "idempotency_key": "k" * 201}, "invalid-input"),
    ],
    ids=[
        "long",
        "empty",
        "blank",
        "control",
        "carriage-return",
        "bidi-override",
        "line-separator",
        "many-tags",
        "long-tag",
        "nul-tag",
        "bidi-entity",
        "many-entities",
        "bad-space",
        "unknown-space",
        "long-key",
    ],
)
async def test_oversized_and_invalid_inputs_are_refused_and_write_nothing(
    tmp_path: Path, payload: dict[str, Any], code: str
) -> None:
    async with await open_spaces(tmp_path) as runner:
        turn = await scope_turn(runner, ADA)
        with pytest.raises(ActionError) as refused:
            await turn.execute_action(REMEMBER, payload, allow)
        await turn.release()
        assert refused.value.code == code
        assert str(refused.value)
        assert refused.value.receipt is None or refused.value.receipt.completion == "failed"
        assert await count_memories(runner, ADA, "memories") == 0


# ------------------------------------------------------------------------- management


async def test_management_lists_pages_and_writes_any_configured_space(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=TWO_SPACES) as runner:
        client = runner.management_client(KEY, ADA)
        revision = await client.revision()
        for index in range(5):
            await client.mutate(
                "remember",
                {"space": "team", "text": f"rule {index}"},
                confirmed=True,
                expected_revision=revision,
            )
        first = await client.read("list", {"space": "team", "limit": 3})
        second = await client.read(
            "list", {"space": "team", "limit": 3, "cursor": first["next_cursor"]}
        )
        listed = [memory["text"] for memory in first["memories"] + second["memories"]]
        assert listed == [f"rule {index}" for index in reversed(range(5))]
        assert second["next_cursor"] is None
        gone = await client.mutate(
            "forget",
            {"space": "team", "id": first["memories"][0]["id"]},
            confirmed=True,
            expected_revision=revision,
        )
        assert gone.output["forgotten"] is True
        directory = await client.read("inspect")
        assert [space["memories"] for space in directory["spaces"]] == [0, 4]
        assert str(tmp_path) not in str(directory)
        assert "s1-" not in str(directory)
        with pytest.raises(ManagementError):
            await runner.management_client(KEY, {}).read("list", {"space": "team"})


# ------------------------------------------------------------------------- failures


async def test_a_slow_provider_times_out_without_stalling_the_turn(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory", "delay": 5}, provider_timeout=0.05
    ) as runner:
        with anyio.fail_after(3):
            turn = await scope_turn(runner, ADA)
        assert turn.view.consistency == ()
        assert [d.message for d in turn.view.diagnostics] == [
            f"Memory Source {KEY} is unavailable (provider-timeout)"
        ]
        await turn.release()


async def test_a_failing_provider_never_leaks_its_text(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(
        tmp_path,
        plugin=plugin,
        provider={"type": "memory", "explode": True},
        provider_token="tok-secret-991",
    ) as runner:
        turn = await scope_turn(runner, ADA)
        view = turn.view
        await turn.release()
        with pytest.raises(ManagementError) as failed:
            await runner.management_client(KEY, ADA).read("list", {"space": "memories"})
    assert "tok-secret-991" not in view.model_dump_json() + str(failed.value)
    assert [d.message for d in view.diagnostics] == [
        f"Memory Source {KEY} is unavailable (provider-failed)"
    ]


async def test_a_provider_answering_from_another_namespace_is_not_believed(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory", "leak": True}
    ) as runner:
        bob = await scope_turn(runner, BOB)
        await remember(bob, "bob's secret plan")
        await bob.release()
        ada = await scope_turn(runner, ADA)
        with pytest.raises(RouteError) as refused:
            await recall(ada, "secret plan")
        assert refused.value.code == "provider_error"
        await ada.release()


async def test_a_damaged_store_makes_the_source_unavailable_not_the_host(tmp_path: Path) -> None:
    store = tmp_path / "damaged.sqlite3"
    store.write_bytes(b"this is not a database, just bytes " * 200)
    async with await open_spaces(
        tmp_path, provider={"type": "sqlite", "path": str(store)}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        assert turn.view.consistency == ()
        assert [d.message for d in turn.view.diagnostics] == [
            f"Memory Source {KEY} is unavailable (damaged-store)"
        ]
        await turn.release()


async def test_a_cancelled_recall_leaves_the_source_working(tmp_path: Path) -> None:
    plugin = WithProviders(memory_provider())
    async with await open_spaces(tmp_path, plugin=plugin, provider={"type": "memory"}) as runner:
        turn = await scope_turn(runner, ADA)
        await remember(turn, "still here")
        await turn.release()
    async with await open_spaces(
        tmp_path, plugin=plugin, provider={"type": "memory", "delay": 0.2}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        with anyio.move_on_after(0.05) as scope:
            await recall(turn, "still")
        assert scope.cancelled_caught
        assert texts(await recall(turn, "still")) == ["still here"]
        await turn.release()


async def test_the_provider_is_disposed_with_the_source(tmp_path: Path) -> None:
    made: list[Any] = []
    base = memory_provider()

    def create(init: Any) -> Any:
        adapter = base.create(init)
        made.append(adapter)
        return adapter

    tracked = spaces.define_space_provider(base.manifest, create)
    async with await open_spaces(
        tmp_path, plugin=WithProviders(tracked), provider={"type": "memory"}
    ) as runner:
        turn = await scope_turn(runner, ADA)
        await turn.release()
        assert made
        assert not made[-1].disposed, "the serving Source's Provider was disposed"
    assert made
    assert all(adapter.disposed for adapter in made)


async def test_a_grant_pinning_another_scopes_spaces_is_refused(tmp_path: Path) -> None:
    from mnemon import Scope, SourceError, SourceProvenance, ViewRef, ViewRoute
    from mnemon.sdk import ProjectionRequest, QueryRequest, SourceInit

    source = await spaces.SPACES_SOURCE.create(
        SourceInit(
            instance_key=KEY,
            provenance=SourceProvenance(
                entry_id="spaces", package_name="mnemon-source-spaces", type_id="spaces"
            ),
            configuration={"data_dir": str(tmp_path)},
        )
    )
    try:
        bobs = await source.project(
            ProjectionRequest(
                instance_key=KEY,
                scope=Scope(user_id="bob"),
                scenario="t",
                expected_revision=None,
                mode="routed",
                max_characters=0,
            )
        )
        route = ViewRoute(
            id=RECALL,
            source_key=KEY,
            route_id="recall",
            description="recall",
            capability="recall",
            input_schema={"type": "object"},
            max_calls=1,
            max_results=8,
            max_characters=1_000,
        )
        for scope, allowed in ((Scope(user_id="bob"), True), (Scope(user_id="ada"), False)):
            request = QueryRequest(
                view=ViewRef(id="view:x", scope=scope),
                route=route,
                grant=bobs.grant,
                input={"query": "x"},
            )
            if allowed:
                assert (await source.query(request)).items == ()
                continue
            with pytest.raises(SourceError) as refused:
                await source.query(request)
            assert refused.value.code == "forbidden"
    finally:
        await source.dispose()
