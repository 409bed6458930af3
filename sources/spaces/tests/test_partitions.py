"""Partitions: tenants always, a space's `partition_by` ids when present, on every path."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, RememberRequest
from spaces_kit import (
    FORGET,
    INSPECT,
    KEY,
    LINK,
    RELATED,
    allow,
    open_spaces,
    recall,
    remember,
    scope_turn,
    texts,
)

from mnemon import ActionError, InstallError, RouteError
from mnemon_testing import MemoryCompositionRunner

ACME = {"tenant_id": "acme", "user_id": "ada"}
GLOBEX = {"tenant_id": "globex", "user_id": "ada"}
NO_TENANT = {"user_id": "ada"}
PROJECT_LAYOUT = [
    {"name": "personal", "writable": True},
    {"name": "project", "writable": True, "partition_by": ["workspace"]},
]
W1 = {"user_id": "ada", "workspace": "w1"}
W2 = {"user_id": "ada", "workspace": "w2"}


async def _listed(runner: MemoryCompositionRunner, scope: dict[str, str], space: str) -> list[str]:
    page = await runner.management_client(KEY, scope).read("list", {"space": space, "limit": 100})
    return [memory["text"] for memory in page["memories"]]


async def _counts(runner: MemoryCompositionRunner, scope: dict[str, str]) -> dict[str, int]:
    turn = await scope_turn(runner, scope)
    try:
        item = (await turn.execute_route(INSPECT, {})).items[0]
    finally:
        await turn.release()
    return {space["name"]: space["memories"] for space in json.loads(item.text)["spaces"]}


def _revision(turn: Any) -> str | None:
    pinned = {item.source_key: item.revision for item in turn.view.consistency}
    return pinned[KEY]


async def _refused(call: Any) -> str:
    with pytest.raises((RouteError, ActionError)) as refused:
        await call
    return str(refused.value.code)


async def _write_then_probe(
    runner: MemoryCompositionRunner,
    owner: dict[str, str],
    others: list[dict[str, str]],
    **where: Any,
) -> None:
    """`owner` writes two linked memories; every other scope sees and touches none of them."""
    turn = await scope_turn(runner, owner)
    first = (await remember(turn, "zanzibar launch plan", **where)).detail["memory"]
    second = (await remember(turn, "zanzibar budget", **where)).detail["memory"]
    await turn.execute_action(LINK, {"from": first, "to": second}, allow)
    raw = first.split("~")[0]
    owner_revision = _revision(turn)
    await turn.release()
    space = where.get("space", "memories")
    for scope in others:
        other = await scope_turn(runner, scope)
        assert _revision(other) != owner_revision
        assert "zanzibar" not in "".join(fragment.text for fragment in other.view.fragments)
        assert texts(await recall(other, "zanzibar")) == []
        assert await _refused(other.execute_route(RELATED, {"id": first})) == "not_found"
        assert await _refused(other.execute_route(RELATED, {"id": raw})) == "not_found"
        mine = (await remember(other, "zanzibar of my own", **where)).detail["memory"]
        assert await _refused(other.execute_action(LINK, {"from": mine, "to": first}, allow)) == (
            "not_found"
        )
        assert await _refused(other.execute_action(FORGET, {"id": first}, allow)) == "not_found"
        assert await _refused(other.execute_action(FORGET, {"id": raw}, allow)) == "not_found"
        assert texts(await recall(other, "zanzibar")) == ["zanzibar of my own"]
        await other.release()
        assert await _listed(runner, scope, space) == ["zanzibar of my own"]
        client = runner.management_client(KEY, scope)
        gone = await client.mutate(
            "forget",
            {"space": space, "id": raw},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        assert gone.output["forgotten"] is False
        assert (await _counts(runner, scope))[space] == 1
        directory = await client.read("inspect")
        assert {item["name"]: item["memories"] for item in directory["spaces"]}[space] == 1
    assert await _listed(runner, owner, space) == ["zanzibar budget", "zanzibar launch plan"]
    turn = await scope_turn(runner, owner)
    linked = await turn.execute_route(RELATED, {"id": raw})
    assert texts(linked) == ["zanzibar budget"]
    await turn.release()


async def test_a_tenant_is_its_own_partition_on_every_path(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        await _write_then_probe(runner, ACME, [GLOBEX, NO_TENANT])


async def test_a_scope_without_a_tenant_never_reaches_a_tenants_memories(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        await _write_then_probe(runner, NO_TENANT, [ACME, GLOBEX])


async def test_a_tenant_is_a_partition_even_when_scope_keys_omit_users(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, scope_keys=["agent_id"]) as runner:
        agent = {"agent_id": "helper"}
        await _write_then_probe(
            runner, {**agent, "tenant_id": "acme"}, [{**agent, "tenant_id": "globex"}, agent]
        )


async def test_a_store_written_before_tenants_partitioned_stays_readable_without_one(
    tmp_path: Path,
) -> None:
    store = tmp_path / "old.sqlite3"
    # the parent an earlier version derived for user ada's `memories` space
    partition = b'{"user_id":"ada"}'
    digest = hashlib.sha256(b"mnemon-spaces/parent/v1\x00" + partition + b"\x00memories")
    adapter = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="old", data_directory=str(tmp_path), configuration={"path": str(store)}
        )
    )
    try:
        await adapter.remember(
            RememberRequest(parent="s1-" + digest.hexdigest()[:40], text="kept from before")
        )
    finally:
        await adapter.dispose()
    async with await open_spaces(tmp_path, provider={"type": "sqlite", "path": str(store)}) as (
        runner
    ):
        old = await scope_turn(runner, NO_TENANT)
        assert texts(await recall(old, "kept")) == ["kept from before"]
        await old.release()
        tenant = await scope_turn(runner, ACME)
        assert texts(await recall(tenant, "kept")) == []
        await tenant.release()


def _parent_before_the_port(ids: dict[str, str], space: str) -> str:
    # how earlier versions named a space's parent: a digest of the sorted JSON of the ids present
    partition = json.dumps(ids, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(b"mnemon-spaces/parent/v1\x00" + partition + b"\x00" + space.encode())
    return "s1-" + digest.hexdigest()[:40]


async def test_memories_filed_by_earlier_versions_keep_their_parents(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite3"
    tenant_project = {"tenant_id": "acme", **W1}
    filed = [
        (tenant_project, "project", "filed for acme in w1"),
        ({"tenant_id": "acme", "user_id": "ada"}, "personal", "filed for acme"),
        (W1, "project", "filed for w1\rwith a carriage return"),
    ]
    adapter = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="old", data_directory=str(tmp_path), configuration={"path": str(store)}
        )
    )
    try:
        for ids, space, text in filed:
            await adapter.remember(
                RememberRequest(parent=_parent_before_the_port(ids, space), text=text)
            )
    finally:
        await adapter.dispose()
    async with await open_spaces(
        tmp_path, spaces=PROJECT_LAYOUT, provider={"type": "sqlite", "path": str(store)}
    ) as runner:
        for ids, space, text in filed:
            assert await _listed(runner, ids, space) == [text]
        turn = await scope_turn(runner, tenant_project)
        assert sorted(texts(await recall(turn, "filed"))) == [
            "filed for acme",
            "filed for acme in w1",
        ]
        await turn.release()


async def test_a_project_space_is_split_by_workspace_and_personal_is_not(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=PROJECT_LAYOUT) as runner:
        await _write_then_probe(runner, W1, [W2, NO_TENANT], space="project")
        turn = await scope_turn(runner, W1)
        await remember(turn, "ada drinks green tea", space="personal")
        await turn.release()
        for scope in (W2, NO_TENANT, W1):
            reader = await scope_turn(runner, scope)
            assert texts(await recall(reader, "green tea")) == ["ada drinks green tea"]
            await reader.release()
        assert (await _counts(runner, W2)) == {"personal": 1, "project": 1}
        assert (await _counts(runner, W1)) == {"personal": 1, "project": 2}


async def test_a_workspace_scope_without_a_workspace_is_its_own_partition(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=PROJECT_LAYOUT) as runner:
        await _write_then_probe(runner, NO_TENANT, [W1], space="project")


async def test_workspaces_and_tenants_combine(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=PROJECT_LAYOUT) as runner:
        await _write_then_probe(
            runner,
            {**W1, "tenant_id": "acme"},
            [W1, {**W1, "tenant_id": "globex"}, {**W2, "tenant_id": "acme"}],
            space="project",
        )


@pytest.mark.parametrize(
    ("partition_by", "message"),
    [
        ("workspace", r"spaces\[0\]\.partition_by: must be a list of scope ids"),
        (["tenant_id"], r"spaces\[0\]\.partition_by\[0\]: tenant_id partitions every space"),
        (["team"], r"spaces\[0\]\.partition_by\[0\]: must be one of user_id, agent_id"),
        (["user_id"], r"spaces\[0\]\.partition_by\[0\]: already required by scope_keys"),
        (["workspace", "workspace"], r"spaces\[0\]\.partition_by\[1\]: duplicate scope id"),
    ],
    ids=["not-a-list", "tenant", "unknown", "already-required", "duplicate"],
)
async def test_a_bad_partition_by_is_refused_naming_the_key(
    tmp_path: Path, partition_by: Any, message: str
) -> None:
    layout = [{"name": "project", "writable": True, "partition_by": partition_by}]
    with pytest.raises(InstallError, match=r"spaces configuration\." + message):
        await open_spaces(tmp_path, spaces=layout)
    assert not (tmp_path / "sources").exists()


def _starter_spaces_entry() -> dict[str, Any]:
    from mnemon._cli._starter import STARTER_PROFILE  # the profile `mnemon init` writes

    entries = tomllib.loads(STARTER_PROFILE)["entries"]
    entry: dict[str, Any] = next(entry for entry in entries if entry["id"] == "spaces")
    return entry


async def test_the_starter_profiles_project_space_is_per_workspace(tmp_path: Path) -> None:
    configuration = dict(_starter_spaces_entry()["config"])
    layout = {space["name"]: space for space in configuration["spaces"]}
    assert layout["project"]["partition_by"] == ["workspace"]
    assert "partition_by" not in layout["personal"]
    async with await open_spaces(tmp_path, **configuration) as runner:
        one = await scope_turn(runner, W1)
        await remember(one, "we ship on fridays", space="project")
        await remember(one, "ada prefers short answers", space="personal")
        await one.release()
        two = await scope_turn(runner, W2)
        assert texts(await recall(two, "fridays")) == []
        assert texts(await recall(two, "short answers")) == ["ada prefers short answers"]
        await two.release()
