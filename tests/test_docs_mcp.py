"""docs/mcp.md tells an MCP user every way the server refuses a write, by its code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "integrations" / "mcp" / "mnemon_mcp" / "_server.py"
GUIDE = ROOT / "docs" / "mcp.md"


def _section(markdown: str, title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert found is not None, f"docs/mcp.md has no '## {title}' section"
    return found.group(1)


def test_every_refusal_code_of_the_mcp_server_is_in_the_writes_section() -> None:
    codes = set(re.findall(r'\bcode="([a-z][a-z-]+)"', SERVER.read_text(encoding="utf-8")))
    assert "write-too-long-to-confirm" in codes  # the server's own words, found where expected
    writes = _section(GUIDE.read_text(encoding="utf-8"), "Writes")
    missing = sorted(code for code in codes if f"`{code}`" not in writes)
    assert not missing, f"docs/mcp.md 'Writes' does not name the refusal codes {missing}"


def test_the_writes_section_states_the_confirmation_limit_of_the_server() -> None:
    limit = re.search(r"^_CONFIRMATION_LIMIT = ([\d_]+)", SERVER.read_text(encoding="utf-8"), re.M)
    assert limit is not None
    writes = _section(GUIDE.read_text(encoding="utf-8"), "Writes")
    assert f"{int(limit.group(1)):,}" in writes
