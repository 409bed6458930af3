from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# the shared helpers (remote_kit) live beside the tests
sys.path.insert(0, str(Path(__file__).parent))

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # plugin manifests run `python ...`: the interpreter running the tests, with its packages
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])


@pytest.fixture
def notes_plugin() -> Path:
    return PLUGINS / "notes"
