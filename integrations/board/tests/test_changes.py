"""Changes through the board, in process (its public `Board` and `create_app`, over HTTP):
what is saved to mnemon.toml, what the host serves after, and what is refused."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from board_kit import SECRET
from mnemon_board import Board, create_app

HOST = "127.0.0.1:8766"


@asynccontextmanager
async def opened(folder: Path) -> AsyncIterator[tuple[Board, httpx.AsyncClient]]:
    """The board of `folder`'s profile, and a client holding its token and CSRF token."""
    async with Board.open(folder / "mnemon.toml") as board:
        app = create_app(board, token="t0ken", hosts=[HOST], port=8766)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
            assert (await client.get("/?token=t0ken")).status_code == 303
            page = (await client.get("/plugins")).text
            found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
            assert found is not None
            client.headers.update({"X-CSRF-Token": found[1], "Accept": "application/json"})
            yield board, client


def generation(board: Board) -> Any:
    return (board.host.inspect().get("serving") or {}).get("generation_id")


def entry_ids(board: Board) -> list[str]:
    return sorted(board.host.inspect()["entries"])


async def test_a_change_the_plugin_refuses_leaves_the_file_and_the_host_as_they_were(
    third_party: Path,
) -> None:
    async with opened(third_party) as (board, client):
        before, serving = board.profile.path.read_bytes(), generation(board)
        refused = await client.post(
            "/options/apply", data={"entry": "weather", "f.city": "nowhere"}
        )
        assert refused.status_code == 422
        answer = refused.json()
        assert answer["ok"] is False
        assert "nothing changed" in answer["title"]
        # the host's own words: the Source's factory failed, so the candidate was rejected
        assert "was not applied" in answer["errors"][""] or "rejected" in answer["errors"][""]
        assert "no weather there" not in str(answer)  # a plugin's exception text never shows
        assert board.profile.path.read_bytes() == before
        assert generation(board) == serving
        async with board.host.turn(scope={"user_id": "ada"}) as turn:
            assert "Sunny in Lisbon." in turn.wake()


async def test_every_kind_of_field_saves_what_it_declares(third_party: Path) -> None:
    async with opened(third_party) as (board, client):
        serving = generation(board)
        applied = await client.post(
            "/options/apply",
            data={
                "entry": "weather",
                "f.city": "Porto",
                "f.max_items": "12",
                "f.tags": "sun\n\nrain \n",
                "f.notes": "line one\r\nline two",
                "f.sources": ["source:runtime", "source:weather"],
                "f.access_key": "",  # left empty: the secret is kept
            },
        )
        assert applied.status_code == 200, applied.text
        assert applied.json()["ok"] is True
        # switches and selectors apply alone
        for field, value in (("units", "imperial"), ("verbose", "true")):
            alone = await client.post(
                "/options/apply", data={"entry": "weather", "only": field, f"f.{field}": value}
            )
            assert alone.json()["ok"] is True, alone.text
        text = board.profile.path.read_text(encoding="utf-8")
        assert 'city = "Porto"' in text
        assert "max_items = 12" in text
        assert 'tags = ["sun", "rain"]' in text
        assert 'notes = "line one\\nline two"' in text
        assert 'sources = ["source:runtime", "source:weather"]' in text
        assert 'units = "imperial"' in text
        assert "verbose = true" in text
        assert f'access_key = "{SECRET}"' in text
        # the file's comments stay where they were
        assert "# the weather notes, from a drop-in plugin\n[[entries]]" in text
        assert generation(board) != serving
        async with board.host.turn(scope={"user_id": "ada"}) as turn:
            assert "Sunny in Porto." in turn.wake()

        # a new secret replaces the old one, and no answer ever shows either
        replaced = await client.post(
            "/options/apply", data={"entry": "weather", "f.access_key": "sk-new-ONE"}
        )
        assert replaced.json()["lines"] == ["weather.access_key: ••••••"]
        page = (await client.get("/options")).text
        assert "sk-new-ONE" not in page
        assert SECRET not in page
        assert 'access_key = "sk-new-ONE"' in board.profile.path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"f.max_items": "51"}, "max_items", "must be at most 50"),
        ({"f.max_items": "0"}, "max_items", "must be at least 1"),
        ({"f.max_items": "2.5"}, "max_items", "must be a whole number"),
        ({"f.max_items": "many"}, "max_items", "must be a number"),
        ({"f.city": "x" * 41}, "city", "must be at most 40 characters long"),
        ({"f.units": "kelvin"}, "units", "must be one of: metric, imperial"),
        ({"f.tags": "a\nb\nc\nd\ne"}, "tags", "takes at most 4 items"),
    ],
    ids=["above", "below", "fraction", "not-a-number", "too-long", "not-a-choice", "too-many"],
)
async def test_an_invalid_value_names_its_field_and_changes_nothing(
    third_party: Path, fields: dict[str, str], field: str, message: str
) -> None:
    async with opened(third_party) as (board, client):
        before, serving = board.profile.path.read_bytes(), generation(board)
        refused = await client.post(
            "/options/apply", data={"entry": "weather", "f.city": "Faro", **fields}
        )
        assert refused.status_code == 422
        assert refused.json()["errors"] == {field: message}
        assert board.profile.path.read_bytes() == before
        assert generation(board) == serving


async def test_without_scripts_a_form_gets_the_page_back_with_its_errors(
    third_party: Path,
) -> None:
    async with opened(third_party) as (_board, client):
        refused = await client.post(
            "/options/apply",
            data={"entry": "weather", "f.max_items": "99"},
            headers={"Accept": "text/html"},
        )
        assert refused.status_code == 422
        assert "must be at most 50" in refused.text
        assert 'value="99"' in refused.text  # what was typed stays, to be corrected
        done = await client.post(
            "/options/apply",
            data={"entry": "weather", "f.max_items": "9"},
            headers={"Accept": "text/html"},
        )
        assert done.status_code == 303
        page = await client.get(done.headers["location"])
        assert "weather.max_items: 9" in page.text
        assert 'action="/undo"' in page.text


async def test_a_switch_blocked_by_a_missing_requirement_says_so_and_changes_nothing(
    starter: Path,
) -> None:
    async with opened(starter) as (board, client):
        off = await client.post("/plugins/switch", data={"entry": "spaces", "on": "false"})
        assert off.json()["ok"] is True
        before = board.profile.path.read_bytes()
        preview = (
            await client.post("/plugins/preview", data={"entry": "auto-capture", "on": "true"})
        ).json()
        assert preview["ok"] is False
        assert (
            "requires source.durable-evidence, which nothing switched on provides"
            in preview["html"]
        )
        refused = await client.post("/plugins/switch", data={"entry": "auto-capture", "on": "true"})
        assert refused.status_code == 409
        assert refused.json()["ok"] is False
        assert board.profile.path.read_bytes() == before
        assert "auto-capture" not in entry_ids(board)


async def test_undo_puts_back_the_very_bytes_and_the_entries(starter: Path) -> None:
    async with opened(starter) as (board, client):
        before, mounted = board.profile.path.read_bytes(), entry_ids(board)
        first = (
            await client.post("/plugins/switch", data={"entry": "scoped", "on": "true"})
        ).json()
        assert first["lines"] == ["scoped: On"]
        assert "scoped" in entry_ids(board)
        second = (
            await client.post("/plugins/switch", data={"plugin": "general", "on": "true"})
        ).json()
        assert second["lines"] == ["general: On"]
        # the older change cannot be undone before the newer one
        early = await client.post("/undo", data={"token": first["undo"]})
        assert early.status_code == 409
        assert "undo the later changes first" in early.json()["lines"][0]
        for token in (second["undo"], first["undo"]):
            undone = await client.post("/undo", data={"token": token})
            assert undone.json()["title"] == "Undone"
        assert board.profile.path.read_bytes() == before
        assert entry_ids(board) == mounted
        again = await client.post("/undo", data={"token": first["undo"]})
        assert again.status_code == 409


async def test_an_edit_made_outside_the_board_is_taken_up_or_refused(starter: Path) -> None:
    async with opened(starter) as (board, client):
        path = board.profile.path
        path.write_text(path.read_text(encoding="utf-8").replace(
            'id = "light-context"\nplugin = "light-context"\nenabled = false',
            'id = "light-context"\nplugin = "light-context"\nenabled = true',
        ), encoding="utf-8")  # fmt: skip
        # a change made from a page drawn before the edit is refused, naming why
        stale = await client.post("/plugins/switch", data={"entry": "scoped", "on": "true"})
        assert stale.status_code == 409
        assert "changed outside the board" in stale.json()["lines"][0]
        # drawing a page takes the edit up: the host serves what the file says
        await client.get("/plugins")
        assert "light-context" in entry_ids(board)
        # an edit that cannot be applied is said on every page, and changes nothing
        path.write_text(
            path.read_text(encoding="utf-8") + "\n[[entries]]\nid = 3\n", encoding="utf-8"
        )
        page = (await client.get("/status")).text
        assert "was changed outside the board and cannot be applied" in page
        assert "entries[7].id" in page
        assert "light-context" in entry_ids(board)


async def test_a_profile_that_cannot_mount_still_opens_and_is_mended_from_the_board(
    starter: Path,
) -> None:
    path = starter / "mnemon.toml"
    text = path.read_text(encoding="utf-8") + '\n[[entries]]\nid = "gone"\nuse = "no_such_plugin"\n'
    path.write_text(text, encoding="utf-8")
    async with opened(starter) as (board, client):
        assert board.problem is not None
        assert "entry 'gone' use: cannot import 'no_such_plugin'" in board.problem
        assert entry_ids(board) == []
        page = (await client.get("/plugins")).text
        assert "could not be applied" in page
        assert 'data-testid="switch-gone"' in page
        mended = await client.post("/plugins/switch", data={"entry": "gone", "on": "false"})
        assert mended.json()["ok"] is True, mended.text
        assert board.problem is None
        assert entry_ids(board) == ["documents", "layered", "runtime", "spaces"]


SUNSHINE_MANIFEST = """\
[plugin]
id = "sunshine"
version = "1.0.0"
display_name = "Sunshine"
description = "Weather notes too, and the only ones: its capability is exclusive."
mnemon = ">=0.1.0 <0.2.0"

[[plugin.contributes.entries]]
name = "sunshine"
plugin = "sunshine_source"
installs = ["source"]
"""

SUNSHINE_SOURCE = """
from mnemon.sdk import (
    SourceFacts, ViewContribution, define_memory_plugin, define_memory_source, install_memory,
)

memory_plugin = define_memory_plugin(
    "sunshine-source", "Sunshine", "Exclusive weather notes.", ["source"],
    [{"id": "weather.notes", "exclusive": True}],
)


class Sunshine:
    def __init__(self, init):
        self.key = init.instance_key

    async def facts(self, request):
        return SourceFacts(instance_key=self.key, type_id="sunshine", role="notes",
                           availability="ready", revision="1", capabilities=["project"])

    async def project(self, request):
        return ViewContribution()


SOURCE = define_memory_source(
    {"type_id": "sunshine", "package_name": "sunshine-source", "role": "notes",
     "capabilities": ["project"], "consistency": "exact-snapshot"}, Sunshine)


def apply(ctx):
    install_memory(ctx, plugin=memory_plugin, sources=[SOURCE])
"""


async def test_a_plugin_that_cannot_run_says_why_and_an_exclusive_one_moves_the_other(
    third_party: Path,
) -> None:
    plugins = third_party / ".mnemon" / "plugins"
    (plugins / "broken").mkdir()
    (plugins / "broken" / "mnemon-plugin.toml").write_text("[plugin\nid = ", encoding="utf-8")
    (plugins / "sunshine" / "sunshine_source").mkdir(parents=True)
    (plugins / "sunshine" / "mnemon-plugin.toml").write_text(SUNSHINE_MANIFEST, encoding="utf-8")
    (plugins / "sunshine" / "sunshine_source" / "__init__.py").write_text(
        SUNSHINE_SOURCE, encoding="utf-8"
    )
    async with opened(third_party) as (board, client):
        page = (await client.get("/plugins")).text
        broken = page.split('id="plugin-broken"')[1].split("</section>")[0]
        assert "Cannot run:" in broken
        assert "invalid-toml" in broken
        assert "data-testid=" not in broken  # no switch for what cannot run

        preview = (
            await client.post("/plugins/preview", data={"plugin": "sunshine", "on": "true"})
        ).json()
        assert preview["ok"] is True
        assert "sunshine: On" in preview["html"]
        assert (
            "weather: Off (it provides weather.notes too, and one of them is exclusive)"
            in preview["html"]
        )
        switched = (
            await client.post("/plugins/switch", data={"plugin": "sunshine", "on": "true"})
        ).json()
        assert switched["ok"] is True, switched
        assert entry_ids(board) == ["general", "runtime", "sunshine"]
        text = board.profile.path.read_text(encoding="utf-8")
        assert '[[entries]]\nid = "sunshine"\nplugin = "sunshine"\n' in text
        assert re.search(r'id = "weather"\nplugin = "weather"\nenabled = false\n', text)
