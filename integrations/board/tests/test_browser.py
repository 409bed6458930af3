"""The board in a real browser (Debian's Chromium, driven by Playwright), as a person uses it.

Each test writes screenshots of the pages it visits under `.screenshots/`, for a reviewer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from board_kit import HOSTILE, SECRET, Running, screenshot, start_board, stop_board
from playwright.sync_api import Page, expect

TIMEOUT = 30_000  # ms a page has to react on a loaded machine: a deadline, not a measurement


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


def opened(page: Page, board: Running, path: str = "/plugins") -> Page:
    page.goto(f"{board.base}{path}{'&' if '?' in path else '?'}token={board.token}")
    expect(page.locator("main h1")).to_be_visible()
    return page


def view_sources(page: Page, board: Running) -> set[str]:
    """The Sources of a View composed now (Status page, for ada in workspace w)."""
    page.goto(f"{board.base}/status?user=ada&workspace=w")
    return set(page.locator(".card.state-healthy").evaluate_all(
        "cards => cards.map(card => card.dataset.source)"
    ))  # fmt: skip


def test_switch_a_source_off_see_the_next_view_change_and_undo_it(
    page: Page, board: Running
) -> None:
    before = board.profile.read_text(encoding="utf-8")
    opened(page, board, "/status?user=ada&workspace=w")
    assert "source:documents" in view_sources(page, board)
    screenshot(page, "status-starter")

    page.goto(f"{board.base}/plugins")
    screenshot(page, "plugins-starter")
    page.get_by_test_id("switch-documents").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("documents: Off")
    screenshot(page, "plugins-confirm-switch")
    dialog.get_by_role("button", name="Confirm").click()
    toast = page.locator("#toasts .toast")
    expect(toast).to_contain_text("documents: Off")
    expect(page.get_by_test_id("switch-documents")).to_have_attribute("aria-checked", "false")
    screenshot(page, "plugins-toast-undo")
    text = board.profile.read_text(encoding="utf-8")
    assert 'id = "documents"\nplugin = "documents"\nenabled = false\n' in text
    # every comment of the file is still there
    assert [line for line in before.splitlines() if line.startswith("#")] == [
        line for line in text.splitlines() if line.startswith("#")
    ]

    # the next View: documents is gone from it and its card says off
    sources = view_sources(page, board)
    assert "source:documents" not in sources
    assert "source:runtime" in sources
    expect(page.locator('[data-source="source:documents"]')).to_contain_text("Off")

    # Undo (from the Plugins page's toast) puts the file and the View back
    page.goto(f"{board.base}/plugins")
    page.get_by_test_id("switch-documents").click()
    page.locator("dialog#confirm").get_by_role("button", name="Cancel").click()
    expect(page.get_by_test_id("switch-documents")).to_have_attribute("aria-checked", "false")
    page.get_by_test_id("switch-documents").click()
    page.locator("dialog#confirm").get_by_role("button", name="Confirm").click()
    expect(page.locator("#toasts .toast")).to_contain_text("documents: On")
    page.locator("#toasts .toast").get_by_role("button", name="Undo").click()
    expect(page.locator("#toasts .toast")).to_contain_text("Undone")
    expect(page.get_by_test_id("switch-documents")).to_have_attribute("aria-checked", "false")


def test_a_switch_says_what_else_it_moves_before_and_after(page: Page, board: Running) -> None:
    opened(page, board, "/strategy")
    # auto-capture requires durable evidence; on, it is listed as moving with spaces
    page.get_by_test_id("switch-auto-capture").click()
    expect(page.locator("dialog#confirm")).to_contain_text("auto-capture: On")
    page.locator("dialog#confirm").get_by_role("button", name="Confirm").click()
    expect(page.locator("#toasts .toast")).to_contain_text("auto-capture: On")
    page.goto(f"{board.base}/plugins")
    card = page.locator("#plugin-spaces")
    expect(card).to_contain_text("Required by: auto-capture")
    card.get_by_test_id("switch-spaces").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("spaces: Off")
    expect(dialog).to_contain_text(
        "auto-capture: Off (it requires source.durable-evidence, which nothing left on provides)"
    )
    screenshot(page, "plugins-confirm-cascade")
    dialog.get_by_role("button", name="Confirm").click()
    toast = page.locator("#toasts .toast")
    expect(toast).to_contain_text("spaces: Off")
    expect(toast).to_contain_text("auto-capture: Off")
    text = board.profile.read_text(encoding="utf-8")
    assert re.search(r'id = "spaces"\nplugin = "spaces"\nenabled = false', text)
    assert re.search(r'id = "auto-capture"\nplugin = "auto-capture"\nenabled = false', text)


def test_select_another_strategy(page: Page, board: Running) -> None:
    opened(page, board, "/strategy")
    screenshot(page, "strategy-starter")
    page.locator('input[name="strategy"][value="plugin:general"]').check()
    expect(page.locator("#toasts .toast")).to_contain_text("[strategy] use = strategy:general")
    expect(page.locator(".choice.selected")).to_contain_text("General")
    screenshot(page, "strategy-general-selected")
    text = board.profile.read_text(encoding="utf-8")
    assert 'use = "strategy:general"' in text
    assert '[[entries]]\nid = "general"\nplugin = "general"\n' in text
    page.goto(f"{board.base}/status?user=ada")
    expect(page.locator(".generation")).to_contain_text("strategy:general")


def test_edit_an_option_with_a_bad_then_a_good_value(page: Page, board: Running) -> None:
    opened(page, board, "/options")
    before = board.profile.read_text(encoding="utf-8")
    form = page.locator("#entry-documents")
    field = form.locator('[data-field="excerpt_characters"]')
    field.locator("input").fill("5")
    form.get_by_role("button", name="Apply").click()
    expect(field.locator(".field-error")).to_have_text("must be at least 20")
    expect(page.locator("#toasts .toast")).to_contain_text("nothing changed")
    screenshot(page, "options-bad-value")
    assert board.profile.read_text(encoding="utf-8") == before

    field.locator("input").fill("800")
    form.get_by_role("button", name="Apply").click()
    expect(page.locator("#toasts .toast")).to_contain_text("documents.excerpt_characters: 800")
    expect(page.locator('#entry-documents [data-field="excerpt_characters"] input')).to_have_value(
        "800"
    )
    screenshot(page, "options-good-value")
    assert "excerpt_characters = 800" in board.profile.read_text(encoding="utf-8")


def test_a_third_party_source_goes_unavailable_on_its_card_and_its_text_is_inert(
    page: Page, third_party: Path
) -> None:
    running = start_board(third_party)
    try:
        opened(page, running, "/status?user=ada")
        card = page.locator('[data-source="source:weather"]')
        expect(card).to_contain_text("healthy")
        screenshot(page, "status-third-party")
        (third_party / "weather-down").write_text("", encoding="utf-8")
        page.reload()
        expect(card).to_contain_text("unavailable — source-unavailable (upstream-down)")
        screenshot(page, "status-source-unavailable")

        for path, name in (
            ("/plugins", "plugins-hostile-labels"),
            ("/options", "options-third-party"),
            ("/plugins?lang=zh", "plugins-chinese"),
        ):
            page.goto(f"{running.base}{path}")
            screenshot(page, name)
            assert page.evaluate("window.__pwned") is None
            assert page.locator("main script, main img, main a[href^='javascript']").count() == 0
            assert SECRET not in page.content()
        weather = page.locator("#plugin-weather .title")
        expect(weather).to_contain_text("天气笔记 <script>window.__pwned = 1</script>")
        expect(weather).to_contain_text("\\u202eevil")
        expect(page.locator("nav")).to_contain_text("插件")
        # the secret's field is empty, and saying nothing in it keeps the secret
        page.goto(f"{running.base}/options?lang=en")
        token = page.locator('#entry-weather [data-field="access_key"] input')
        expect(token).to_have_value("")
        page.locator('#entry-weather [data-field="max_items"] input').fill("7")
        page.locator("#entry-weather").get_by_role("button", name="Apply").click()
        expect(page.locator("#toasts .toast")).to_contain_text("weather.max_items: 7")
        text = running.profile.read_text(encoding="utf-8")
        assert f'access_key = "{SECRET}"' in text
        assert "max_items = 7" in text
    finally:
        stop_board(running)


# ------------------------------------------------------------------ the Memory pages

RUNTIME = "/sources/source%3Aruntime"
DOCUMENTS = "/sources/source%3Adocuments"
SPACES = "/sources/source%3Aspaces"


def confirmed(page: Page, question: str) -> None:
    """Answer the confirmation the page asks before a change of memory."""
    dialog = page.locator("dialog#confirm")
    expect(dialog.locator(".confirm-question")).to_contain_text(question)
    dialog.get_by_role("button", name="Confirm").click()


def receipt(page: Page, said: str, title: str) -> None:
    toast = page.locator("#toasts .toast")
    expect(toast).to_have_attribute("data-receipt", said)
    expect(toast.locator(".toast-title")).to_have_text(title)


def test_add_replace_and_remove_a_runtime_fact(page: Page, board: Running) -> None:
    opened(page, board, "/sources?user=ada")
    expect(page.locator('[data-source="source:runtime"]')).to_contain_text("Kept per user")
    screenshot(page, "memory-sources")
    page.locator('[data-source="source:runtime"] h2 a').click()
    expect(page.locator("main h1")).to_have_text("Runtime working memory")
    expect(page.locator(".records-table")).to_contain_text("No records here")

    form = page.locator("#add-fact")
    form.locator('[data-field="text"] textarea').fill("Ada keeps bees")
    form.get_by_role("button", name="Add").click()
    confirmed(page, "Add this Fact about the user to source:runtime")
    receipt(page, "committed", "Stored (committed)")
    row = page.locator('.records-table tr[data-id="u1"]')
    expect(row).to_contain_text("Ada keeps bees")
    screenshot(page, "memory-runtime-facts")

    # replace: the row opens the Source's own mutate operation, filled in from the fact
    row.get_by_role("link", name="mutate").click()
    expect(page.locator('[data-field="id"] input')).to_have_value("u1")
    page.locator('[data-field="operation"] select').select_option("replace")
    page.locator('[data-field="text"] textarea').fill("Ada keeps two hives of bees")
    page.get_by_role("button", name="Apply").click()
    confirmed(page, "Run mutate on source:runtime")
    receipt(page, "committed", "Stored (committed)")
    screenshot(page, "memory-runtime-replace")

    page.goto(f"{board.base}{RUNTIME}?user=ada&kind=fact")
    row = page.locator('.records-table tr[data-id="u1"]')
    expect(row).to_contain_text("Ada keeps two hives of bees")
    row.get_by_role("button", name="Delete").click()
    # cancelled, nothing happens
    expect(page.locator("dialog#confirm .confirm-question")).to_contain_text("Delete Fact")
    page.locator("dialog#confirm").get_by_role("button", name="Cancel").click()
    expect(row).to_be_visible()
    row.get_by_role("button", name="Delete").click()
    confirmed(page, "Delete Fact about the user u1 from source:runtime")
    receipt(page, "deleted", "Deleted")
    expect(page.locator(".records-table")).to_contain_text("No records here")


def test_create_and_update_a_document(page: Page, board: Running) -> None:
    opened(page, board, f"{DOCUMENTS}/operations/create?user=ada&workspace=w")
    page.locator('[data-field="title"] input').fill("Plan")
    page.locator('[data-field="body"] textarea').fill("First draft.")
    page.get_by_role("button", name="Apply").click()
    confirmed(page, "Run create on source:documents")
    receipt(page, "committed", "Stored (committed)")
    screenshot(page, "memory-documents-create")

    page.goto(f"{board.base}{DOCUMENTS}?user=ada&workspace=w")
    row = page.locator(".records-table tbody tr").first
    expect(row).to_contain_text("Plan")
    screenshot(page, "memory-documents")
    row.get_by_role("link", name="update").click()
    body = page.locator('[data-field="body"] textarea')
    expect(body).to_have_value("First draft.")
    body.fill("Second draft, reviewed.")
    page.get_by_role("button", name="Apply").click()
    confirmed(page, "Run update on source:documents")
    receipt(page, "committed", "Stored (committed)")

    page.goto(f"{board.base}{DOCUMENTS}?user=ada&workspace=w")
    page.locator(".records-table tbody tr").first.get_by_role("link", name="read").click()
    expect(page.locator(".output")).to_contain_text("Second draft, reviewed.")
    screenshot(page, "memory-documents-read")


def test_recall_and_forget_a_memory(page: Page, board: Running) -> None:
    opened(page, board, f"{SPACES}?user=ada")
    form = page.locator("#add-memory")
    form.locator('[data-field="text"] input').fill("Ada keeps bees on the roof")
    form.locator('[data-field="space"] input').fill("personal")
    form.locator("details.more-fields summary").click()
    form.locator('[data-field="entities"] textarea').fill("Ada")
    form.get_by_role("button", name="Add").click()
    confirmed(page, "Add this Long-term memory to source:spaces")
    receipt(page, "committed", "Stored (committed)")
    expect(page.locator(".records-table")).to_contain_text("Ada keeps bees on the roof")
    screenshot(page, "memory-spaces-records")

    page.locator("nav.tabs").get_by_role("link", name="recall").click()
    page.locator('[data-field="query"] input').fill("bees")
    page.locator("details.more-fields summary").click()
    page.locator('[data-field="mode"] select').select_option("words")
    page.get_by_role("button", name="Run").click()
    results = page.locator(".output-table")
    expect(results).to_contain_text("Ada keeps bees on the roof")
    expect(results.locator("thead")).to_contain_text("explain")
    expect(results).to_contain_text("keywords: 1")
    screenshot(page, "memory-spaces-recall")

    page.locator("nav.tabs").get_by_role("link", name="entities").click()
    page.locator('[data-field="space"] input').fill("personal")
    page.get_by_role("button", name="Run").click()
    expect(page.locator(".output-table")).to_contain_text("Ada")
    expect(page.locator(".partial")).to_have_count(0)
    screenshot(page, "memory-spaces-entities")

    page.go_back()
    page.go_back()
    page.locator(".output-table tbody tr").first.get_by_role("link", name="forget").click()
    expect(page.locator('[data-field="space"] input')).to_have_value("personal")
    page.get_by_role("button", name="Apply").click()
    confirmed(page, "Run forget on source:spaces")
    receipt(page, "committed", "Stored (committed)")
    expect(page.locator("#toasts .toast")).to_contain_text("space: personal")
    screenshot(page, "memory-spaces-forget")
    page.goto(f"{board.base}{SPACES}/operations/recall?user=ada&f.query=bees&f.mode=words&run=1")
    expect(page.locator(".output")).to_contain_text("(none)")


def test_a_third_party_source_s_records_page_and_hostile_text_stays_inert(
    page: Page, third_party: Path
) -> None:
    running = start_board(third_party)
    try:
        opened(page, running, "/sources?user=ada")
        card = page.locator('[data-source="source:weather"]')
        expect(card).to_contain_text("Weather observations")
        card.get_by_role("link", name="Observation", exact=True).click()
        form = page.locator("#add-observation")
        form.locator('[data-field="city"] input').fill("Faro")
        form.locator('[data-field="note"] input').fill(f"Windy {HOSTILE}")
        form.get_by_role("button", name="Add").click()
        confirmed(page, "Add this Observation to source:weather")
        receipt(page, "committed", "Stored (committed)")
        row = page.locator('.records-table tr[data-id="o1"]')
        expect(row).to_contain_text("Windy <script>window.__pwned = 1</script>")
        expect(row).to_contain_text("\\u202eevil")
        row.locator("details.read summary").click()
        expect(row.locator("pre.record")).to_contain_text('"city": "Faro"')
        screenshot(page, "memory-third-party-records")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main script, main img, main a[href^='javascript']").count() == 0

        # a record the Source refuses is said refused, with its code; nothing is added
        form = page.locator("#add-observation")
        form.locator('[data-field="city"] input').fill("Faro")
        form.locator('[data-field="note"] input').fill("hail at noon")
        form.get_by_role("button", name="Add").click()
        confirmed(page, "Add this Observation")
        receipt(page, "refused", "Refused: nothing was written")
        expect(page.locator("#toasts .toast")).to_contain_text("invalid-record")
        expect(page.locator(".records-table tbody tr")).to_have_count(1)

        row.get_by_role("button", name="Delete").click()
        # the question quotes the record's id, as text
        confirmed(page, "Delete Observation o1 from source:weather")
        receipt(page, "deleted", "Deleted")
        assert page.evaluate("window.__pwned") is None
        # memory text never reaches the board's output
        assert not any("Windy" in line or "pwned" in line for line in running.printed)
    finally:
        stop_board(running)
