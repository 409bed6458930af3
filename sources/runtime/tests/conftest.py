import sys
import uuid
from pathlib import Path

import pytest

# the shared helpers (runtime_kit) and the writer script live beside the tests
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def schema() -> str:
    """A PostgreSQL schema name no other test uses: the tests share the server, never data.

    The server is mnemon-testing's session fixture `postgres_server`.
    """
    return f"t_{uuid.uuid4().hex[:16]}"
