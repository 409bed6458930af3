"""pytest plugin of mnemon-testing: async tests under anyio, and its fixtures.

Fixtures: `memory_runner` (a fresh `MemoryCompositionRunner`), and `postgres_server` /
`pgvector_server` (a private PostgreSQL server per test session, started on first use by
`mnemon_testing.postgres`: the machine's binaries, and the `pgserver` wheel's with pgvector;
without them the tests that ask skip, except under `CI=true`, where they fail).

Installing mnemon-testing registers this plugin (entry point `pytest11`, name `mnemon`).
Every `async def` test is marked `pytest.mark.anyio`, so it runs under anyio without
`anyio_mode = "auto"` in the project's settings. anyio then runs it once per backend its
`anyio_backend` fixture names: with only asyncio installed that is asyncio; with trio
installed too, add to `conftest.py`::

    @pytest.fixture
    def anyio_backend():
        return "asyncio"

A test already marked `anyio` or `asyncio` (pytest-asyncio) is left as it is, and so is
every test when anyio's own auto mode is on. Disable the plugin with `-p no:mnemon`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest

from ._runner import MemoryCompositionRunner
from .postgres import PostgresServer, start_test_server

_OWNERS = frozenset({"anyio", "asyncio"})


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    """Mark coroutine test functions for anyio before anyio's own hook looks at them."""
    if _unclaimed_coroutine_test(collector, name, obj):
        pytest.mark.anyio(obj)
    return (yield)


def _unclaimed_coroutine_test(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> bool:
    if not collector.istestfunction(obj, name):
        return False
    inner = getattr(getattr(obj, "hypothesis", None), "inner_test", obj)
    if not inspect.iscoroutinefunction(inner):
        return False
    try:
        if collector.config.getini("anyio_mode") == "auto":
            return False
    except ValueError:  # anyio's plugin is disabled: nothing would run the mark
        return False
    own = {mark.name for mark in getattr(obj, "pytestmark", ())}
    inherited = {name for name in _OWNERS if collector.get_closest_marker(name) is not None}
    return not (own | inherited) & _OWNERS


@pytest.fixture
async def memory_runner() -> AsyncIterator[MemoryCompositionRunner]:
    """A fresh `MemoryCompositionRunner`, disposed after the test."""
    runner = MemoryCompositionRunner()
    try:
        yield runner
    finally:
        await runner.dispose()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The machine's PostgreSQL, private to this test session (no pgvector)."""
    server = start_test_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[PostgresServer]:
    """The `pgserver` wheel's PostgreSQL 16 with pgvector, private to this test session."""
    server = start_test_server(pgvector=True)
    try:
        yield server
    finally:
        server.stop()
