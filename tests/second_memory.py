"""The starter profile with a Raven backend and a Nexent provider beside spaces, for tests.

The Raven entry uses the file-backed reference backend of `sources/raven/tests`, the Nexent
entry the reference provider folder of `sources/nexent/tests/plugins`, answered by that
package's loopback fake service (which can be told to answer 401). Both are first-party
test fixtures; this module only names them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import run_in_process

ROOT = Path(__file__).resolve().parents[1]
RAVEN_TESTS = ROOT / "sources" / "raven" / "tests"
NEXENT_TESTS = ROOT / "sources" / "nexent" / "tests"
NEXENT_PLUGINS = NEXENT_TESTS / "plugins"
API_KEY = "sk-test-SECRET-4242"
ADA = {"user_id": "ada", "workspace": "billing"}


@dataclass(frozen=True)
class Ran:
    status: int
    stdout: str
    stderr: str


class Command:
    """`mnemon --no-color ...` run in this process, in `folder`, as a user types it."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = folder
        monkeypatch.chdir(folder)
        monkeypatch.setenv("MNEMON_HOME", str(folder / "home"))
        monkeypatch.setenv("NO_COLOR", "1")
        monkeypatch.delenv("MNEMON_PROFILE", raising=False)

    def __call__(self, *arguments: str, stdin: str = "") -> Ran:
        ran = run_in_process(self.folder, list(arguments), stdin, dict(os.environ))
        return Ran(ran.returncode, ran.stdout, ran.stderr)


def with_second_memory(mnemon: Command, folder: Path, endpoint: str) -> Path:
    """The profile `mnemon init` writes in `folder`, with a Raven and a Nexent entry appended."""
    written = mnemon("init", "--embedder", "none")
    assert written.status == 0, written.stderr
    profile = folder / "mnemon.toml"
    profile.write_text(
        profile.read_text(encoding="utf-8")
        + f"""
# a second long-term memory: a Raven backend
[[entries]]
id = "raven"
plugin = "raven"
[entries.config]
backend = "raven_reference:make_backend"

# and a third: a Nexent provider folder
[[entries]]
id = "mem0"
plugin = "nexent"
[entries.config]
plugin_dir = "{NEXENT_PLUGINS.as_posix()}"
nexent_shim = true
plugin = {{ name = "reference", endpoint = "{endpoint}", api_key = "{API_KEY}" }}
""",
        encoding="utf-8",
    )
    return profile


@contextlib.contextmanager
def nexent_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh loopback service for the Nexent reference provider (and the Raven backend's path)."""
    monkeypatch.syspath_prepend(str(RAVEN_TESTS))  # `raven_reference:make_backend`
    monkeypatch.syspath_prepend(str(NEXENT_TESTS))
    service = importlib.import_module("nexent_fake").FakeService()
    try:
        yield service
    finally:
        service.close()
