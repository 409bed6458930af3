"""__TITLE__: a Quivr retrieval plugin (Plugin Protocol v0), standard library only.

It answers a search in rounds: the first asks the core for keyword (`bm25`) candidates, the
next ranks the candidates the core served by how many of the query's words each contains
(the core's own score breaking ties), best first, at most `limit`. It never reads an index
and never sees a model. Replace `rank` with your own ranking.

The manifest is JSON (valid YAML), so `json` reads it. What it trusts: requests signed with
the key its launcher gave it in QUIVR_PLUGIN_TOKEN (HS256, Quivr's signed engine requests),
only loopback names in Host, and only requests that fit the protocol's search request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST_PATH = Path(os.environ.get("QUIVR_PLUGIN_MANIFEST", HERE / "quivr-plugin.yaml"))
MANIFEST_BYTES = MANIFEST_PATH.read_bytes()
MANIFEST: dict[str, Any] = json.loads(MANIFEST_BYTES)
RETRIEVAL: dict[str, Any] = MANIFEST["contributions"]["retrieval"]
PROFILES = set(RETRIEVAL["profiles"])
LIMITS = {"max_rounds": 3, "max_candidates": 50, **RETRIEVAL.get("limits", {})}
PLUGIN_API = "0.14.0"
SEARCH = "/v0/contributions/retrieval/search"
MAX_BODY_BYTES = 1_048_576
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
WORD = re.compile(r"\w+")
REQUIRED = {
    "invocation_id",
    "contribution",
    "organization_id",
    "configuration",
    "profile",
    "round",
    "query",
    "limit",
    "scope",
    "spaces",
    "served",
}
ALLOWED = REQUIRED | {"budget"}
CLAIMS = {"aud", "plugin_id", "contribution", "method", "target", "body_sha256", "iat", "exp"}


class Refusal(Exception):
    """A request refused with the error envelope; never a value from the request in it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def words(text: str) -> set[str]:
    """The lowercase words of a text."""
    return {word.casefold() for word in WORD.findall(text)}


def served_candidates(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every candidate the core served in earlier rounds, once each, in the order served."""
    seen: set[str] = set()
    candidates = []
    for entry in request["served"]:
        for candidate in entry["candidates"]:
            if candidate["segment_id"] not in seen:
                seen.add(candidate["segment_id"])
                candidates.append(candidate)
    return candidates


def rank(query: str, candidates: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The hits, best first: most query words shared, then the core's score, then served order."""
    wanted = words(query)
    scored = []
    for index, candidate in enumerate(candidates):
        shared = len(wanted & words(candidate["text"]))
        scored.append((-shared, -float(candidate.get("score", 0.0)), index, candidate, shared))
    scored.sort(key=lambda entry: entry[:3])
    return [
        {"segment_id": candidate["segment_id"], "score": float(shared)}
        for _, _, _, candidate, shared in scored[:limit]
    ]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """One round's answer: candidate requests first, the ranking once candidates were served."""
    candidates = served_candidates(request)
    if not candidates and request["round"] < LIMITS["max_rounds"]:
        wanted = min(LIMITS["max_candidates"], max(10, 2 * request["limit"]))
        ask = {"primitive": "bm25", "field": "source", "query_text": request["query"]["text"]}
        return {"requests": [{**ask, "k": wanted}]}
    return {"ranking": {"hits": rank(request["query"]["text"], candidates, request["limit"])}}


def invalid(request: Any) -> str | None:
    """Why a search request is not one this plugin answers, or None."""
    if not isinstance(request, dict):
        return "the body is not a JSON object"
    if not REQUIRED <= set(request) <= ALLOWED:
        return "missing or unknown fields"
    if request["contribution"] != "retrieval" or request["profile"] not in PROFILES:
        return "a Contribution or profile the manifest does not declare"
    round_ = request["round"]
    if not isinstance(round_, int) or isinstance(round_, bool) or not 1 <= round_ <= 3:
        return "the round is not 1 to 3"
    limit = request["limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
        return "the limit is not 1 to 50"
    query = request["query"]
    if not isinstance(query, dict) or not isinstance(query.get("text"), str):
        return "the query has no text"
    if not isinstance(request["served"], list) or not isinstance(request["spaces"], list):
        return "served and spaces are lists"
    return None


def _unbase64(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify(authorization: str, key: bytes, path: str, body: bytes) -> None:
    """Refuse a request whose signed engine token does not bind this request (HS256)."""
    token = authorization.removeprefix("Bearer ")
    try:
        header_part, claims_part, signature_part = token.split(".")
        header = json.loads(_unbase64(header_part))
        claims = json.loads(_unbase64(claims_part))
        signature = _unbase64(signature_part)
    except ValueError:
        raise Refusal(401, "invalid_engine_token", "engine request authentication failed") from None
    expected = hmac.new(key, f"{header_part}.{claims_part}".encode("ascii"), hashlib.sha256)
    now = int(time.time())
    valid = (
        authorization.startswith("Bearer ")
        and isinstance(header, dict)
        and header.get("alg") == "HS256"
        and header.get("typ") == "quivr-engine+jwt"
        and set(header) <= {"alg", "typ", "kid"}
        and hmac.compare_digest(signature, expected.digest())
        and isinstance(claims, dict)
        and set(claims) == CLAIMS
        and claims["aud"] == claims["plugin_id"] == MANIFEST["id"]
        and claims["contribution"] == "retrieval"
        and claims["method"] == "POST"
        and claims["target"] == path
        and claims["body_sha256"] == hashlib.sha256(body).hexdigest()
        and isinstance(claims["iat"], int)
        and isinstance(claims["exp"], int)
        and 0 < claims["exp"] - claims["iat"] <= 60
        and claims["iat"] <= now < claims["exp"]
    )
    if not valid:
        raise Refusal(401, "invalid_engine_token", "engine request authentication failed")


def host_name(header: str) -> str:
    """The name in a Host header, without its port."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")]
    name, _, port = text.rpartition(":")
    return name if name and port.isdigit() else text


class Handler(BaseHTTPRequestHandler):
    """One request: guarded first, then answered with JSON or the error envelope."""

    key: bytes | None = None  # set at start from QUIVR_PLUGIN_TOKEN

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: request lines would be noise on the host's stderr."""

    def _send(self, status: int, value: Any) -> None:
        body = json.dumps(value).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, refusal: Refusal) -> None:
        # a request that cannot succeed as sent is refused for good: retryable false
        envelope = {"code": refusal.code, "message": refusal.message, "retryable": False}
        self._send(refusal.status, envelope)

    def do_GET(self) -> None:
        """Health and discovery."""
        if host_name(self.headers.get("Host", "")) not in LOOPBACK:
            return self._refuse(Refusal(403, "forbidden_host", "the Host is not loopback"))
        if self.path == "/v0/health":
            return self._send(200, {"status": "ok"})
        if self.path == "/v0/discovery":
            return self._send(
                200,
                {
                    "plugin_api": PLUGIN_API,
                    "plugin": {"id": MANIFEST["id"], "version": MANIFEST["version"]},
                    "manifest_digest": "sha256:" + hashlib.sha256(MANIFEST_BYTES).hexdigest(),
                    "contributions": list(MANIFEST["contributions"]),
                },
            )
        return self._refuse(Refusal(404, "not_found", "no such route"))

    def do_POST(self) -> None:
        """One round of a search."""
        try:
            if host_name(self.headers.get("Host", "")) not in LOOPBACK:
                raise Refusal(403, "forbidden_host", "the Host is not loopback")
            if self.path != SEARCH:
                raise Refusal(404, "not_found", "no such route")
            size = int(self.headers.get("Content-Length", "0"))
            if size > MAX_BODY_BYTES:
                raise Refusal(413, "request_too_large", "the body is too large")
            body = self.rfile.read(size)
            if self.key is not None:
                verify(self.headers.get("Authorization", ""), self.key, self.path, body)
            try:
                request = json.loads(body)
            except ValueError:
                raise Refusal(400, "invalid_request", "the body is not JSON") from None
            reason = invalid(request)
            if reason is not None:
                raise Refusal(400, "invalid_request", reason)
            self._send(200, answer(request))
        except Refusal as refusal:
            self._refuse(refusal)
        except (KeyError, TypeError, AttributeError, ValueError):
            # a request whose shape broke the handling: refused, never echoed
            self._refuse(Refusal(400, "invalid_request", "the request could not be read"))


def main() -> None:
    """Serve on the run convention's address until stopped."""
    token = os.environ.get("QUIVR_PLUGIN_TOKEN")
    if token:
        Handler.key = token.encode("ascii")
    else:
        print("__NAME__: no QUIVR_PLUGIN_TOKEN: requests are not verified", file=sys.stderr)
    address = (os.environ["QUIVR_PLUGIN_HOST"], int(os.environ["QUIVR_PLUGIN_PORT"]))
    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    print(f"__NAME__ serving on {address[0]}:{address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
