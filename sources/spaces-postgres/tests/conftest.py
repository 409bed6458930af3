"""One private PostgreSQL server for the whole test session, and a fresh schema per test."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mnemon_spaces_postgres.testing import PostgresServer, start_test_server

# the helpers (pg_kit) and the writer script live beside the tests
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    # CI installs PostgreSQL (.ci/run): a missing server there fails, never skips
    server = start_test_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses, so tests share the server but never data."""
    return f"t_{uuid.uuid4().hex[:16]}"
