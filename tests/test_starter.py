"""The starter profile end to end: the first-party Sources under the layered Strategy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnemon import Evidence, MutationReceipt, View, load_profile
from mnemon._cli._starter import starter_profile
from tests.second_memory import ADA, API_KEY, Command, nexent_service, with_second_memory


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


# ---------------------------------------------------------------------- a second long-term memory


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with nexent_service(monkeypatch) as running:
        yield running


def test_a_raven_and_a_nexent_entry_added_to_the_starter_profile_serve_beside_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: Any
) -> None:
    mnemon = Command(tmp_path, monkeypatch)
    profile_path = with_second_memory(mnemon, tmp_path, service.url)
    message = {"messages": [{"role": "user", "content": "Ada's green tea comes from Uji."}]}
    stored = mnemon("act", "source:raven/store", json.dumps(message), "--yes", "--user", "ada")
    assert stored.status == 0, stored.stderr
    # no tenant in the scope: Nexent's requests carry an empty one
    service.memories[("", "ada", None)].append(
        {"id": "ext-1", "content": "Ada brews green tea at 70 degrees."}
    )

    async def two_turns() -> tuple[View, str, MutationReceipt, Evidence]:
        async with load_profile(profile_path).open_host() as host:
            async with host.turn(scope=ADA) as turn:
                spaces = {"text": "Ada drinks green tea every morning.", "space": "personal"}
                receipt = await turn.execute_action("source:spaces/remember", spaces, allow)
                view, wake = turn.view, turn.wake()
            async with host.turn(scope=ADA) as turn:
                found = await turn.execute_route("source:spaces/recall", {"query": "green tea"})
        return view, wake, receipt, found

    view, wake, receipt, found = anyio.run(two_turns)
    # one recall for the model; the other memories are read through it
    assert "source:spaces/recall" in [route.id for route in view.routes]
    assert not [r.id for r in view.routes if r.source_key in ("source:raven", "source:mem0")]
    assert [route.id for route in view.policy_routes] == [
        "source:mem0/search",
        "source:raven/recall",
    ]
    assert "reads all 3 long-term memory Sources at once" in wake
    assert "source:raven/recall" not in wake.split("## Memory routes and actions")[1]
    # writes still go to spaces, as the starter profile says
    assert {offer.source_key for offer in view.offers} == {
        "source:runtime",
        "source:documents",
        "source:spaces",
    }
    assert receipt.completion == "committed"
    assert found.output == {
        "status": "fused",
        "sources": ("source:spaces", "source:mem0", "source:raven"),
    }
    came_from = {item.text: item.provenance["source_key"] for item in found.items}
    assert came_from == {
        "Ada drinks green tea every morning.": "source:spaces",
        "Ada brews green tea at 70 degrees.": "source:mem0",
        "Ada's green tea comes from Uji.": "source:raven",
    }
    scales = {
        entry["source_key"]: entry["score_scale"]
        for item in found.items
        for entry in item.provenance["sources"]
    }
    assert scales == {
        "source:spaces": "normalized",
        "source:raven": "normalized",
        "source:mem0": "provider-native",
    }
    assert API_KEY not in str(found.model_dump()) + wake
    # a person's `mnemon recall` reads the profile's first long-term memory, not the first by key
    recalled = mnemon("recall", "green tea", "--user", "ada", "--json")
    assert recalled.status == 0, recalled.stderr
    assert json.loads(recalled.stdout)["source_key"] == "source:spaces"
