"""__TITLE__: a remote Source speaking mnemon's remote plugin protocol v0, standard library only.

Short items per user (per tenant, user and agent), kept in this process's memory: replace
`Items` with your own store. A View pins a snapshot of the items in its grant, so the server
keeps no session between calls. The manifest is JSON (valid YAML), so `json` reads it.

What it trusts: only a caller that sends the secret its launcher gave it in
MNEMON_PLUGIN_TOKEN, only loopback names in Host, only JSON bodies, only the configuration it
was started with, and no input its own manifest's schemas refuse.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST_PATH = Path(os.environ.get("MNEMON_PLUGIN_MANIFEST", HERE / "mnemon-source.yaml"))
MANIFEST_BYTES = MANIFEST_PATH.read_bytes()
MANIFEST: dict[str, Any] = json.loads(MANIFEST_BYTES)
SOURCE: dict[str, Any] = MANIFEST["source"]
ROUTES = {route["id"]: route for route in SOURCE["routes"]}
ACTIONS = {action["id"]: action for action in SOURCE["actions"]}
PLUGIN_API = "0.2.0"
MAX_BODY_BYTES = 1_048_576
MAX_ITEMS = 500
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
WORD = re.compile(r"\w+")
INVOCATION_KEYS = {"invocation_id", "instance_key", "provenance", "request"}
# each call's request fields, and the ones it may leave out
REQUEST_KEYS = {
    "facts": ({"instance_key", "scope", "scenario"}, set()),
    "project": (
        {"instance_key", "scope", "scenario", "expected_revision", "mode", "max_characters"},
        {"expected_revision"},
    ),
    "query": ({"view", "route", "grant", "input"}, {"grant"}),
    "mutate": (
        {"view", "offer", "grant", "input", "idempotency_key"},
        {"grant", "idempotency_key"},
    ),
}


class Refusal(Exception):
    """A request refused with the error envelope; never a value from the request in it."""

    def __init__(self, status: int, code: str, message: str, error_class: str = "source") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.error_class = error_class


def schema_problem(schema: dict[str, Any], value: Any, where: str = "(input)") -> str | None:
    """Where `value` breaks the subset of JSON Schema this manifest uses, or None.

    The subset: type (object, string, integer), properties, required, additionalProperties
    false, minLength and maxLength (code points), minimum and maximum. Never the value itself.
    """
    kind = schema.get("type")
    checks = {
        "object": isinstance(value, dict),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
    }
    if kind is not None and not checks.get(kind, False):
        return f"{where} (type)"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} (minLength)"
        if len(value) > schema.get("maxLength", len(value)):
            return f"{where} (maxLength)"
    integer = isinstance(value, int) and not isinstance(value, bool)
    if integer and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        return f"{where} (range)"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return f"{key} (required)"
        for key, item in value.items():
            if key in properties:
                problem = schema_problem(properties[key], item, key)
                if problem:
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"{key} (additionalProperties)"
    return None


class Items:
    """Every scope's items, in memory; a real plugin keeps them in its own store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, list[str]] = {}
        self._receipts: dict[str, dict[str, Any]] = {}

    @staticmethod
    def partition(scope: dict[str, Any]) -> str:
        """The scope's own partition: no scope ever reads another's items."""
        return json.dumps([scope.get("tenant_id"), scope.get("user_id"), scope.get("agent_id")])

    def snapshot(self, scope: dict[str, Any]) -> list[str]:
        """The scope's items now (a copy)."""
        with self._lock:
            return list(self._items.get(self.partition(scope), []))

    def add(self, scope: dict[str, Any], text: str, key: str | None, receipt: Any) -> Any:
        """Add `text`, once per idempotency key; return the receipt `receipt(items)` makes."""
        where = self.partition(scope)
        replay = None if key is None else json.dumps([where, key])
        with self._lock:
            if replay is not None and replay in self._receipts:
                return self._receipts[replay]
            items = self._items.setdefault(where, [])
            if len(items) >= MAX_ITEMS:
                raise Refusal(422, "items_full", f"at most {MAX_ITEMS} items per scope")
            items.append(text)
            answer = receipt(list(items))
            if replay is not None:
                self._receipts[replay] = answer
            return answer


ITEMS = Items()


def revision(items: list[str]) -> str:
    """A revision that changes whenever the items do."""
    return "sha256:" + hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


def facts(request: dict[str, Any]) -> dict[str, Any]:
    """What the scope has now: ready with a user, else unavailable."""
    base = {
        "instance_key": request["instance_key"],
        "type_id": SOURCE["type_id"],
        "role": SOURCE["role"],
    }
    if not request["scope"].get("user_id"):
        return {**base, "availability": "unavailable", "reason": "missing-scope"}
    return {
        **base,
        "availability": "ready",
        "revision": revision(ITEMS.snapshot(request["scope"])),
        "capabilities": SOURCE["capabilities"],
        "route_ids": list(ROUTES),
        "action_ids": list(ACTIONS),
    }


def project(request: dict[str, Any]) -> dict[str, Any]:
    """The items as text for the View, and the grant its reads will see: a snapshot."""
    if not request["scope"].get("user_id"):
        raise Refusal(422, "missing_scope", "the scope names no user")
    items = ITEMS.snapshot(request["scope"])
    text = "\n".join(f"- {item}" for item in items)[: request["max_characters"]]
    key = request["instance_key"]
    fragments = [{"source_key": key, "mode": request["mode"], "text": text}] if text else []
    snapshot = {"revision": revision(items), "items": items}
    return {"fragments": fragments, "grant": {"source_key": key, "value": snapshot}}


def query(request: dict[str, Any]) -> dict[str, Any]:
    """A read of the `search` route, in the snapshot the View's grant holds."""
    route = request["route"]
    declared = ROUTES.get(route["route_id"])
    if declared is None:
        raise Refusal(404, "unknown_route", "the manifest declares no such route")
    problem = schema_problem(declared["input_schema"], request["input"])
    if problem:  # the manifest's schema, never the one the request carries
        raise Refusal(400, "invalid_input", f"the input breaks the route's schema at {problem}")
    grant = request.get("grant") or {}
    items: list[str] = list((grant.get("value") or {}).get("items", []))
    wanted = {word.casefold() for word in WORD.findall(request["input"]["query"])}
    found: list[dict[str, Any]] = []
    used, truncated = 0, False
    for index, text in enumerate(items):
        if not wanted & {word.casefold() for word in WORD.findall(text)}:
            continue
        if len(found) >= route["max_results"] or len(text) > route["max_item_characters"]:
            truncated = True
            continue
        if used + len(text) > route["max_characters"]:
            truncated = True
            continue
        found.append({"id": f"item-{index}", "text": text})
        used += len(text)
    return {
        "view_id": request["view"]["id"],
        "route_id": route["id"],
        "source_key": route["source_key"],
        "items": found,
        "truncated": truncated,
    }


def mutate(request: dict[str, Any]) -> dict[str, Any]:
    """The `add` action, once per idempotency key; the receipt says it was committed."""
    offer = request["offer"]
    declared = ACTIONS.get(offer["action_id"])
    if declared is None:
        raise Refusal(404, "unknown_action", "the manifest declares no such action")
    problem = schema_problem(declared["input_schema"], request["input"])
    if problem:
        raise Refusal(400, "invalid_input", f"the input breaks the action's schema at {problem}")
    key = request.get("idempotency_key")

    def receipt(items: list[str]) -> dict[str, Any]:
        return {
            "view_id": request["view"]["id"],
            "offer_id": offer["id"],
            "source_key": offer["source_key"],
            "completion": "committed",
            "status": "succeeded",
            "committed_at": datetime.now(UTC).isoformat(),
            "revision": revision(items),
            "idempotency_key": key,
        }

    scope, text = request["view"]["scope"], request["input"]["text"]
    answer: dict[str, Any] = ITEMS.add(scope, text, key, receipt)
    return answer


CALLS = {"facts": facts, "project": project, "query": query, "mutate": mutate}


def host_name(header: str) -> str:
    """The name in a Host header, without its port."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")]
    name, _, port = text.rpartition(":")
    return name if name and port.isdigit() else text


class Handler(BaseHTTPRequestHandler):
    """One request: guarded first, then answered with JSON or the error envelope."""

    token = b""  # set at start from MNEMON_PLUGIN_TOKEN

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: request lines would be noise on the host's stderr."""

    def _send(self, status: int, value: Any) -> None:
        body = json.dumps(value).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(body)

    def _guard(self) -> None:
        # a web page can make any name resolve to 127.0.0.1: only loopback names are ours
        if host_name(self.headers.get("Host", "")) not in LOOPBACK:
            raise Refusal(403, "forbidden_host", "the Host header names no loopback address")
        given = hashlib.sha256(self.headers.get("Authorization", "").encode("utf-8")).digest()
        expected = hashlib.sha256(b"Bearer " + self.token).digest()
        if not hmac.compare_digest(given, expected):
            raise Refusal(401, "unauthorized", "the caller secret is missing or wrong", "access")

    def _refuse(self, refusal: Refusal) -> None:
        envelope = {
            "code": refusal.code,
            "message": refusal.message[:1024] or refusal.code,
            "retryable": False,
            "error_class": refusal.error_class,
        }
        self._send(refusal.status, envelope)

    def do_GET(self) -> None:
        """Health and discovery."""
        try:
            self._guard()
            if self.path == "/v0/health":
                return self._send(200, {"status": "ok"})
            if self.path == "/v0/discovery":
                return self._send(
                    200,
                    {
                        "plugin_api": PLUGIN_API,
                        "plugin": {"id": MANIFEST["id"], "version": MANIFEST["version"]},
                        "manifest_digest": "sha256:" + hashlib.sha256(MANIFEST_BYTES).hexdigest(),
                        "contributions": ["source"],
                    },
                )
            raise Refusal(404, "not_found", "no such route")
        except Refusal as refusal:
            self._refuse(refusal)

    def do_POST(self) -> None:
        """One call of the Source."""
        try:
            self._guard()
            self._send(200, self._call())
        except Refusal as refusal:
            self._refuse(refusal)
        except (KeyError, TypeError, AttributeError, ValueError):
            # a request whose shape broke the handling: refused, never echoed
            self._refuse(Refusal(400, "invalid_request", "the request could not be read"))

    def _call(self) -> Any:
        media = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise Refusal(415, "unsupported_media_type", "the body must be application/json")
        match = re.fullmatch(r"/v0/contributions/source/([a-z]+)", self.path)
        if match is None:
            raise Refusal(404, "not_found", "no such route")
        call = match.group(1)
        if call not in CALLS:
            raise Refusal(404, "unsupported_call", "this Source does not implement that call")
        size = int(self.headers.get("Content-Length", "0"))
        if size > MAX_BODY_BYTES:
            raise Refusal(413, "request_too_large", "the body is too large")
        try:
            invocation = json.loads(self.rfile.read(size))
        except ValueError:
            raise Refusal(400, "invalid_request", "the body is not JSON") from None
        if not isinstance(invocation, dict) or set(invocation) != INVOCATION_KEYS:
            raise Refusal(400, "invalid_request", "the body has unknown or missing fields")
        request = invocation["request"]
        allowed, optional = REQUEST_KEYS[call]
        if not isinstance(request, dict) or not allowed - optional <= set(request) <= allowed:
            raise Refusal(400, "invalid_request", "the request has unknown or missing fields")
        return CALLS[call](request)


def main() -> None:
    """Serve on the run convention's address until stopped."""
    token = os.environ.get("MNEMON_PLUGIN_TOKEN", "")
    if len(token) < 16:
        sys.exit("__NAME__: MNEMON_PLUGIN_TOKEN holds no caller secret; refusing to serve")
    configuration = json.loads(os.environ.get("MNEMON_PLUGIN_CONFIGURATION") or "{}")
    if schema_problem(MANIFEST["configuration"]["schema"], configuration):
        sys.exit("__NAME__: MNEMON_PLUGIN_CONFIGURATION does not match the configuration schema")
    Handler.token = token.encode("utf-8")
    address = (os.environ["MNEMON_PLUGIN_HOST"], int(os.environ["MNEMON_PLUGIN_PORT"]))
    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    print(f"__NAME__ serving on {address[0]}:{address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
