import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio only (anyio would also try trio when it is installed)."""
    return "asyncio"
