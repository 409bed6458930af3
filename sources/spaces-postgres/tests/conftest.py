"""A fresh schema per test; the servers are the `postgres_server` and `pgvector_server`
fixtures of mnemon-testing's pytest plugin (one each per session, shared with other packages).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

# the helpers (pg_kit) and the writer script live beside the tests
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses, so tests share the server but never data."""
    return f"t_{uuid.uuid4().hex[:16]}"
