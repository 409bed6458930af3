"""The starter profile end to end: the first-party Sources under the layered Strategy."""

from __future__ import annotations

from pathlib import Path

from mnemon import load_profile
from mnemon._cli._starter import starter_profile


def allow(offer: object) -> bool:
    return True


async def test_a_long_memory_is_recalled_as_an_excerpt_by_a_unique_word(tmp_path: Path) -> None:
    profile_path = tmp_path / "mnemon.toml"
    profile_path.write_text(starter_profile(), encoding="utf-8")
    filler = "The quarterly billing review covered invoices, ledgers and reconciliations. "
    long_text = (filler * 120)[:4_000] + "Remember the codeword zanzibarite. " + filler * 60
    long_text = long_text[:8_000]
    assert len(long_text) == 8_000
    scope = {"user_id": "ada", "workspace": "billing"}
    async with load_profile(profile_path).open_host() as host:
        async with host.turn(scope=scope) as turn:
            receipt = await turn.execute_action(
                "source:spaces/remember", {"text": long_text, "space": "personal"}, allow
            )
            assert receipt.completion == "committed"
        async with host.turn(scope=scope) as turn:
            evidence = await turn.execute_route("source:spaces/recall", {"query": "zanzibarite"})
    assert len(evidence.items) == 1
    item = evidence.items[0]
    # the layered policy allows 1,200 characters per recalled memory: spaces excerpts within it
    assert "zanzibarite" in item.text
    assert len(item.text) <= 1_200
    assert item.provenance["excerpt"] == {"characters": 8_000}
    assert item.metadata["excerpt"] is True
