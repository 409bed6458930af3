"""`mnemon mcp` in the core command: it hands over to mnemon-mcp, or says how to install it."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from mnemon._cli._commands import cli


def test_without_mnemon_mcp_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mnemon_mcp", None)  # as if it were not installed
    result = CliRunner().invoke(cli, ["mcp", "--user", "ada"])
    assert result.exit_code == 1
    assert "pip install mnemon-runtime-mcp" in result.output


def test_with_mnemon_mcp_the_command_is_its_own() -> None:
    pytest.importorskip("mnemon_mcp", reason="mnemon-mcp is not installed")
    result = CliRunner().invoke(cli, ["mcp", "--help"])
    assert result.exit_code == 0
    assert "--allow-writes" in result.output
    assert "--http" in result.output
