"""Turn after turn, the Source reuses what it derived for a scope, never another scope's.

The spaces a scope sees, the facts given for them while the Provider says the same, and the
projected cover are kept between turns; the read grant (and the nonce its handles are bound
to) is new for every View.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mnemon_source_spaces import ProviderStatus
from mnemon_source_spaces import _calls as calls_module
from spaces_kit import open_spaces, recall, remember, scope_turn

ADA = {"user_id": "ada"}
ADA_IN_ACME = {"user_id": "ada", "tenant_id": "acme"}
BOB = {"user_id": "bob"}


async def test_scopes_taking_turns_in_turn_each_keep_their_own_spaces(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        for scope, text in ((ADA, "Ada keeps bees"), (ADA_IN_ACME, "Acme's Ada keeps goats")):
            turn = await scope_turn(runner, scope)
            await remember(turn, text)
            await turn.release()
        seen: dict[str, set[tuple[Any, ...]]] = {}
        for _ in range(3):
            for name, scope in (("ada", ADA), ("acme", ADA_IN_ACME), ("bob", BOB)):
                turn = await scope_turn(runner, scope)
                found = await recall(turn, "keeps")
                [pinned] = turn.view.consistency
                [grant] = turn.view.grants
                seen.setdefault(name, set()).add(
                    (pinned.revision, tuple(item.text for item in found.items))
                )
                seen.setdefault(f"{name} grants", set()).add(grant.digest)
                await turn.release()
    assert seen["ada"] == {(next(iter(seen["ada"]))[0], ("Ada keeps bees",))}
    assert seen["acme"] == {(next(iter(seen["acme"]))[0], ("Acme's Ada keeps goats",))}
    assert seen["bob"] == {(next(iter(seen["bob"]))[0], ())}
    revisions = {next(iter(seen[name]))[0] for name in ("ada", "acme", "bob")}
    assert len(revisions) == 3
    # a new grant (a new nonce for the handles it mints) for each of the three Views
    assert all(len(seen[f"{name} grants"]) == 3 for name in ("ada", "acme", "bob"))


async def test_a_change_of_the_providers_health_shows_at_the_next_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health = ["ready"]
    original = calls_module.ProviderCalls.status

    async def status(self: Any, pinned: Any, *, count: bool) -> ProviderStatus:
        found = await original(self, pinned, count=count)
        if health[-1] == "ready":
            return found
        return ProviderStatus(availability="degraded", reason="upstream-maintenance")

    monkeypatch.setattr(calls_module.ProviderCalls, "status", status)
    codes: list[list[str]] = []
    async with await open_spaces(tmp_path) as runner:
        for state in ("ready", "ready", "degraded", "degraded", "ready"):
            health.append(state)
            turn = await scope_turn(runner, ADA)
            codes.append([item.code for item in turn.view.diagnostics])
            await turn.release()
    assert codes == [[], [], ["source-degraded"], ["source-degraded"], []]
