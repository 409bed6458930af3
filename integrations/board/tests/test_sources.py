"""The Memory pages over plain HTTP, in process: records paged by kind and group, operations
as forms, writes fenced by the page's revision and said as their receipts say, bad input
named, and a third-party Source's records served with no change to the board."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from board_kit import HOSTILE, in_process

from mnemon import MemoryHost

ADA = {"user_id": "ada", "workspace": "w"}
WHO = "user=ada&workspace=w"
WHO_IN_HTML = "user=ada&amp;workspace=w"


def page_of(key: str, tail: str = "", query: str = WHO) -> str:
    return f"/sources/{quote(key, safe='')}{tail}?{query}"


def revision_of(page: str) -> str:
    found = re.search(r'name="revision" value="([^"]*)"', page)
    assert found is not None, "the page carries no revision"
    return html.unescape(found[1])


def row_ids(page: str) -> list[str]:
    return [html.unescape(found) for found in re.findall(r'<tr data-id="([^"]+)"', page)]


def link_of(page: str, css_class: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" class="{css_class}"', page)
    return html.unescape(found[1]) if found else None


async def import_memories(host: MemoryHost, space: str, texts: list[str]) -> list[str]:
    """Memories written through the public management API (as `mnemon import` does)."""
    client = host.management_client("source:spaces", ADA)
    result = await client.mutate(
        "import",
        {"space": space, "memories": [{"text": text} for text in texts]},
        confirmed=True,
        expected_revision=await client.revision(),
    )
    return [item["id"] for item in result.output["results"]]


async def add_fact(host: MemoryHost, text: str) -> str:
    client = host.management_client("source:runtime", ADA)
    revision = await client.revision()
    change = {"target": "user", "operation": "add", "text": text}
    result = await client.mutate("mutate", change, confirmed=True, expected_revision=revision)
    return str(result.output["id"])


async def post(client: httpx.AsyncClient, path: str, **fields: Any) -> Any:
    answer = await client.post(path, data={"confirmed": "yes", **fields})
    return answer.status_code, answer.json()


async def test_records_are_paged_by_kind_and_group_newest_first(starter: Path) -> None:
    async with in_process(starter) as (board, client):
        ids = await import_memories(board.host, "personal", [f"note {n}" for n in range(60)])
        await import_memories(board.host, "project", ["a decision", "another"])
        seen: list[str] = []
        path: str | None = page_of("source:spaces", query=f"{WHO}&kind=memory&group=personal")
        pages = 0
        while path is not None:
            page = (await client.get(path)).text
            rows = row_ids(page)
            assert len(rows) == (25 if pages < 2 else 10)
            seen += rows
            pages += 1
            assert (link_of(page, "first-page") is not None) == (pages > 1)
            path = link_of(page, "next-page")
        assert pages == 3
        # every memory once, newest first, as the Source lists them
        assert seen == list(reversed(ids))
        # the group picker names the scope's spaces; another group has its own records
        assert '<option value="project">project</option>' in page
        project = (await client.get(page_of("source:spaces", query=f"{WHO}&group=project"))).text
        assert len(row_ids(project)) == 2
        # the Add form of a group's page writes into that group unless told otherwise
        assert 'name="f.space" value="project"' in project
        everything = await client.get(page_of("source:spaces", query=f"{WHO}&limit=100"))
        assert len(row_ids(everything.text)) == 62
        # each record is read whole on its row, and opens the operations taking its id
        assert "&#34;text&#34;: &#34;note 59&#34;" in everything.text
        assert f"/operations/related?{WHO_IN_HTML}&amp;f.space=personal&amp;f.id={ids[-1]}" in (
            everything.text
        )


async def test_a_write_from_a_page_drawn_before_a_change_is_refused(starter: Path) -> None:
    async with in_process(starter) as (board, client):
        first = await add_fact(board.host, "Ada keeps bees")
        drawn = (await client.get(page_of("source:runtime", query=f"{WHO}&kind=fact"))).text
        assert row_ids(drawn) == [first]
        stale = revision_of(drawn)
        # the model (or another page) changes the same memory meanwhile
        await add_fact(board.host, "Ada sells honey")
        delete = page_of("source:runtime", "/records/delete")
        status, toast = await post(client, delete, kind="fact", id=first, revision=stale)
        assert (status, toast["receipt"], toast["ok"]) == (409, "conflict", False)
        assert "nothing was written" in toast["title"]
        replace = page_of("source:runtime", "/operations/mutate")
        fields = {"f.target": "user", "f.operation": "replace", "f.id": first, "f.text": "Bees!"}
        status, toast = await post(client, replace, revision=stale, **fields)
        assert (status, toast["receipt"]) == (409, "conflict")
        fresh = (await client.get(page_of("source:runtime", query=f"{WHO}&kind=fact"))).text
        assert len(row_ids(fresh)) == 2
        assert "Ada keeps bees" in fresh
        assert "Bees!" not in fresh
        # drawn again, the page's revision is current: the change goes through
        status, toast = await post(client, replace, revision=revision_of(fresh), **fields)
        assert (status, toast["receipt"]) == (200, "committed")
        assert toast["title"] == "Stored (committed)"
        now = (await client.get(page_of("source:runtime", query=f"{WHO}&kind=fact"))).text
        assert "Bees!" in now
        assert "Ada keeps bees" not in now
        status, toast = await post(client, delete, kind="fact", id=first, revision=revision_of(now))
        assert (status, toast["receipt"], toast["title"]) == (200, "deleted", "Deleted")
        after = (await client.get(page_of("source:runtime", query=f"{WHO}&kind=fact"))).text
        assert first not in row_ids(after)
        status, toast = await post(
            client, delete, kind="fact", id=first, revision=revision_of(after)
        )
        assert toast["receipt"] == "not-deleted"


async def test_every_write_says_what_the_source_said_never_more(starter: Path) -> None:
    profile = starter / "mnemon.toml"
    # spaces whose SQLite store does not wait for the disk: its writes are only accepted
    text = profile.read_text(encoding="utf-8")
    profile.write_text(
        text.replace('[entries.config.provider]\ntype = "sqlite"\n',
                     '[entries.config.provider]\ntype = "sqlite"\nsynchronous = "normal"\n'),
        encoding="utf-8",
    )  # fmt: skip
    async with in_process(starter) as (board, client):
        assert board.problem is None
        drawn = (await client.get(page_of("source:spaces"))).text
        revision = revision_of(drawn)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', drawn)
        assert key is not None
        add = page_of("source:spaces", "/records")
        memory = {"kind": "memory", "f.text": "Ada keeps bees", "f.space": "personal"}
        status, toast = await post(client, add, revision=revision, idempotency_key=key[1], **memory)
        assert (status, toast["receipt"]) == (200, "accepted")
        assert toast["title"] == "Accepted: taken, but not confirmed durable"
        # the same form sent again (a double click) writes nothing new
        status, toast = await post(client, add, revision=revision, idempotency_key=key[1], **memory)
        assert toast["receipt"] == "replayed"
        elsewhere = {**memory, "f.space": "nowhere"}
        status, toast = await post(
            client, add, revision=revision, idempotency_key="k2", **elsewhere
        )
        assert (toast["receipt"], toast["ok"]) == ("refused", False)
        assert toast["lines"] == [
            "#0: unknown-space: its space is not one of the spaces of this scope "
            "(personal, project)"
        ]
        # not confirmed: refused before anything is asked of the Source
        answer = await client.post(add, data={"revision": revision, **memory})
        assert (answer.status_code, answer.json()["receipt"]) == (422, "refused")
        remember = page_of("source:spaces", "/operations/remember")
        status, toast = await post(
            client,
            remember,
            revision=revision,
            **{"f.text": "Ada sells honey", "f.space": "personal"},
        )
        assert (status, toast["receipt"]) == (200, "accepted")
        listed = (await client.get(page_of("source:spaces", query=f"{WHO}&group=personal"))).text
        assert len(row_ids(listed)) == 2

        # documents say their writes are committed: the file is synced before the answer
        create = page_of("source:documents", "/operations/create")
        drawn = (await client.get(create)).text
        status, toast = await post(
            client, create, revision=revision_of(drawn), **{"f.title": "Plan", "f.body": "v1"}
        )
        assert (status, toast["receipt"]) == (200, "committed")
        document = next(line for line in toast["lines"] if line.startswith("document: "))
        handle = document.removeprefix("document: ")
        records = (await client.get(page_of("source:documents"))).text
        assert row_ids(records) == [handle]
        # the record's row opens update filled in from it (the kind-named input takes its id)
        update = re.search(
            r'href="(/sources/source%3Adocuments/operations/update\?[^"]*f\.document=[^"]+)"',
            records,
        )
        assert update is not None
        opened = (await client.get(html.unescape(update[1]))).text
        assert f'value="{handle}"' in opened
        assert ">v1</textarea>" in opened
        status, toast = await post(
            client,
            page_of("source:documents", "/operations/update"),
            revision=revision_of(opened),
            **{"f.document": handle, "f.body": "v2"},
        )
        assert (status, toast["receipt"]) == (200, "committed")
        read = page_of("source:documents", "/operations/read", f"{WHO}&run=1&f.document={handle}")
        assert '<span class="value">v2</span>' in (await client.get(read)).text


async def test_recall_says_why_each_memory_ranked_and_entities_say_when_partial(
    starter: Path,
) -> None:
    async with in_process(starter) as (board, client):
        ids = await import_memories(board.host, "personal", ["Ada keeps bees", "Bees swarm"])
        recall = page_of(
            "source:spaces", "/operations/recall", f"{WHO}&run=1&f.query=bees&f.mode=words"
        )
        found = (await client.get(recall)).text
        assert set(row_ids(found)) == set(ids)
        assert "<th>explain</th>" in found
        assert ">keywords: 1</td>" in found
        assert ">keywords: 2</td>" in found
        # each result opens forget and related, filled in from it
        assert f"/operations/forget?{WHO_IN_HTML}&amp;f.space=personal&amp;f.id={ids[0]}" in found
        entities = page_of("source:spaces", "/operations/entities", f"{WHO}&run=1&f.space=personal")
        complete = (await client.get(entities)).text
        assert 'class="partial"' not in complete
        assert '<dt>complete</dt><dd><span class="value">true</span>' in complete.replace("\n", "")


async def test_bad_input_is_named_and_nothing_is_read_or_written(starter: Path) -> None:
    async with in_process(starter) as (_board, client):
        assert (await client.get(page_of("source:nowhere"))).status_code == 404
        assert (
            await client.get(page_of("source:spaces", "/operations/nothing"))
        ).status_code == 404
        # the identity lacks the id the Source keeps memory by: it says which, reads nothing
        needs = (await client.get(page_of("source:documents", query="user=ada"))).text
        assert "This Source keeps its memory per workspace: fill in workspace" in needs
        assert "<table" not in needs
        invalid = await client.get(page_of("source:runtime", query="user=" + "a" * 400))
        assert "user: " in invalid.text
        assert "<table" not in invalid.text
        # a read's input is checked against its schema: the field is named, not the value
        recall = page_of("source:spaces", "/operations/recall", f"{WHO}&run=1&f.query=bees")
        wrong = await client.get(recall + "&f.limit=lots")
        assert wrong.status_code == 422
        assert 'data-error-for="limit">must be a number</p>' in wrong.text
        too_many = await client.get(recall + "&f.limit=99")
        assert 'data-error-for="limit">must be at most 20</p>' in too_many.text
        # a record too long for its schema is refused by field before the Source is asked
        drawn = (await client.get(page_of("source:runtime", query=f"{WHO}&kind=fact"))).text
        long = "x" * 5000
        status, toast = await post(
            client,
            page_of("source:runtime", "/records"),
            kind="fact",
            revision=revision_of(drawn),
            **{"f.text": long},
        )
        assert (status, list(toast["errors"])) == (422, ["text"])
        assert long not in str(toast)
        assert row_ids((await client.get(page_of("source:runtime", query=WHO))).text) == []
        # a kind the Source does not hold, a record without its id
        delete = page_of("source:runtime", "/records/delete")
        status, toast = await post(client, delete, kind="memory", id="u1", revision="r0")
        assert status == 422
        status, toast = await post(client, delete, kind="fact", id="", revision="r0")
        assert (status, list(toast["errors"])) == (422, ["id"])
        # without the page's CSRF token, nothing is even read
        del client.headers["X-CSRF-Token"]
        refused = await client.post(delete, data={"kind": "fact", "id": "u1", "confirmed": "yes"})
        assert refused.status_code == 403


async def test_a_third_party_source_declaring_records_gets_its_pages(third_party: Path) -> None:
    async with in_process(third_party) as (_board, client):
        listed = (await client.get(f"/sources?{WHO}")).text
        assert "Weather observations" in listed
        records = page_of("source:weather")
        drawn = (await client.get(records)).text
        assert "Observation" in drawn
        assert row_ids(drawn) == []
        add = page_of("source:weather", "/records")
        fields = {"kind": "observation", "f.city": "Faro", "f.note": "Warm wind"}
        status, toast = await post(
            client, add, revision=revision_of(drawn), idempotency_key="obs-1", **fields
        )
        assert (status, toast["receipt"], toast["lines"]) == (200, "committed", ["id: o1"])
        now = (await client.get(records)).text
        assert row_ids(now) == ["o1"]
        again = {"revision": revision_of(now), "idempotency_key": "obs-1"}
        status, toast = await post(client, add, **again, **fields)
        assert toast["receipt"] == "replayed"
        hail = {**fields, "f.note": "hail at noon"}
        status, toast = await post(client, add, **again | {"idempotency_key": "obs-2"}, **hail)
        assert toast["receipt"] == "refused"
        assert toast["lines"] == ["#0: invalid-record: note: hail is not kept here"]
        # a bound its record schema declares is checked before the Source is asked
        cold = {**fields, "f.temperature": "-120"}
        status, toast = await post(client, add, **again, **cold)
        assert (status, toast["errors"]) == (422, {"temperature": "must be at least -90"})
        # another identity's observations are its own
        assert row_ids((await client.get(page_of("source:weather", query="user=bob"))).text) == []
        delete = page_of("source:weather", "/records/delete")
        status, toast = await post(
            client, delete, kind="observation", id="o1", revision=revision_of(now)
        )
        assert toast["receipt"] == "deleted"
        assert row_ids((await client.get(records)).text) == []


# the first-party Sources refuse control and bidi characters in memory (the memory text rule);
# markup they keep as text
MARKUP = HOSTILE.split(" \u202e")[0]


def assert_inert(shown: str, where: str) -> None:
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in shown, where
    assert "<script>window" not in shown, where
    assert "<img" not in shown, where
    assert 'href="javascript' not in shown, where


async def test_memory_text_is_escaped_wherever_it_is_shown(starter: Path) -> None:
    async with in_process(starter) as (board, client):
        await import_memories(board.host, "personal", [f"bees {MARKUP}"])
        await add_fact(board.host, MARKUP)
        for path in (
            page_of("source:spaces"),
            page_of("source:runtime", query=f"{WHO}&kind=fact"),
            page_of("source:spaces", "/operations/recall", f"{WHO}&run=1&f.query=bees"),
            page_of("source:spaces", "/operations/list", f"{WHO}&run=1&f.space=personal"),
            page_of("source:runtime", "/operations/read", f"{WHO}&run=1"),
            page_of("source:runtime", "/operations/mutate", f"{WHO}&f.text={quote(MARKUP)}"),
        ):
            assert_inert((await client.get(path)).text, path)


async def test_a_bidi_override_in_a_record_is_shown_as_its_escape(third_party: Path) -> None:
    async with in_process(third_party) as (board, client):
        client_ = board.host.management_client("source:weather", ADA)
        record = {"city": "Faro", "note": HOSTILE}
        await client_.mutate(
            "records-write",
            {"kind": "observation", "records": [{"record": record, "idempotency_key": "h"}]},
            confirmed=True,
            expected_revision=await client_.revision(),
        )
        shown = (await client.get(page_of("source:weather"))).text
        assert_inert(shown, "records")
        # shown as its escape, never obeyed (only a form field keeps the character itself)
        assert "\\u202eevil" in shown
        assert "\u202e" not in re.sub(r"<textarea[^>]*>.*?</textarea>", "", shown, flags=re.S)
        # the delete's question carries it escaped too (the script sets it as text)
        assert 'data-confirm="Delete Observation o1 from source:weather' in shown
