"""Streamable HTTP on loopback only, behind a bearer token made at start."""

from __future__ import annotations

import hmac
import secrets
import socket
from collections.abc import Callable

import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Receive, Scope, Send

from ._server import MemoryServer

__all__ = ["LOOPBACK", "create_token", "serve_http"]

LOOPBACK = "127.0.0.1"
PATH = "/mcp"


def create_token() -> str:
    """A fresh bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


async def _answer(send: Send, status: int, body: bytes, *extra: tuple[bytes, bytes]) -> None:
    headers = [(b"content-type", b"application/json"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _guarded(manager: StreamableHTTPSessionManager, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        # constant-time: the token is the only thing between a local process and the memory
        if not hmac.compare_digest(given, expected):
            body = b'{"error": "unauthorized: send the header Authorization: Bearer <token>"}'
            await _answer(send, 401, body, (b"www-authenticate", b"Bearer"))
            return
        if scope.get("path", "").rstrip("/") != PATH:
            await _answer(send, 404, b'{"error": "not found: the endpoint is /mcp"}')
            return
        await manager.handle_request(scope, receive, send)

    return app


async def serve_http(
    memory: MemoryServer,
    *,
    port: int,
    token: str,
    ready: Callable[[str], None],
) -> None:
    """Serve `memory` over streamable HTTP on 127.0.0.1 until cancelled.

    Args:
        memory: the server to expose.
        port: the TCP port; 0 picks a free one.
        token: the bearer token every request must carry.
        ready: called once listening, with the endpoint URL (the port filled in).
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, port))  # loopback only: never a wildcard address
    # listening before `ready` says so: a client that connects at once waits in the backlog
    # until the server accepts, instead of being refused while uvicorn starts
    listener.listen(2048)
    manager = StreamableHTTPSessionManager(app=memory.server)
    config = uvicorn.Config(
        _guarded(manager, token), lifespan="off", log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    async with manager.run():
        ready(f"http://{LOOPBACK}:{listener.getsockname()[1]}{PATH}")
        await server.serve(sockets=[listener])
