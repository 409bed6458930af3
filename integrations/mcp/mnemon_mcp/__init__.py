"""mnemon-mcp: an MCP server over a mnemon profile, for one identity.

`MemoryServer` exposes the Wake as a resource (`mnemon://wake`, composed anew when read), the
current View's routes and actions as tools (the names and results of `mnemon.tools`) and a
`refresh` tool. `mnemon mcp --user U` serves it over stdio; `--http` over streamable HTTP on
loopback with a bearer token.
"""

from __future__ import annotations

from ._command import command, main
from ._http import create_token, serve_http
from ._server import WAKE_URI, MemoryServer

__all__ = ["WAKE_URI", "MemoryServer", "command", "create_token", "main", "serve_http"]
