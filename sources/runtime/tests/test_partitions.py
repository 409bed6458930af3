"""Partitions: tenants never share memory, agents keep their own notes, on every path.

Every path a host has into the Source is checked: the projection of a turn, the `mutate`
action, and the management plane (`read` and `mutate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from runtime_kit import KEY, OFFER, allow, open_runtime

from mnemon import ActionError, ManagementError
from mnemon_testing import MemoryCompositionRunner

ACME_ADA = {"tenant_id": "acme", "user_id": "ada"}
GLOBEX_ADA = {"tenant_id": "globex", "user_id": "ada"}
ADA = {"user_id": "ada"}
PLANNER = {"user_id": "ada", "agent_id": "planner"}
CODER = {"user_id": "ada", "agent_id": "coder"}


def add(text: str, target: str = "user") -> dict[str, Any]:
    return {"target": target, "operation": "add", "text": text}


def remove(entry_id: str, target: str = "user") -> dict[str, Any]:
    return {"target": target, "operation": "remove", "id": entry_id}


def replace(entry_id: str, text: str, target: str = "user") -> dict[str, Any]:
    return {"target": target, "operation": "replace", "id": entry_id, "text": text}


async def act(
    runner: MemoryCompositionRunner,
    scope: dict[str, str],
    value: dict[str, Any],
    idempotency_key: str | None = None,
) -> Any:
    turn = await runner.begin_turn({"scope": scope})
    try:
        return await turn.execute_action(OFFER, value, allow, idempotency_key=idempotency_key)
    finally:
        await turn.release()


async def refused(runner: MemoryCompositionRunner, scope: dict[str, str], value: Any) -> str:
    """The code of the ActionError a write in `scope` meets."""
    with pytest.raises(ActionError) as caught:
        await act(runner, scope, value)
    assert caught.value.receipt.completion == "failed"
    return caught.value.code


async def shown(runner: MemoryCompositionRunner, scope: dict[str, str]) -> list[str]:
    turn = await runner.begin_turn({"scope": scope})
    await turn.release()
    return [fragment.text for fragment in turn.view.fragments]


async def managed(runner: MemoryCompositionRunner, scope: dict[str, str]) -> dict[str, list[str]]:
    """The texts the management plane reads in `scope`, by target."""
    output = await runner.management_client(KEY, scope).read("read")
    assert output["status"] == "ok"
    return {target: [entry["text"] for entry in output[target]] for target in ("user", "memory")}


async def manage_add(runner: MemoryCompositionRunner, scope: dict[str, str], value: Any) -> Any:
    client = runner.management_client(KEY, scope)
    revision = await client.revision()
    return await client.mutate("mutate", value, confirmed=True, expected_revision=revision)


# ------------------------------------------------------------------ tenants


@pytest.mark.parametrize(
    ("writer", "others"),
    [(ACME_ADA, [GLOBEX_ADA, ADA]), (ADA, [ACME_ADA, GLOBEX_ADA])],
    ids=["tenant-acme", "no-tenant"],
)
async def test_a_tenant_is_a_partition_of_its_own_on_every_path(
    tmp_path: Path, writer: dict[str, str], others: list[dict[str, str]]
) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await act(runner, writer, add("written fact"))
        await act(runner, writer, add("written note", "memory"))
        await manage_add(runner, writer, add("managed fact"))
        mine = await shown(runner, writer)
        for other in others:
            # project and manage read see nothing of the writer's tenant
            assert await shown(runner, other) == []
            assert await managed(runner, other) == {"user": [], "memory": []}
            # mutate cannot reach the writer's entries by their handles
            assert await refused(runner, other, replace("u1", "overwritten")) == "not_found"
            assert await refused(runner, other, remove("u2")) == "not_found"
            assert await refused(runner, other, remove("m1", "memory")) == "not_found"
        # the other tenant writes its own, with its own handles, and keeps it to itself
        other = others[0]
        receipt = await act(runner, other, add("other tenant's fact"))
        result = await manage_add(runner, other, add("other tenant's managed fact"))
        after = await managed(runner, writer)
        other_shown = await shown(runner, other)
    assert mine == [
        "User facts (runtime memory):\n- [u2] managed fact\n- [u1] written fact",
        "Agent notes (runtime memory):\n- [m1] written note",
    ]
    assert (receipt.detail["id"], result.output["id"]) == ("u1", "u2")
    assert after == {"user": ["written fact", "managed fact"], "memory": ["written note"]}
    assert "written" not in "".join(other_shown)


async def test_a_tenant_listed_in_scope_keys_is_required(tmp_path: Path) -> None:
    config = {"data_dir": str(tmp_path), "scope_keys": ["user_id", "tenant_id"]}
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, config)
        await act(runner, ACME_ADA, add("acme fact"))
        turn = await runner.begin_turn({"scope": ADA})
        await turn.release()
        with pytest.raises(ManagementError) as management:
            await runner.management_client(KEY, ADA).read("read")
        acme = await shown(runner, ACME_ADA)
    assert [(d.code, d.message) for d in turn.view.diagnostics] == [
        ("source-unavailable", f"Memory Source {KEY} is unavailable (missing-scope)")
    ]
    assert turn.view.fragments == turn.view.offers == ()
    assert management.value.code == "scope-incomplete"
    assert acme == ["User facts (runtime memory):\n- [u1] acme fact"]


# ------------------------------------------------------------------ agents


async def test_agent_notes_are_private_and_user_facts_are_shared_on_every_path(
    tmp_path: Path,
) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await act(runner, PLANNER, add("Ada likes tea."))
        await act(runner, PLANNER, add("planner's note", "memory"))
        await manage_add(runner, PLANNER, add("planner's managed note", "memory"))
        for other in (CODER, ADA):
            assert await shown(runner, other) == [
                "User facts (runtime memory):\n- [u1] Ada likes tea."
            ]
            assert await managed(runner, other) == {"user": ["Ada likes tea."], "memory": []}
            assert await refused(runner, other, replace("m1", "x", "memory")) == "not_found"
            assert await refused(runner, other, remove("m2", "memory")) == "not_found"
        # the coder's notes start at m1 and stay the coder's; a shared fact is shared
        coder_note = await act(runner, CODER, add("coder's note", "memory"))
        await manage_add(runner, CODER, add("coder's managed note", "memory"))
        await act(runner, CODER, replace("u1", "Ada likes green tea."))
        planner = await managed(runner, PLANNER)
        coder = await managed(runner, CODER)
        nobody = await managed(runner, ADA)
        planner_shown = await shown(runner, PLANNER)
    assert coder_note.detail["id"] == "m1"
    assert planner == {
        "user": ["Ada likes green tea."],
        "memory": ["planner's note", "planner's managed note"],
    }
    assert coder == {
        "user": ["Ada likes green tea."],
        "memory": ["coder's note", "coder's managed note"],
    }
    assert nobody == {"user": ["Ada likes green tea."], "memory": []}
    assert "coder" not in "".join(planner_shown)


async def test_agents_of_one_user_in_two_tenants_share_nothing(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await act(runner, {**ACME_ADA, "agent_id": "planner"}, add("acme fact"))
        globex_planner = await managed(runner, {**GLOBEX_ADA, "agent_id": "planner"})
        acme_coder = await managed(runner, {**ACME_ADA, "agent_id": "coder"})
    assert globex_planner == {"user": [], "memory": []}
    assert acme_coder == {"user": ["acme fact"], "memory": []}


async def test_idempotency_keys_of_two_agents_never_replay_each_other(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        planner = await act(runner, PLANNER, add("a note", "memory"), idempotency_key="k-1")
        coder = await act(runner, CODER, add("a note", "memory"), idempotency_key="k-1")
        retried = await act(runner, CODER, add("a note", "memory"), idempotency_key="k-1")
        notes = (await managed(runner, PLANNER))["memory"], (await managed(runner, CODER))["memory"]
    assert planner.detail["replayed"] is False
    assert coder.detail["replayed"] is False
    assert retried.detail["replayed"] is True
    assert notes == (["a note"], ["a note"])


# ------------------------------------------------------------------ files of format 1


def legacy_document(partition: dict[str, str]) -> bytes:
    """A file as the first version of this Source wrote it."""
    entry = {"importance": 3, "created_at": "2026-01-02T03:04:05+00:00"}
    entry["updated_at"] = entry["created_at"]
    body = {
        "format": "mnemon-runtime/1",
        "partition": partition,
        "sequence": 4,
        "next": {"user": 3, "memory": 2},
        "user": [{**entry, "id": "u2", "text": "old fact"}],
        "memory": [{**entry, "id": "m1", "text": "old note"}],
        "recent": [
            {
                "key": "old-key",
                "fingerprint": "not-this-write",
                "id": "u2",
                "sequence": 3,
                "committed_at": "2026-01-02T03:04:05+00:00",
            }
        ],
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)


def plant_legacy(root: Path, scope: dict[str, str]) -> Path:
    """Put a format 1 file in place of the one file of the store (written once before)."""
    (stored,) = root.rglob("*.json")
    stored.write_bytes(legacy_document(scope))
    return stored


async def test_a_file_of_format_1_keeps_loading_and_is_rewritten_without_loss(
    tmp_path: Path,
) -> None:
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, {"data_dir": str(tmp_path)})
        await act(runner, ADA, add("placeholder"))
        stored = plant_legacy(tmp_path, ADA)
        before = await shown(runner, ADA)
        planner_before = await managed(runner, PLANNER)
        # the old record of a key is still honoured: another write under it is refused
        with pytest.raises(ActionError) as reused:
            await act(runner, ADA, add("another write"), idempotency_key="old-key")
        new_fact = await act(runner, ADA, add("new fact"))
        new_note = await act(runner, ADA, add("new note", "memory"))
        after = await managed(runner, ADA)
        body = orjson.loads(stored.read_bytes())
    assert before == [
        "User facts (runtime memory):\n- [u2] old fact",
        "Agent notes (runtime memory):\n- [m1] old note",
    ]
    # notes of format 1 were not kept per agent: they stay with the scope without an agent
    assert planner_before == {"user": ["old fact"], "memory": []}
    assert reused.value.code == "invalid_payload"
    assert (new_fact.detail["id"], new_note.detail["id"]) == ("u3", "m2")
    assert after == {"user": ["old fact", "new fact"], "memory": ["old note", "new note"]}
    assert body["format"] == "mnemon-runtime/2"
    assert body["sequence"] == 6


async def test_notes_of_format_1_stay_with_the_agent_scope_keys_named(tmp_path: Path) -> None:
    config = {"data_dir": str(tmp_path), "scope_keys": ["user_id", "agent_id"]}
    async with MemoryCompositionRunner() as runner:
        await open_runtime(runner, config)
        await act(runner, PLANNER, add("placeholder"))
        plant_legacy(tmp_path, PLANNER)
        await act(runner, PLANNER, add("new note", "memory"))
        planner = await managed(runner, PLANNER)
    assert planner == {"user": ["old fact"], "memory": ["old note", "new note"]}
