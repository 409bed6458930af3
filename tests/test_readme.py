"""The README's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_example_composes_a_view(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert re.match(r"view:[0-9a-f]{64}\n", result.stdout)
    assert "The user is Ada; she prefers short answers." in result.stdout


def test_the_readme_gives_exactly_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"^make (\w+)", text, re.MULTILINE)
    assert commands == ["demo", "test"]
