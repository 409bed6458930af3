"""Per-space limits: planned and applied only when maintenance runs, the plan shown is applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mnemon_source_spaces as spaces
import pytest

from mnemon import InstallError, ManagementError
from mnemon_testing import MemoryCompositionRunner, SelectAll

KEY = "source:spaces"
ADA = {"user_id": "ada"}


def configured(root: Path, limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_dir": str(root),
        "spaces": [
            {"name": "personal", "writable": True, "limits": limits},
            {"name": "cold", "writable": False},
        ],
    }


async def open_runner(root: Path, limits: dict[str, Any]) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    await runner.mount(spaces, instance_id="spaces", config=configured(root, limits))
    await runner.mount(SelectAll(), instance_id="all")
    return runner


async def remember(runner: MemoryCompositionRunner, texts: list[str]) -> None:
    client = runner.management_client(KEY, ADA)
    for text in texts:
        revision = await client.revision()
        await client.mutate(
            "remember",
            {"space": "personal", "text": text},
            confirmed=True,
            expected_revision=revision,
        )


async def texts_of(runner: MemoryCompositionRunner, space: str) -> list[str]:
    page = await runner.management_client(KEY, ADA).read("list", {"space": space, "limit": 100})
    return [memory["text"] for memory in page["memories"]]


async def apply(runner: MemoryCompositionRunner, digest: str) -> Any:
    client = runner.management_client(KEY, ADA)
    return await client.mutate(
        "maintenance-apply",
        {"plan_digest": digest},
        confirmed=True,
        expected_revision=await client.revision(),
    )


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"then": "forget"}, "name max_memories, max_age_days or both"),
        ({"max_memories": 3, "then": "archive"}, "archive_to: required"),
        ({"max_memories": 3, "then": "archive", "archive_to": "nowhere"}, "configured space"),
        ({"max_memories": 3, "then": "archive", "archive_to": "personal"}, "another space"),
        ({"max_memories": 3, "then": "forget", "archive_to": "cold"}, 'only with then = "archive"'),
        ({"max_memories": 0, "then": "forget"}, "whole number of memories"),
        ({"max_memories": 3, "then": "keep"}, '"archive"'),
    ],
    ids=["no-limit", "no-target", "unknown-target", "itself", "target-for-forget", "zero", "then"],
)
async def test_limits_are_checked_when_the_entry_is_mounted(
    tmp_path: Path, limits: dict[str, Any], message: str
) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match=message):
            await runner.mount(spaces, instance_id="spaces", config=configured(tmp_path, limits))


async def test_the_oldest_past_the_limit_are_archived_and_the_plan_applied_is_the_one_shown(
    tmp_path: Path,
) -> None:
    runner = await open_runner(
        tmp_path, {"max_memories": 3, "then": "archive", "archive_to": "cold"}
    )
    async with runner:
        written = [f"memory {n}" for n in range(5)]
        await remember(runner, written)
        shown = await runner.management_client(KEY, ADA).read("maintenance-plan")
        (usage,) = shown["usage"]
        assert (usage["group"], usage["used"], usage["limit"]) == ("personal", 5, 3)
        assert [step["action"] for step in shown["plan"]] == ["archive", "archive"]
        assert await texts_of(runner, "personal") == written[::-1]  # planning moves nothing
        done = await apply(runner, shown["plan_digest"])
        results = done.output["results"]
        assert [r["id"] for r in results] == [step["id"] for step in shown["plan"]]
        assert {r["outcome"] for r in results} == {"archived"}
        assert await texts_of(runner, "personal") == written[:1:-1]
        assert sorted(await texts_of(runner, "cold")) == written[:2]
        again = await runner.management_client(KEY, ADA).read("maintenance-plan")
        assert not again["plan"]


async def test_a_plan_that_changed_since_it_was_shown_is_not_applied(tmp_path: Path) -> None:
    runner = await open_runner(tmp_path, {"max_memories": 2, "then": "forget"})
    async with runner:
        await remember(runner, ["a", "b", "c"])
        shown = await runner.management_client(KEY, ADA).read("maintenance-plan")
        await remember(runner, ["d"])
        with pytest.raises(ManagementError) as caught:
            await apply(runner, shown["plan_digest"])
        assert caught.value.code == "plan-changed"
        assert await texts_of(runner, "personal") == ["d", "c", "b", "a"]


async def test_memories_past_their_age_are_forgotten(tmp_path: Path) -> None:
    # a thousandth of a second: every memory written before the plan is past it
    runner = await open_runner(tmp_path, {"max_age_days": 1e-8, "then": "forget"})
    async with runner:
        await remember(runner, ["a", "b"])
        shown = await runner.management_client(KEY, ADA).read("maintenance-plan")
        assert [step["action"] for step in shown["plan"]] == ["forget", "forget"]
        done = await apply(runner, shown["plan_digest"])
        assert {r["outcome"] for r in done.output["results"]} == {"forgotten"}
        assert await texts_of(runner, "personal") == []
