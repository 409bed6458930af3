"""Receipts say how far a write got: idempotency conflicts and replays, durability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    ForgetRequest,
    LinkRequest,
    ProviderInit,
    RememberRequest,
)
from spaces_kit import (
    ADA,
    FORGET,
    KEY,
    LINK,
    REMEMBER,
    allow,
    open_spaces,
    recall,
    remember,
    scope_turn,
    texts,
)

from mnemon import ActionError
from mnemon_testing import MemoryCompositionRunner

LAYOUT = [{"name": "personal", "writable": True}, {"name": "project", "writable": True}]
FIRST = {"text": "the launch is on monday", "space": "personal", "tags": ["launch"]}


async def _stored(runner: MemoryCompositionRunner) -> list[tuple[str, str, list[str]]]:
    client = runner.management_client(KEY, ADA)
    rows = []
    for space in ("personal", "project"):
        page = await client.read("list", {"space": space, "limit": 100})
        rows += [(space, memory["text"], list(memory["tags"])) for memory in page["memories"]]
    return rows


@pytest.mark.parametrize(
    "changed",
    [
        {"text": "the launch is on friday"},
        {"tags": ["launch", "moved"]},
        {"tags": []},
        {"entities": ["Ada"]},
        {"space": "project"},
    ],
    ids=["text", "tags", "no-tags", "entities", "space"],
)
async def test_a_reused_key_with_different_content_is_a_conflict_and_writes_nothing(
    tmp_path: Path, changed: dict[str, Any]
) -> None:
    async with await open_spaces(tmp_path, spaces=LAYOUT) as runner:
        turn = await scope_turn(runner, ADA)
        first = await remember(turn, **FIRST, idempotency_key="launch-1")
        assert first.completion == "committed"
        with pytest.raises(ActionError) as refused:
            await remember(turn, **{**FIRST, **changed}, idempotency_key="launch-1")
        assert refused.value.code == "idempotency-conflict"
        assert refused.value.receipt is not None
        assert refused.value.receipt.completion == "failed"
        assert refused.value.receipt.committed_at is None
        assert "monday" not in str(refused.value)
        assert "friday" not in str(refused.value)
        # the key given as an input field is the same key
        with pytest.raises(ActionError) as by_field:
            await turn.execute_action(
                REMEMBER, {**FIRST, **changed, "idempotency_key": "launch-1"}, allow
            )
        assert by_field.value.code == "idempotency-conflict"
        assert texts(await recall(turn, "friday")) == []
        await turn.release()
        assert await _stored(runner) == [("personal", "the launch is on monday", ["launch"])]


async def test_an_identical_replay_is_committed_and_marked_replayed(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=LAYOUT) as runner:
        turn = await scope_turn(runner, ADA)
        first = await remember(turn, **FIRST, idempotency_key="launch-1")
        again = await remember(turn, **FIRST, idempotency_key="launch-1")
        await turn.release()
        later = await scope_turn(runner, ADA)
        next_turn = await remember(later, **FIRST, idempotency_key="launch-1")
        await later.release()
        assert await _stored(runner) == [("personal", "the launch is on monday", ["launch"])]
    assert first.detail["replayed"] is False
    assert first.detail["duplicate"] is False
    for replay in (again, next_turn):
        assert replay.completion == "committed"
        assert replay.status == "succeeded"
        assert replay.detail["replayed"] is True
        assert replay.detail["duplicate"] is True
        assert replay.detail["space"] == "personal"
        assert replay.detail["memory"].split("~")[0] == first.detail["memory"].split("~")[0]
        # a replay reports when the memory it points at was stored, not now
        assert (replay.committed_at or "") <= (first.committed_at or "")
    assert again.committed_at == next_turn.committed_at
    assert again.detail["memory"] == first.detail["memory"], "same View, same handle"


async def test_receipts_name_the_memory_and_space_they_touched(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, spaces=LAYOUT) as runner:
        turn = await scope_turn(runner, ADA)
        one = await remember(turn, "one", space="project")
        two = await remember(turn, "two", space="project")
        assert (one.detail["space"], one.detail["replayed"]) == ("project", False)
        handles = (one.detail["memory"], two.detail["memory"])
        linked = await turn.execute_action(LINK, {"from": handles[0], "to": handles[1]}, allow)
        assert (linked.detail["space"], linked.detail["from"], linked.detail["to"]) == (
            "project",
            *handles,
        )
        gone = await turn.execute_action(FORGET, {"id": handles[1]}, allow)
        assert (gone.detail["space"], gone.detail["memory"]) == ("project", handles[1])
        await turn.release()


async def test_writes_under_synchronous_normal_are_accepted_not_committed(tmp_path: Path) -> None:
    store = {"type": "sqlite", "synchronous": "normal"}
    async with await open_spaces(tmp_path, provider=store) as runner:
        turn = await scope_turn(runner, ADA)
        one = await remember(turn, "kept, probably")
        two = await remember(turn, "kept, too")
        replay = await remember(turn, "kept, too")
        linked = await turn.execute_action(
            LINK, {"from": one.detail["memory"], "to": two.detail["memory"]}, allow
        )
        gone = await turn.execute_action(FORGET, {"id": two.detail["memory"]}, allow)
        await turn.release()
        client = runner.management_client(KEY, ADA)
        added = await client.mutate(
            "remember",
            {"space": "memories", "text": "added by a person"},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        assert added.output["durable"] is False
    for receipt in (one, two, replay, linked, gone):
        assert receipt.completion == "accepted"
        assert receipt.status == "succeeded"
        assert receipt.committed_at is None
    assert one.detail["space"] == "memories"
    assert one.detail["memory"]


async def test_writes_under_synchronous_full_are_committed(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path, provider={"type": "sqlite"}) as runner:
        turn = await scope_turn(runner, ADA)
        receipt = await remember(turn, "surely kept")
        await turn.release()
    assert receipt.completion == "committed"
    assert receipt.committed_at is not None


@pytest.mark.parametrize(("synchronous", "durable"), [("full", True), ("normal", False)])
async def test_the_sqlite_provider_says_whether_each_write_is_durable(
    tmp_path: Path, synchronous: str, durable: bool
) -> None:
    adapter = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="k",
            data_directory=str(tmp_path),
            configuration={"synchronous": synchronous},
        )
    )
    try:
        one = await adapter.remember(RememberRequest(parent="p-1", text="one", memory_id="m-1"))
        two = await adapter.remember(RememberRequest(parent="p-1", text="two", memory_id="m-2"))
        link = adapter.link
        forget = adapter.forget
        linked = await link(LinkRequest(parent="p-1", source_id="m-1", target_id="m-2"))
        gone = await forget(ForgetRequest(parent="p-1", id="m-2"))
    finally:
        await adapter.dispose()
    assert [one.durable, two.durable, linked.durable, gone.durable] == [durable] * 4
