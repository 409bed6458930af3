"""A turn on an unchanged workspace reuses what the last one read; any change is still seen."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import pytest

KEY = "source:docs"
Harness = Any  # the `harness` fixture of conftest.py


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    original = sqlite3.connect

    def counting(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(database))
        return original(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    return opened


async def _revision(harness: Harness) -> str | None:
    turn = await harness.turn()
    try:
        [pinned] = [item for item in turn.view.consistency if item.source_key == KEY]
        return pinned.revision
    finally:
        await turn.release()


async def test_an_unchanged_workspace_opens_no_connection_for_a_turn(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    connections.clear()
    assert await _revision(mounted) == first
    assert await _revision(mounted) == first
    assert connections == []


async def test_an_edit_in_place_is_seen_by_the_next_turn(
    mounted: Harness, connections: list[str]
) -> None:
    created = await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    path = mounted.folder() / "documents" / f"{created.detail['document']}.md"
    with path.open("r+b") as file:  # in place: the folder itself does not change
        file.seek(0, os.SEEK_END)
        file.write(b" and then flies")
    second = await _revision(mounted)
    assert second != first
    evidence = await mounted.search("flies")
    assert [item.provenance["title"] for item in evidence.items] == ["Heron"]


async def test_a_document_written_by_another_runtime_is_seen(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    documents = mounted.folder() / "documents"
    [existing] = list(documents.glob("doc-*.md"))
    (documents / ("doc-" + "0" * 24 + ".md")).write_bytes(
        existing.read_bytes().replace(b"Heron", b"Egret")
    )
    assert await _revision(mounted) != first
    assert {item["title"] for item in await mounted.listed()} == {"Heron", "Egret"}


async def test_a_replaced_index_is_verified_again_before_it_is_trusted(
    mounted: Harness, connections: list[str]
) -> None:
    await mounted.create("Heron", "the heron stands still")
    first = await _revision(mounted)
    index = mounted.folder() / "index.sqlite3"
    index.write_bytes(b"not a database at all" * 100)
    connections.clear()
    assert await _revision(mounted) == first
    assert connections  # the damaged index was opened, found wrong and rebuilt
    evidence = await mounted.search("heron")
    assert [item.provenance["title"] for item in evidence.items] == ["Heron"]
