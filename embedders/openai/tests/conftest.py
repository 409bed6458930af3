from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

# the shared server and probe (openai_kit) live beside the tests
sys.path.insert(0, str(Path(__file__).parent))

from openai_kit import FakeOpenAI, serving

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables: a proxy in the environment would take loopback requests
    # elsewhere; no key of the person running the tests is ever read either
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
async def api() -> AsyncIterator[FakeOpenAI]:
    async with serving(FakeOpenAI()) as server:
        yield server
