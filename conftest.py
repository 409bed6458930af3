"""Repository-wide test setup: async tests run on anyio's asyncio backend (auto mode).

Property tests have no time limit per example: how long an example takes says nothing
about its correctness, and on a loaded machine Hypothesis's default 200 ms deadline made
them fail at random. Speed is judged in `benchmarks/`, never in tests.
"""

import pytest
from hypothesis import settings

settings.register_profile("mnemon", deadline=None)
settings.load_profile("mnemon")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
