"""The pytest plugin runs an author's async tests under anyio without any setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = """
import anyio
import pytest

from mnemon_testing import MemoryCompositionRunner


async def test_plain_coroutine():
    await anyio.sleep(0)


class TestGrouped:
    async def test_in_a_class(self):
        await anyio.sleep(0)


async def test_the_runner_fixture(memory_runner):
    assert isinstance(memory_runner, MemoryCompositionRunner)
    assert memory_runner.inspect()["serving"] is None


@pytest.mark.anyio
async def test_already_marked():
    await anyio.sleep(0)


def test_sync_tests_are_untouched():
    assert True
"""


def run_pytest(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # a project of its own: its own settings file, no anyio_mode anywhere
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_author.py").write_text(TESTS, encoding="utf-8")
    return tmp_path


def test_async_tests_run_under_anyio_without_anyio_mode(project: Path) -> None:
    result = run_pytest(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


def test_without_the_plugin_the_same_tests_do_not_run(project: Path) -> None:
    result = run_pytest(project, "-p", "no:mnemon")
    assert "5 passed" not in result.stdout
    assert "async def functions are not natively supported" in result.stdout + result.stderr


def test_anyio_auto_mode_keeps_working_with_the_plugin(project: Path) -> None:
    (project / "pytest.ini").write_text("[pytest]\nanyio_mode = auto\n", encoding="utf-8")
    result = run_pytest(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout
