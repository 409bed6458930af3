"""Repository-wide test setup: async tests run on anyio's asyncio backend (auto mode)."""

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
