"""A loopback HTTP memory service for the reference provider, with scripted failures."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PLUGINS = Path(__file__).parent / "plugins"


class FakeService:
    """Memories by (tenant, user, agent); `fail_next` scripts the next responses."""

    def __init__(self) -> None:
        self.memories: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.scripted: list[tuple[int, dict[str, str]]] = []
        self.stall = threading.Event()
        self.stalling = False
        self.reject_types: set[str] = set()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                service.requests.append((self.path, body, dict(self.headers)))
                if service.stalling:
                    service.stall.wait(5)
                if service.scripted:
                    status, headers = service.scripted.pop(0)
                    if "X-Removable-Index" in headers:
                        # the units at these positions, named as the provider named them
                        at = [int(i) for i in headers.pop("X-Removable-Index").split(",")]
                        named = [body["units"][i]["event_id"] for i in at]
                        headers = {**headers, "X-Removable": ",".join(named)}
                    self._send(status, {"error": "scripted"}, headers)
                    return
                self._send(200, service.handle(self.path, body))

            def _send(
                self, status: int, payload: Any, headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                # the host may have stopped waiting (its deadline): nothing to answer then
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.end_headers()
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.scripted.append((status, headers or {}))

    def handle(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        partition = (body.get("tenant_id"), body.get("user_id"), body.get("agent_id"))
        if path == "/search":
            words = set(body["query"].lower().split())
            hits = [
                {"id": row["id"], "content": row["content"], "score": 10.0 * len(shared)}
                for row in self.memories[partition]
                if (shared := words & set(row["content"].lower().split()))
                or body["query"] in row["content"]
            ]
            return {"results": hits[: body.get("limit", 5)]}
        units = []
        for unit in body["units"]:
            if unit["unit_type"] in self.reject_types:
                units.append({"event_id": unit["event_id"], "status": "rejected"})
                continue
            row_id = f"ext-{len(self.memories[partition])}"
            self.memories[partition].append({"id": row_id, "content": unit["content"]})
            units.append({"event_id": unit["event_id"], "status": "accepted"})
        return {"units": units}

    def close(self) -> None:
        self.stall.set()
        self.server.shutdown()
        self.server.server_close()


_shared: FakeService | None = None


def shared_service() -> FakeService:
    """One service for the whole session (the conformance suite's remounts keep its data)."""
    global _shared
    if _shared is None:
        _shared = FakeService()
    return _shared
