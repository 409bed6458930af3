"""Private PostgreSQL servers for the whole test session, and a fresh schema per test.

`postgres_server` is the machine's PostgreSQL (without pgvector: vectors take the fallback);
`pgvector_server` is the one the pgserver wheel ships, with pgvector.
"""

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


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[PostgresServer]:
    # the pgserver wheel's PostgreSQL 16 with pgvector (the `test` extra): in CI it must run
    server = start_test_server(pgvector=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def schema() -> str:
    """A schema name no other test uses, so tests share the server but never data."""
    return f"t_{uuid.uuid4().hex[:16]}"
