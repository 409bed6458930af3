"""Repository-wide test setup: async tests run on anyio's asyncio backend (auto mode).

Property tests have no time limit per example: how long an example takes says nothing
about its correctness, and on a loaded machine Hypothesis's default 200 ms deadline made
them fail at random. Speed is judged in `benchmarks/`, never in tests.

Where the environment sets `PYTHONDONTWRITEBYTECODE`, the test workers and the Python
processes the tests start (the `mnemon` command, launched plugins, writers in other processes)
share one bytecode cache instead, kept in pytest's cache folder from run to run (a temporary
one with `-p no:cacheprovider`): each of them would otherwise compile every module it imports
as it starts, and each worker would rewrite every test module's asserts again (about 12 s of
a worker's start, 0.4 s of a command's). The source tree still gets no bytecode; what the
tests compiled in temporary folders is dropped at the end of the run.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("mnemon", deadline=None)
settings.load_profile("mnemon")

_BYTECODE = "_mnemon_bytecode"


def pytest_configure(config: pytest.Config) -> None:
    # in the first pytest process only: xdist's workers and every test's child processes
    # inherit the folder through the environment
    if "PYTHONDONTWRITEBYTECODE" in os.environ and "PYTHONPYCACHEPREFIX" not in os.environ:
        cache = getattr(config, "cache", None)  # None with -p no:cacheprovider
        if cache is not None:
            folder = cache.mkdir("bytecode")
            # the bytecode of modules tests wrote in temporary folders is never used again
            dropped = folder / Path(tempfile.gettempdir()).relative_to("/")
        else:
            folder = dropped = Path(tempfile.mkdtemp(prefix="mnemon-pyc-"))
        os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        setattr(config, _BYTECODE, dropped)


def pytest_unconfigure(config: pytest.Config) -> None:
    dropped = getattr(config, _BYTECODE, None)
    if dropped is not None:
        shutil.rmtree(dropped, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the machine has cores.

    Many tests wait on a process they started, a socket or a file lock: with one worker
    per core, a third of the cores' time went idle (`make test` on 2 cores: 275 s with 3
    workers against 307 s with 2, the bytecode cache warm).
    """
    usable = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere, every core
    return (len(usable(0)) if usable else os.cpu_count() or 1) + 1


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
