"""Helpers of the PostgreSQL tests: open the Provider on a schema of the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mnemon_source_spaces import ProviderInit
from mnemon_spaces_postgres import POSTGRES_PROVIDER, PostgresProvider


def provider_init(dsn: str, schema: str, **extra: Any) -> ProviderInit:
    return ProviderInit(
        instance_key="source:spaces",
        data_directory="/nonexistent-unused",
        configuration={"dsn": dsn, "schema": schema, **extra},
    )


@asynccontextmanager
async def open_provider(dsn: str, schema: str, **extra: Any) -> AsyncIterator[PostgresProvider]:
    adapter = await POSTGRES_PROVIDER.open(provider_init(dsn, schema, **extra))
    assert isinstance(adapter, PostgresProvider)
    try:
        yield adapter
    finally:
        await adapter.dispose()
