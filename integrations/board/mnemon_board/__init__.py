"""mnemon-board: the memory composition board, a local web page over a profile's running host.

`mnemon board` serves it on loopback with an access token: every installed memory plugin from
its declaration, switched on and off with what it moves (and Undo), the main Strategy and the
View extensions, a form per entry drawn from its declared configuration, each Source's
status for an identity, and each Source's memory for that identity through what it declares
for people (its records and management operations). Changes to the profile are saved to
`mnemon.toml` (comments kept) and applied to the running host as one new generation; changes
to memory are confirmed and fenced by the revision the page was drawn at.
"""

from __future__ import annotations

from ._app import create_app
from ._command import DEFAULT_PORT, command, main, serve
from ._control import Applied, Board, ChangeRefused

__all__ = [
    "DEFAULT_PORT",
    "Applied",
    "Board",
    "ChangeRefused",
    "command",
    "create_app",
    "main",
    "serve",
]
