"""The examples' demo script runs end to end: read route, authorized replace, snapshots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "demo.py"


def test_the_examples_demo_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert '"completion": "committed"' in out
    assert "this turn still reads its pinned snapshot: True" in out
    assert "the next turn's View shows the write: True" in out
    assert "moved to Monday" in (tmp_path / "notes.md").read_text(encoding="utf-8")
