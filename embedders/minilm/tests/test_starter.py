"""A user's first minutes: `mnemon init` with MiniLM installed, then recall by meaning.

Through the `mnemon` command, as a user runs it: the starter profile mounts the embedder it
finds installed, and a question sharing no word with a memory still finds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MNEMON = Path(sys.executable).parent / "mnemon"

pytestmark = pytest.mark.skipif(not MNEMON.exists(), reason="the mnemon command is not installed")


def mnemon(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MNEMON_HOME": str(cwd / "home"), "NO_COLOR": "1"}
    environment.pop("MNEMON_PROFILE", None)
    return subprocess.run(
        [str(MNEMON), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )


MEMORIES = (
    "The quarterly report is due on Friday.",
    "Ada's dog Biscuit is a rescue greyhound.",
)


def test_the_starter_profile_recalls_by_meaning_with_minilm_installed(tmp_path: Path) -> None:
    wrote = json.loads(mnemon(tmp_path, "init", "--json").stdout)
    assert wrote["embedder"] == "minilm"
    for text in MEMORIES:
        stored = mnemon(tmp_path, "remember", text, "--user", "ada", "--yes")
        assert stored.returncode == 0, stored.stderr
    asked = mnemon(tmp_path, "recall", "which pet does she have", "--user", "ada", "--json")
    assert asked.returncode == 0, asked.stderr
    first = json.loads(asked.stdout)["items"][0]
    assert first["text"] == "Ada's dog Biscuit is a rescue greyhound."
    assert first["provenance"]["explain"]["meaning"] == 1
