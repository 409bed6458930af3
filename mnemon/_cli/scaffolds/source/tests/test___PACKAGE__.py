"""The Source composes through a real host, as it will in an agent."""

from __future__ import annotations

from pathlib import Path

from mnemon_testing import MemoryCompositionRunner, SelectAll

import __PACKAGE__


def allow(offer: object) -> bool:
    return True


async def test_an_added_item_shows_in_the_next_view_and_is_found(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(__PACKAGE__, instance_id="items", config={"data_dir": str(tmp_path)})
        await runner.mount(SelectAll(), instance_id="strategy")
        scope = {"user_id": "ada"}
        turn = await runner.begin_turn({"scope": scope})
        receipt = await turn.execute_action("source:items/add", {"text": "Buy oat milk"}, allow)
        assert receipt.completion == "committed"
        await turn.release()

        turn = await runner.begin_turn({"scope": scope})
        assert [fragment.text for fragment in turn.view.fragments] == ["- Buy oat milk"]
        evidence = await turn.execute_route("source:items/search", {"query": "milk"})
        assert [item.text for item in evidence.items] == ["Buy oat milk"]
        await turn.release()

        other = await runner.begin_turn({"scope": {"user_id": "grace"}})
        assert other.view.fragments == ()
        await other.release()


async def test_a_scope_without_a_user_is_unavailable(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(__PACKAGE__, instance_id="items", config={"data_dir": str(tmp_path)})
        await runner.mount(SelectAll(), instance_id="strategy")
        turn = await runner.begin_turn({"scope": {"workspace": "billing"}})
        assert turn.view.consistency == ()
        await turn.release()
