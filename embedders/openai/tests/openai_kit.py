"""A real OpenAI-style embeddings server on loopback, and a Source that keeps `init.embedding`.

The server is written from the API's documented shape (`POST /v1/embeddings` with `model`,
`input`, `encoding_format`, optional `dimensions`; an answer of `data[i].embedding` by
`index`), not from the embedder's code. Toy vectors are a hash of the input, so a test knows
which vector belongs to which text. Each test may queue replies that break the API in one way.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import mnemon_embedder_openai

from mnemon import MemoryHost
from mnemon.sdk import Embedding
from mnemon_testing import EmbeddingProbe, SelectAll

#: what a server's error message says; no error or log line may repeat it
SERVER_WORDS = "the-server-said-this-in-its-message"


def toy_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic vector of `text`: every coordinate nonzero (never a zero vector)."""
    digest = hashlib.shake_256(text.encode("utf-8", "surrogatepass")).digest(dimensions)
    return [(byte - 127.5) / 127.5 for byte in digest]


@dataclass
class Received:
    """One request the server got: its path, headers (lowercase names), JSON body, client port."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    port: int


Reply = Callable[["Handler", dict[str, Any]], None]


@dataclass
class FakeOpenAI:
    """The server's state: what it received, what it answers next, how it answers by default."""

    dimensions: int = 8
    reverse: bool = False
    received: list[Received] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    #: set when the test ends: a hanging reply stops waiting
    release: threading.Event = field(default_factory=threading.Event)
    #: set when an endless reply stops writing (the client went away)
    stopped: threading.Event = field(default_factory=threading.Event)
    written: int = 0
    base_url: str = ""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The API's answer to `body`: one toy vector per input, by index."""
        dimensions = body.get("dimensions", self.dimensions)
        data = [
            {"object": "embedding", "index": index, "embedding": toy_vector(text, dimensions)}
            for index, text in enumerate(body["input"])
        ]
        if self.reverse:
            data.reverse()
        return {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    @property
    def inputs(self) -> list[list[str]]:
        """The inputs of each request, in order."""
        return [request.body["input"] for request in self.received]


class Handler(BaseHTTPRequestHandler):
    """`POST /v1/embeddings`, HTTP/1.1 with keep-alive, as OpenAI-compatible servers speak it."""

    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest treats stray output as noise

    def send(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        api = self.server.api
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        api.received.append(
            Received(
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                self.client_address[1],
            )
        )
        if self.path != "/v1/embeddings":
            self.send(404, b'{"error": {"message": "not found"}}')
            return
        reply = api.replies.pop(0) if api.replies else None
        if reply is not None:
            reply(self, body)
            return
        self.send(200, json.dumps(api.answer(body)).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: FakeOpenAI) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.api = api


@asynccontextmanager
async def serving(api: FakeOpenAI) -> AsyncIterator[FakeOpenAI]:
    """Serve `api` on 127.0.0.1 at a free port, in a thread, until the block ends."""
    server = Server(api)
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield api
    finally:
        api.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


# replies a test queues ------------------------------------------------------------------------


def status(code: int, *headers: tuple[str, str]) -> Reply:
    """An error status with an OpenAI-style error body holding `SERVER_WORDS`."""
    body = json.dumps({"error": {"message": SERVER_WORDS, "type": "x", "code": None}}).encode()

    def reply(handler: Handler, _: dict[str, Any]) -> None:
        handler.send(code, body, headers)

    return reply


def raw(body: bytes) -> Reply:
    """A 200 answer of exactly `body`."""

    def reply(handler: Handler, _: dict[str, Any]) -> None:
        handler.send(200, body)

    return reply


def changed(change: Callable[[dict[str, Any]], Any]) -> Reply:
    """A 200 answer: the right one, as `change` alters it (in place, or by returning another)."""

    def reply(handler: Handler, body: dict[str, Any]) -> None:
        answer = handler.server.api.answer(body)
        altered = change(answer)
        handler.send(200, json.dumps(answer if altered is None else altered).encode())

    return reply


def hang(handler: Handler, _: dict[str, Any]) -> None:
    """Never answer (until the test ends)."""
    handler.server.api.release.wait(10)


def drop(handler: Handler, _: dict[str, Any]) -> None:
    """Close the connection without an answer."""
    handler.close_connection = True


def endless(handler: Handler, _: dict[str, Any]) -> None:
    """A 200 answer that never ends: JSON whitespace, written until the client goes away."""
    api = handler.server.api
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")
    handler.end_headers()
    chunk = b"[" + b" " * 65_535
    try:
        while api.written < 512 << 20 and not api.release.is_set():
            handler.wfile.write(chunk)
            api.written += len(chunk)
    except OSError:
        pass  # the client closed the connection: what the test expects
    finally:
        handler.close_connection = True
        api.stopped.set()


# a host with the test kit's probe, which keeps what its Source got --------------------------------


@asynccontextmanager
async def mounted(
    *entries: dict[str, Any],
) -> AsyncIterator[tuple[MemoryHost, Embedding]]:
    """A host with the probe, a Strategy and one embedder entry per configuration given."""
    probe = EmbeddingProbe()
    async with MemoryHost() as host:
        await host.mount(probe, instance_id="probe")
        for number, configuration in enumerate(entries):
            await host.mount(mnemon_embedder_openai, instance_id=f"e{number}", config=configuration)
        await host.mount(SelectAll(), instance_id="strategy")
        async with host.turn():
            pass
        yield host, probe.embedding
