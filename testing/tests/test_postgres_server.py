"""`mnemon_testing.postgres`: the private test server keeps durability on, runs unprivileged,
and fails loudly in CI.

The servers are the `postgres_server` and `pgvector_server` fixtures of the kit's own pytest
plugin; psycopg and pgserver come from this distribution's `test` extra.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from mnemon_testing.postgres import PostgresServer, PostgresUnavailable, start_test_server


def test_the_server_keeps_fsync_on_and_listens_on_its_socket_only(
    postgres_server: PostgresServer,
) -> None:
    with psycopg.connect(postgres_server.dsn()) as connection:
        settings = dict(
            connection.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'full_page_writes', 'listen_addresses')"
            ).fetchall()
        )
    assert settings == {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "listen_addresses": "",
    }


def test_the_server_runs_as_an_unprivileged_user(postgres_server: PostgresServer) -> None:
    owner = postgres_server.data_directory.stat().st_uid
    assert owner != 0
    if os.geteuid() != 0:
        assert owner == os.geteuid()


def test_missing_binaries_skip_outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not available"):
        start_test_server(PostgresServer(bindir=tmp_path))


def test_missing_binaries_fail_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="could not start in CI"):
        start_test_server(PostgresServer(bindir=tmp_path))


def test_extra_settings_reach_the_server_and_unsafe_ones_are_refused() -> None:
    with pytest.raises(PostgresUnavailable, match="work_mem"):
        PostgresServer(settings={"work_mem": "1MB' -c fsync=off"})
    server = start_test_server(PostgresServer(settings={"work_mem": "5MB"}))
    try:
        with psycopg.connect(server.dsn()) as connection:
            row = connection.execute("SHOW work_mem").fetchone()
    finally:
        server.stop()
    assert row == ("5MB",)


def test_the_pgserver_wheels_server_offers_pgvector(pgvector_server: PostgresServer) -> None:
    with psycopg.connect(pgvector_server.dsn()) as connection:
        settings = connection.execute(
            "SELECT current_setting('fsync'), current_setting('listen_addresses')"
        ).fetchone()
        extension = connection.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    assert settings == ("on", "")
    assert extension == (1,)
