"""pytest plugin of mnemon-testing: the `memory_runner` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ._runner import MemoryCompositionRunner


@pytest.fixture
async def memory_runner() -> AsyncIterator[MemoryCompositionRunner]:
    """A fresh `MemoryCompositionRunner`, disposed after the test (use with anyio tests)."""
    runner = MemoryCompositionRunner()
    try:
        yield runner
    finally:
        await runner.dispose()
