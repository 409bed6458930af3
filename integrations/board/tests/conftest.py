"""Fixtures of the board's tests: folders a user would have, the board running, a browser."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from board_kit import (
    CHROMIUM,
    CHROMIUM_ARGS,
    HOSTILE,
    THIRD_PARTY_PROFILE,
    WEATHER_MANIFEST,
    WEATHER_SOURCE,
    Running,
    mnemon,
    start_board,
    stop_board,
)


@pytest.fixture
def starter(tmp_path: Path) -> Path:
    """A folder with the starter profile `mnemon init` writes (recall by words)."""
    result = mnemon(tmp_path, "init", "--embedder", "none")
    assert result.returncode == 0, result.stderr
    return tmp_path


@pytest.fixture
def board(starter: Path) -> Iterator[Running]:
    running = start_board(starter)
    yield running
    stop_board(running)


@pytest.fixture
def third_party(tmp_path: Path) -> Path:
    """A folder whose profile mounts a drop-in third-party Source with hostile labels."""
    plugin = tmp_path / ".mnemon" / "plugins" / "weather"
    (plugin / "weather_source").mkdir(parents=True)
    (plugin / "mnemon-plugin.toml").write_text(WEATHER_MANIFEST, encoding="utf-8")
    (plugin / "weather_source" / "__init__.py").write_text(WEATHER_SOURCE, encoding="utf-8")
    (plugin / "locale").mkdir()
    for language, title in (("en", f"Weather notes {HOSTILE}"), ("zh", f"天气笔记 {HOSTILE}")):
        (plugin / "locale" / f"{language}.json").write_text(
            json.dumps({"meta": {"title": title, "description": f"{HOSTILE}"}}),
            encoding="utf-8",
        )
    (tmp_path / "mnemon.toml").write_text(THIRD_PARTY_PROFILE, encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the browser tests (Debian's; Playwright downloads none).

    Module-scoped, not session-scoped: Playwright's sync API keeps an event loop running in
    this thread while it is open, and the async tests of other modules need the thread free.
    """
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: apt-get install chromium (as .ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
