"""Repository-wide test setup: async tests run on anyio's asyncio backend (auto mode).

Property tests have no time limit per example: how long an example takes says nothing
about its correctness, and on a loaded machine Hypothesis's default 200 ms deadline made
them fail at random. Speed is judged in `benchmarks/`, never in tests.

The Python processes the tests start (the `mnemon` command, launched plugins, writers in
other processes) share one bytecode cache for the run, in a temporary folder. Where the
environment sets `PYTHONDONTWRITEBYTECODE`, each of them would otherwise compile mnemon's
sources again as it starts (about 0.4 s each); the source tree still gets no bytecode.
"""

import os
import shutil
import tempfile

import pytest
from hypothesis import settings

settings.register_profile("mnemon", deadline=None)
settings.load_profile("mnemon")

_BYTECODE = "_mnemon_bytecode"


def pytest_configure(config: pytest.Config) -> None:
    # in the first pytest process only: xdist's workers and every test's child processes
    # inherit the folder through the environment
    if "PYTHONDONTWRITEBYTECODE" in os.environ and "PYTHONPYCACHEPREFIX" not in os.environ:
        folder = tempfile.mkdtemp(prefix="mnemon-tests-bytecode-")
        os.environ["PYTHONPYCACHEPREFIX"] = folder
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        setattr(config, _BYTECODE, folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = getattr(config, _BYTECODE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
