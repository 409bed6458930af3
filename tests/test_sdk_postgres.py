"""mnemon.sdk.postgres: connection strings checked unquoted, failures classified, pool logs quiet.

The pools' behaviour against a running server (sessions with `synchronous_commit` and
`statement_timeout`, reconnection after a restart) is tested by the stores that use them, in
`sources/spaces-postgres/tests`, which start a private server.
"""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg
import psycopg.errors
import pytest
from psycopg_pool import PoolTimeout

from mnemon import DefinitionError
from mnemon.sdk.postgres import (
    check_connection_string,
    classify_database_error,
    open_async_connection_pool,
    open_connection_pool,
)

SECRET = "pw-5d1e0c"


@pytest.mark.parametrize(
    "dsn",
    ["host=db.internal dbname=agents user=mnemon", "postgresql://mnemon@db.internal/agents"],
    ids=["keywords", "uri"],
)
def test_a_connection_string_or_uri_is_accepted(dsn: str) -> None:
    check_connection_string(dsn)


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        (f"host='unterminated password={SECRET}", "provider.dsn: not a valid connection string"),
        (f"nonsense-{SECRET}", "provider.dsn: not a valid connection string"),
        ("  ", "provider.dsn: required"),
    ],
    ids=["unterminated-quote", "not-key-value", "blank"],
)
def test_a_bad_connection_string_names_the_key_never_the_value(dsn: str, message: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        check_connection_string(dsn, key="provider.dsn")
    assert str(caught.value).startswith(message)
    assert SECRET not in str(caught.value)
    # the driver's own error, which quotes the string, is not chained either
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (psycopg.errors.QueryCanceled(), "timeout"),
        (psycopg.errors.LockNotAvailable(), "timeout"),
        (PoolTimeout(), "timeout"),
        (psycopg.errors.InsufficientPrivilege(), "forbidden"),
        (psycopg.errors.InvalidPassword(), "unauthorized"),
        (psycopg.OperationalError(), "unavailable"),
        (psycopg.InterfaceError(), "unavailable"),
        (ConnectionResetError(), "unavailable"),
        (psycopg.errors.UniqueViolation(), "provider_error"),
        (ValueError(), None),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_database_failures_are_classified(error: BaseException, code: str | None) -> None:
    assert classify_database_error(error) == code


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        record.getMessage() for record in caplog.records if record.levelno >= logging.INFO
    )


def test_a_pool_without_a_server_is_unavailable_and_logs_no_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    missing = tmp_path / f"nowhere-{SECRET}"
    pool = open_connection_pool(
        f"host={missing} dbname=x user=u", name="sdk-test-sync", max_size=2, wait=0.3
    )
    try:
        with pytest.raises(PoolTimeout) as caught, pool.connection():
            pass
        # the pool could make no connection at all: an outage, not exhaustion
        assert classify_database_error(caught.value, pool) == "unavailable"
    finally:
        pool.close(timeout=1.0)
    assert SECRET not in _logged(caplog)
    # the records were kept, below INFO
    assert any(record.levelno == logging.DEBUG for record in caplog.records)


async def test_an_async_pool_without_a_server_is_unavailable_and_logs_no_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    missing = tmp_path / f"nowhere-{SECRET}"
    pool = await open_async_connection_pool(
        f"host={missing} dbname=x user=u",
        name="sdk-test-async",
        max_size=2,
        wait=0.3,
        statement_timeout=1.0,
    )
    try:
        with pytest.raises(PoolTimeout) as caught:
            async with pool.connection():
                pass
        assert classify_database_error(caught.value, pool) == "unavailable"
    finally:
        await pool.close(timeout=1.0)
    assert SECRET not in _logged(caplog)
