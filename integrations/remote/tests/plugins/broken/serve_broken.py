"""The notes plugin, deliberately broken in one way per runner check: `serve_broken.py MODE`.

Each mode wraps the correct server and breaks exactly one promise of the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mnemon_example_notes import NOTES_SOURCE
from mnemon_remote import create_app

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


async def _body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _answer(send: Send, status: int, content: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


async def _call(app: App, scope: Scope, body: bytes) -> tuple[int, bytes]:
    """Run the correct app on `body`; return its status and answer."""
    sent = False
    answer: dict[str, Any] = {"status": 500, "body": b""}

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        else:
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["body"]


def _shared_user(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: ("shared" if k == "user_id" and v else _shared_user(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_shared_user(v) for v in value]
    return value


TOKEN = f"Bearer {os.environ.get('MNEMON_PLUGIN_TOKEN', '')}".encode()


def broken(app: App, mode: str) -> App:
    facts_seen = 0

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal facts_seen
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path = scope["path"]
        if mode == "health" and path == "/v0/health":
            await _answer(send, 503, b"down for maintenance")
            return
        body = await _body(receive)
        if mode == "unprotected":
            # lets any caller in: the caller secret, Host and media type are put right for it
            headers = [(k, v) for k, v in scope["headers"] if k not in (b"authorization", b"host")]
            headers += [(b"authorization", TOKEN), (b"host", b"127.0.0.1")]
            if scope["method"] == "POST":
                headers = [(k, v) for k, v in headers if k != b"content-type"]
                headers.append((b"content-type", b"application/json"))
            scope = {**scope, "headers": headers}
        if mode == "slow" and path.endswith("/mutate"):
            await asyncio.sleep(2)  # past timeout_ms (the test sets 0.5 s): a write answered late
        if mode == "wrong_shape" and path.endswith("/mutate"):
            await _answer(send, 200, b'{"receipt": "saved"}')
            return
        if mode == "invalid_request" and scope["method"] == "POST":
            try:
                json.loads(body)
            except ValueError:
                envelope = {"code": "invalid_request", "message": "not JSON", "retryable": True}
                await _answer(send, 400, json.dumps(envelope).encode())
                return
        if mode == "isolation" and scope["method"] == "POST":
            with contextlib.suppress(ValueError):  # not JSON: the correct server refuses it
                body = json.dumps(_shared_user(json.loads(body))).encode()
        status, answer = await _call(app, scope, body)
        if mode == "flood" and path == "/v0/discovery":
            # an answer past max_response_bytes (1 MiB), sent in chunks until the reader stops
            start = {"type": "http.response.start", "status": 200, "headers": []}
            await send(start)
            chunk = b" " * 65_536
            for _ in range(64):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        if mode == "discovery" and path == "/v0/discovery":
            value = json.loads(answer)
            value["manifest_digest"] = "sha256:" + "0" * 64
            answer = json.dumps(value).encode()
        if mode == "discovery_shape" and path == "/v0/discovery":
            value = json.loads(answer)
            value["plugin"]["leak"] = "tok_SECRET_in_discovery"
            answer = json.dumps(value).encode()
        if mode == "invoke" and path.endswith("/facts") and status == 200:
            facts_seen += 1
            if facts_seen == 1:  # only the first answer: later checks still reach the plugin
                value = json.loads(answer)
                value["unexpected"] = True
                answer = json.dumps(value).encode()
        if mode == "replay" and path.endswith("/mutate") and status == 200:
            value = json.loads(answer)
            value["detail"] = {"nonce": secrets.token_hex(8)}
            answer = json.dumps(value).encode()
        await _answer(send, status, answer)

    return wrapper


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "credentials":
        print(f"starting with token {os.environ.get('NOTES_TOKEN')}", file=sys.stderr, flush=True)
    app = create_app(
        NOTES_SOURCE,
        os.environ["MNEMON_PLUGIN_MANIFEST"],
        token=os.environ["MNEMON_PLUGIN_TOKEN"],
        configuration=json.loads(os.environ.get("MNEMON_PLUGIN_CONFIGURATION") or "{}"),
        data_dir=tempfile.mkdtemp(prefix="broken-plugin-"),
    )
    uvicorn.run(
        broken(app, mode),  # type: ignore[arg-type]
        host=os.environ["MNEMON_PLUGIN_HOST"],
        port=int(os.environ["MNEMON_PLUGIN_PORT"]),
        log_level="warning",
    )
