"""The management plane's reads and links for people: recall with explain, related, entities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spaces_kit import ADA, BOB, KEY, open_spaces
from spaces_test_provider import memory_provider
from test_spaces import WithProviders

from mnemon import ManagementError
from mnemon_testing import MemoryCompositionRunner


async def _add(runner: MemoryCompositionRunner, memories: list[dict[str, Any]]) -> list[str]:
    client = runner.management_client(KEY, ADA)
    output = (
        await client.mutate(
            "import",
            {"space": "memories", "memories": memories},
            confirmed=True,
            expected_revision=await client.revision(),
        )
    ).output
    return [result["id"] for result in output["results"]]


async def _mutate(runner: MemoryCompositionRunner, operation: str, payload: dict[str, Any]) -> Any:
    client = runner.management_client(KEY, ADA)
    revision = await client.revision()
    result = await client.mutate(operation, payload, confirmed=True, expected_revision=revision)
    return result.output


async def test_recall_gives_whole_memories_by_id_each_saying_why_it_ranked(
    tmp_path: Path,
) -> None:
    async with await open_spaces(tmp_path) as runner:
        ids = await _add(
            runner,
            [
                {"text": "Ada keeps bees on the roof", "tags": ["bees"], "entities": ["Ada"]},
                {"text": "The bees swarmed in May", "entities": ["Ada"]},
                {"text": "Bob sells honey"},
            ],
        )
        client = runner.management_client(KEY, ADA)
        found = await client.read("recall", {"query": "bees", "mode": "words"})
        assert found["mode"] == "words"
        results = found["results"]
        assert {result["id"] for result in results} == set(ids[:2])
        # recall by meaning is off here: the keyword rank is said all the same, for people
        assert [dict(result["explain"]) for result in results] == [
            {"keywords": 1},
            {"keywords": 2},
        ]
        assert {result["tier"] for result in results} <= {"strong", "related", "weak"}
        first = next(result for result in results if result["id"] == ids[0])
        assert first["text"] == "Ada keeps bees on the roof"
        assert first["space"] == "memories"
        assert (list(first["tags"]), list(first["entities"])) == (["bees"], ["Ada"])
        # another identity's memories are never found
        other = await runner.management_client(KEY, BOB).read("recall", {"query": "bees"})
        assert list(other["results"]) == []
        # meaning alone while it is off is refused, never answered by keywords instead
        with pytest.raises(ManagementError) as refused:
            await client.read("recall", {"query": "bees", "mode": "meaning"})
        assert refused.value.code == "unsupported"
        with pytest.raises(ManagementError) as unknown:
            await client.read("recall", {"query": "bees", "spaces": ["elsewhere"]})
        assert unknown.value.code == "invalid_payload"


async def test_link_then_related_shows_the_link_from_both_ends(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        bees, honey, wax = await _add(
            runner, [{"text": "Ada keeps bees"}, {"text": "Ada sells honey"}, {"text": "Wax"}]
        )
        linked = await _mutate(
            runner, "link", {"space": "memories", "from": bees, "to": honey, "relation": "feeds"}
        )
        assert linked["created"] is True
        assert linked["completion"] == "committed"
        again = await _mutate(runner, "link", {"space": "memories", "from": bees, "to": honey})
        assert again["created"] is True  # another relation (the default `related`) is new
        client = runner.management_client(KEY, ADA)
        related = await client.read("related", {"space": "memories", "id": honey})
        assert [(m["id"], m["relation"], m["direction"]) for m in related["related"]] == [
            (bees, "related", "incoming"),
            (bees, "feeds", "incoming"),
        ]
        assert related["related"][0]["text"] == "Ada keeps bees"
        assert not (await client.read("related", {"space": "memories", "id": wax}))["related"]
        with pytest.raises(ManagementError) as missing:
            await _mutate(
                runner, "link", {"space": "memories", "from": bees, "to": "m-" + "0" * 32}
            )
        assert missing.value.code == "not_found"


async def test_entities_from_the_index_are_complete(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        await _add(
            runner,
            [
                {"text": "one", "entities": ["Ada", "Bob"]},
                {"text": "two", "entities": ["Ada"]},
                {"text": "three", "entities": ["Carol"]},
            ],
        )
        client = runner.management_client(KEY, ADA)
        index = await client.read("entities", {"space": "memories"})
        assert index["complete"] is True
        assert index["counted"] == "index"
        assert dict(index["entities"][0]) == {"name": "Ada", "memories": 2}
        assert {e["name"] for e in index["entities"]} == {"Ada", "Bob", "Carol"}
        some = await client.read("entities", {"space": "memories", "prefix": "c", "limit": 5})
        assert [dict(e) for e in some["entities"]] == [{"name": "Carol", "memories": 1}]


async def test_entities_counted_over_a_listing_cut_short_are_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a Provider that lists but keeps no entity index: the count stands on what list() gave
    from mnemon_source_spaces import _management

    monkeypatch.setattr(_management, "MAX_ENTITY_LISTING", 100)
    plugin = WithProviders(
        memory_provider(["search", "list", "remember", "forget"], type_id="listing")
    )
    async with await open_spaces(tmp_path, plugin=plugin, provider={"type": "listing"}) as runner:
        await _add(runner, [{"text": f"note {n}", "entities": ["Ada"]} for n in range(60)])
        client = runner.management_client(KEY, ADA)
        whole = await client.read("entities", {"space": "memories"})
        assert (whole["complete"], whole["counted"]) == (True, "listed")
        assert [dict(e) for e in whole["entities"]] == [{"name": "Ada", "memories": 60}]
        await _add(runner, [{"text": f"more {n}", "entities": ["Bob"]} for n in range(150)])
        cut = await client.read("entities", {"space": "memories"})
        assert cut["complete"] is False
        assert sum(e["memories"] for e in cut["entities"]) == 100
