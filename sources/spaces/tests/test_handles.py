"""Handles are bound to the View: writes need one minted for this View, MACs are checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mnemon_source_spaces as spaces
import pytest
from spaces_kit import (
    ADA,
    BOB,
    FORGET,
    KEY,
    LINK,
    RELATED,
    SelectSpaces,
    allow,
    config,
    recall,
    remember,
    scope_turn,
    texts,
)

from mnemon import ActionError, RouteError
from mnemon_testing import MemoryCompositionRunner

OTHER = "source:other"


def _tampered(handle: str) -> str:
    return handle[:-1] + ("0" if handle[-1] != "0" else "1")


async def _code(call: Any) -> str:
    with pytest.raises((RouteError, ActionError)) as refused:
        await call
    if isinstance(refused.value, ActionError):
        assert refused.value.receipt is not None
        assert refused.value.receipt.completion == "failed"
    return str(refused.value.code)


async def _open(directory: Path, *, second: bool = False) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    store = {"type": "sqlite", "path": str(directory / "shared.sqlite3")}
    await runner.mount(spaces, instance_id="spaces", config=config(directory, provider=store))
    if second:  # another instance on the same store: same memories, another handle key
        await runner.mount(spaces, instance_id="other", config=config(directory, provider=store))
    await runner.mount(SelectSpaces(), instance_id="strategy")
    return runner


async def _seed(runner: MemoryCompositionRunner) -> tuple[str, str]:
    """Ada's two memories, as handles of a View that is then released."""
    turn = await scope_turn(runner, ADA)
    first = (await remember(turn, "orchid greenhouse notes")).detail["memory"]
    second = (await remember(turn, "orchid watering schedule")).detail["memory"]
    await turn.execute_action(LINK, {"from": first, "to": second}, allow)
    await turn.release()
    return first, second


async def _untouched(runner: MemoryCompositionRunner) -> None:
    turn = await scope_turn(runner, ADA)
    found = await recall(turn, "orchid")
    assert sorted(texts(found)) == ["orchid greenhouse notes", "orchid watering schedule"]
    first = next(item.id for item in found.items if "greenhouse" in item.text)
    assert texts(await turn.execute_route(RELATED, {"id": first})) == ["orchid watering schedule"]
    await turn.release()


# every way an id the current View did not mint reaches a memory
FOREIGN: dict[str, Callable[[str, str, str], str]] = {
    "earlier-view": lambda earlier, current, other: earlier,
    "tampered-mac": lambda earlier, current, other: _tampered(current),
    "mac-of-another-memory": lambda earlier, current, other: (
        current.split("~")[0] + "~" + other.split("~")[1]
    ),
}


@pytest.mark.parametrize("make", FOREIGN.values(), ids=FOREIGN.keys())
async def test_forget_link_and_related_refuse_a_handle_this_view_did_not_mint(
    tmp_path: Path, make: Callable[[str, str, str], str]
) -> None:
    async with await _open(tmp_path) as runner:
        earlier, _ = await _seed(runner)
        turn = await scope_turn(runner, ADA)
        found = await recall(turn, "orchid")
        current = next(item.id for item in found.items if "greenhouse" in item.text)
        target = next(item.id for item in found.items if "watering" in item.text)
        foreign = make(earlier, current, target)
        assert foreign != current
        assert await _code(turn.execute_action(FORGET, {"id": foreign}, allow)) == "not_found"
        assert await _code(
            turn.execute_action(LINK, {"from": foreign, "to": target, "relation": "x"}, allow)
        ) == ("not_found")
        assert await _code(
            turn.execute_action(LINK, {"from": target, "to": foreign, "relation": "x"}, allow)
        ) == ("not_found")
        assert await _code(turn.execute_route(RELATED, {"id": foreign})) == "not_found"
        await turn.release()
        await _untouched(runner)


async def test_a_bare_id_is_refused_for_writes_and_looked_up_for_related(tmp_path: Path) -> None:
    async with await _open(tmp_path) as runner:
        first, second = await _seed(runner)
        bare, bare_target = first.split("~")[0], second.split("~")[0]
        turn = await scope_turn(runner, ADA)
        assert await _code(turn.execute_action(FORGET, {"id": bare}, allow)) == "not_found"
        assert await _code(
            turn.execute_action(LINK, {"from": bare, "to": bare_target, "relation": "y"}, allow)
        ) == ("not_found")
        # the documented get rule: related may name a memory exactly one visible space holds
        related = await turn.execute_route(RELATED, {"id": bare})
        assert texts(related) == ["orchid watering schedule"]
        # a handle related returned is minted for this View, so it may be written with
        minted = related.items[0].id
        assert (await turn.execute_action(FORGET, {"id": minted}, allow)).detail["forgotten"]
        await turn.release()


@pytest.mark.parametrize(
    "intruder",
    [BOB, {"tenant_id": "acme", "user_id": "ada"}],
    ids=["another-user", "another-tenant"],
)
async def test_a_handle_of_another_scope_names_nothing(
    tmp_path: Path, intruder: dict[str, str]
) -> None:
    async with await _open(tmp_path) as runner:
        await _seed(runner)
        owner = await scope_turn(runner, ADA)
        handle = (await recall(owner, "greenhouse")).items[0].id
        intruder_turn = await scope_turn(runner, intruder)
        own = (await remember(intruder_turn, "orchid of mine")).detail["memory"]
        for foreign in (handle, handle.split("~")[0]):
            assert (
                await _code(intruder_turn.execute_action(FORGET, {"id": foreign}, allow))
                == "not_found"
            )
            assert (
                await _code(intruder_turn.execute_action(LINK, {"from": own, "to": foreign}, allow))
                == "not_found"
            )
            assert await _code(intruder_turn.execute_route(RELATED, {"id": foreign})) == (
                "not_found"
            )
        await intruder_turn.release()
        await owner.release()
        await _untouched(runner)


async def test_a_handle_of_another_instance_names_nothing(tmp_path: Path) -> None:
    async with await _open(tmp_path, second=True) as runner:
        turn = await scope_turn(runner, ADA)
        first = (await remember(turn, "orchid greenhouse notes")).detail["memory"]
        second = (await remember(turn, "orchid watering schedule")).detail["memory"]
        other_forget, other_link = f"{OTHER}/forget", f"{OTHER}/link"
        # the other instance sees the same memories, under handles of its own
        theirs = await turn.execute_route(f"{OTHER}/recall", {"query": "orchid"})
        assert {item.id.split("~")[0] for item in theirs.items} == {
            first.split("~")[0],
            second.split("~")[0],
        }
        assert {item.id for item in theirs.items}.isdisjoint({first, second})
        assert await _code(turn.execute_action(other_forget, {"id": first}, allow)) == ("not_found")
        assert (
            await _code(turn.execute_action(other_link, {"from": first, "to": second}, allow))
            == "not_found"
        )
        assert await _code(turn.execute_route(f"{OTHER}/related", {"id": first})) == "not_found"
        assert (
            await _code(turn.execute_action(FORGET, {"id": theirs.items[0].id}, allow))
            == "not_found"
        )
        await turn.release()
        page = await runner.management_client(KEY, ADA).read("list", {"space": "memories"})
        assert len(page["memories"]) == 2


def test_grant_nonces_are_fresh_across_buffers_and_in_a_forked_child() -> None:
    import os

    from mnemon_source_spaces._grants import grant_value

    drawn = [grant_value("r", ())["nonce"] for _ in range(1_000)]  # several 4 KB buffers
    assert len(set(drawn)) == len(drawn)
    assert all(len(nonce) == 32 and int(nonce, 16) >= 0 for nonce in drawn)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.write(writing, grant_value("r", ())["nonce"].encode())
        os._exit(0)
    os.close(writing)
    os.waitpid(child, 0)
    with os.fdopen(reading) as pipe:
        in_child = pipe.read()
    in_parent = grant_value("r", ())["nonce"]
    assert len(in_child) == 32
    assert in_child != in_parent  # the child did not reuse the parent's buffered bytes
