"""The PostgreSQL Provider passes the Provider suite, and the spaces Source on it the Source suite.

The Provider suite runs twice: on the machine's PostgreSQL, which has no pgvector (vectors
are float16 searched in this process), and on the pgserver wheel's, which has it (vectors
are pgvector's, searched by the server). Each run first proves which of the two it checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import mnemon_spaces_postgres
import psycopg
import pytest
from mnemon_source_spaces.testing import ProviderConformance
from mnemon_spaces_postgres import POSTGRES_PROVIDER

from mnemon_testing.conformance import SourceConformance
from mnemon_testing.postgres import PostgresServer


class TestPostgresProvider(ProviderConformance):
    """On a server without pgvector: the fallback keeps vectors."""

    provider = POSTGRES_PROVIDER
    stall_timeout = 3.0
    #: the type the store's vectors must be kept in on this server
    vector_type = "bytea"

    @pytest.fixture(autouse=True)
    def _server(self, postgres_server: PostgresServer, schema: str) -> None:
        self.server = postgres_server
        self.schema = schema
        # the dsn is this Provider's secret: the suite checks it never shows
        self.secrets = {"dsn": postgres_server.dsn()}

    async def test_vectors_are_kept_as_this_server_allows(self, tmp_path: Path) -> None:
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
        with psycopg.connect(self.server.dsn(), autocommit=True) as connection:
            row = connection.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attname = 'embedding'",
                (f"{self.schema}.vectors",),
            ).fetchone()
        assert row is not None
        assert row[0].rsplit(".", 1)[-1] == self.vector_type, (
            f"on this server vectors must be kept as {self.vector_type}, not {row[0]} "
            "(the machine's PostgreSQL must lack pgvector for the fallback to be tested)"
        )

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"schema": self.schema, "statement_timeout": 1.0, "pool_max": 30}

    def corrupt(self, directory: Path, configuration: Mapping[str, Any], parent: str) -> bool:
        with psycopg.connect(self.server.dsn(), autocommit=True) as connection:
            table = f"{self.schema}.memories"
            for memory_id, text, tags in (
                ("bad id with spaces", "apple under a malformed id", []),
                ("bad-text", "", []),
                ("bad-tags", "apple with a control tag", ["bad\x01tag"]),
                ("bad-long-tag", "apple with a long tag", ["t" * 300]),
            ):
                connection.execute(
                    f"INSERT INTO {table} (parent, id, text, tags, created_at, search) "
                    "VALUES (%s, %s, %s, %s, now(), to_tsvector('simple', %s))",
                    (parent, memory_id, text, tags, text),
                )
            connection.execute(
                f"INSERT INTO {self.schema}.entities (parent, key, memory, name) "
                "VALUES (%s, 'bad\x01', 'bad-tags', 'bad\x01name')",
                (parent,),
            )
            connection.execute(
                f"INSERT INTO {self.schema}.links (parent, source, target, relation) "
                "VALUES (%s, 'm-1', 'bad id with spaces', 'related'), "
                "(%s, 'm-1', 'bad-tags', 'NOT A RELATION')",
                (parent, parent),
            )
        return True

    @contextmanager
    def stall(self, directory: Path, configuration: Mapping[str, Any]) -> Iterator[None]:
        # another session holds a lock every write needs for the whole block
        with psycopg.connect(self.server.dsn()) as connection:
            connection.execute(f"LOCK TABLE {self.schema}.memories IN EXCLUSIVE MODE")
            yield
            connection.rollback()


class TestPostgresProviderOnPgvector(TestPostgresProvider):
    """On a server with pgvector: the extension is created and keeps the vectors."""

    vector_type = "vector"

    @pytest.fixture(autouse=True)
    def _server(self, pgvector_server: PostgresServer, schema: str) -> None:
        self.server = pgvector_server
        self.schema = schema
        self.secrets = {"dsn": pgvector_server.dsn()}


class TestSpacesSourceOnPostgres(SourceConformance):
    plugin = mnemon_spaces_postgres
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: Mapping[str, Any] = {}
    secrets: ClassVar[Mapping[str, str]] = {"provider_token": "postgres-password-3f9c1a7e"}
    invalid_writes = (
        ("remember", {"text": ""}),
        ("remember", {"text": "nul \x00 inside"}),
        ("remember", {"text": "fine", "space": "archive"}),
        ("remember", {"text": "fine", "unexpected": True}),
    )
    shared_data_reason = (
        "entries naming one PostgreSQL schema share it on purpose: that is how several hosts "
        "share one memory"
    )

    @pytest.fixture(autouse=True)
    def _server(self, postgres_server: PostgresServer, schema: str) -> None:
        self.server = postgres_server
        self.schema = schema

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {
            "data_dir": str(directory),
            "provider": {"type": "postgres", "dsn": self.server.dsn(), "schema": self.schema},
            "spaces": [
                {"name": "notes", "writable": True, "description": "What the user asked to keep"},
                {"name": "archive", "writable": False},
            ],
        }

    def write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "remember", {"text": f"The marker is {marker}.", "tags": ["conformance"]}

    def query(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "recall", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "list", {"space": "notes", "limit": 100}

    def manage_write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "remember", {"space": "notes", "text": f"Kept by a person: {marker}."}
