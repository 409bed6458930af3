"""The `mnemon` command: profiles, Views, recall, remember, inspect and the demo."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the `mnemon` command (needs the `cli` extra: click)."""
    try:
        from ._commands import main as run_command_line
    except ImportError as exc:  # pragma: no cover - only without the extra
        if exc.name != "click":
            raise
        sys.exit("the mnemon command needs click: pip install 'mnemon-runtime[cli]'")
    run_command_line()
