"""Helpers of the PostgreSQL tests: open the Provider on a schema of the test server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import mnemon_spaces_postgres
from mnemon_source_spaces import ProviderInit
from mnemon_spaces_postgres import POSTGRES_PROVIDER, PostgresProvider

from mnemon import ActionOffer
from mnemon_testing import MemoryCompositionRunner, SelectAll


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


KEY = "source:spaces"
REMEMBER = f"{KEY}/remember"
RECALL = f"{KEY}/recall"


def allow(offer: ActionOffer) -> bool:
    return True


def source_config(dsn: str, schema: str, **provider: Any) -> dict[str, Any]:
    """The spaces Source's configuration on a schema of the test server."""
    return {
        "provider": {"type": "postgres", "dsn": dsn, "schema": schema, **provider},
        "scope_keys": ["user_id"],
    }


async def open_source(config: Mapping[str, Any], **extra: Any) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(mnemon_spaces_postgres, instance_id="spaces", config={**config, **extra})
        await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
    except BaseException:
        await runner.dispose()
        raise
    return runner


ADA = {"user_id": "ada"}
