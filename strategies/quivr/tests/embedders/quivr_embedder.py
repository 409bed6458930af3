"""A Quivr ingestion plugin for mnemon's tests: a deterministic word-hashing embedder.

Written from Quivr's Plugin Protocol v0 text (routes, the ingestion Contribution, the error
envelope, the run convention), with the standard library only, so it runs as `run.command` in
any Python 3. Each segment is a sentence of a Part (offsets in code points, which is what a
Python string index counts); its vector hashes each word, a few synonyms folded together, into
64 signed buckets, normalised, so texts sharing words or meanings point the same way.

It serves on `QUIVR_PLUGIN_HOST:QUIVR_PLUGIN_PORT`. When `QUIVR_PLUGIN_TOKEN` is set (mnemon
sets a fresh one per launch), every request to a Contribution must carry an engine request
signed with it (HS256, `Authorization: Bearer <JWS>`), and only a loopback `Host` is served:
no other local process can use it.

Options (argv: a launched plugin's environment is the run convention's): `--mode MODE` selects
one deliberate defect or `correct`; `--retrieval` also serves a `retrieval` Contribution that
re-ranks served candidates (hybrid ones in its own space) by its own vectors; `--record FILE`
writes the environment it was started with and appends its pid to `FILE.starts`;
`--dimensions N` makes vectors of N numbers (the manifest must say so: another model, in
effect); `--plugin-api V` is the Plugin API version discovery serves (the highest its
manifest's range admits, 0.14.0 by default).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import math
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_ID = "mnemon.hashing"
SPACE = "mnemon.hashing.words"
DIMENSIONS = 64
MAX_SEGMENTS = 64
MAX_BODY = 16 * 1024 * 1024
SECRET = "HASHING_API_KEY"
SEGMENT_AND_EMBED = "/v0/contributions/ingestion/segment_and_embed"
EMBED_QUERY = "/v0/contributions/ingestion/embed_query"
SEARCH = "/v0/contributions/retrieval/search"
WORD = re.compile(r"\w+")
SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
# a handful of meanings several words share: enough for a paraphrase to be found
SYNONYMS = {
    "chai": "tea",
    "beverage": "drink",
    "drinks": "drink",
    "feline": "cat",
    "kitten": "cat",
    "automobile": "car",
    "vehicle": "car",
    "bike": "bicycle",
    "cycling": "bicycle",
    "reunion": "meeting",
    "gathering": "meeting",
}
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
SEGMENT_FIELDS = {
    "invocation_id",
    "idempotency_key",
    "contribution",
    "organization_id",
    "configuration",
    "version",
    "parts",
    "spaces",
}
QUERY_FIELDS = {"invocation_id", "contribution", "organization_id", "configuration", "space"}
SEARCH_FIELDS = {
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


class Refusal(Exception):
    """An error envelope to answer with."""

    def __init__(self, status, code, message, retryable=False):
        super().__init__(code)
        self.status = status
        self.envelope = {"code": code, "message": message, "retryable": retryable}


def words(text):
    """The text's words, lowercased, plurals cut and synonyms folded to one meaning."""
    out = []
    for word in WORD.findall(text.lower()):
        word = SYNONYMS.get(word, word)
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(SYNONYMS.get(word, word))
    return out


def vector(text, salt="", dimensions=DIMENSIONS):
    """The normalised sum of each word's signed bucket; all zeros for a text without words."""
    values = [0.0] * dimensions
    for word in words(text):
        digest = hashlib.sha256((salt + word).encode()).digest()
        values[digest[0] % dimensions] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in values))
    return [round(v / norm, 6) if norm else 0.0 for v in values]


def sentences(text):
    """(start, end) of each sentence holding a word, in code points, surrounding spaces cut."""
    cuts = []
    for match in SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if WORD.search(text, start, end):
            cuts.append((start, end))
    return cuts


def signature_problem(token, key, method, target, body):
    """Why a signed engine request does not verify, or None (HS256, claims bound to it)."""
    try:
        header, payload, signature = token.split(".")
        pad = lambda part: part + "=" * (-len(part) % 4)  # noqa: E731
        claims = json.loads(base64.urlsafe_b64decode(pad(payload)))
        alg = json.loads(base64.urlsafe_b64decode(pad(header))).get("alg")
        sent = base64.urlsafe_b64decode(pad(signature))
    except (ValueError, AttributeError):
        return "malformed token"
    expected = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    if alg != "HS256" or not hmac.compare_digest(sent, expected):
        return "bad signature"
    now = int(time.time())
    contribution = target.split("/")[3] if target.startswith("/v0/contributions/") else ""
    wanted = {
        "aud": PLUGIN_ID,
        "plugin_id": PLUGIN_ID,
        "contribution": contribution,
        "method": method,
        "target": target,
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }
    if any(claims.get(name) != value for name, value in wanted.items()):
        return "a claim does not match the request"
    if not (isinstance(claims.get("iat"), int) and claims["iat"] <= now < claims.get("exp", 0)):
        return "expired or not yet valid"
    return None


def _strings(value, *names):
    return isinstance(value, dict) and all(
        isinstance(value.get(name), str) and value[name] for name in names
    )


def check_segment_request(request):
    """The request as given, or a `Refusal` for what the schema refuses."""
    if not isinstance(request, dict) or set(request) - {"language"} != SEGMENT_FIELDS:
        raise Refusal(400, "invalid_request", "missing or unknown fields")
    if request["contribution"] != "ingestion" or not isinstance(request["configuration"], dict):
        raise Refusal(400, "invalid_request", "not an ingestion request")
    if not _strings(request["version"], "corpus_id", "record_id", "record_version_id"):
        raise Refusal(400, "invalid_request", "bad version")
    parts = request["parts"]
    if not isinstance(parts, list) or not 1 <= len(parts) <= 256:
        raise Refusal(400, "invalid_request", "1 to 256 parts")
    for part in parts:
        if not isinstance(part, dict) or set(part) != {"key", "role", "text"}:
            raise Refusal(400, "invalid_request", "a part is key, role and text")
        if not _strings(part, "key", "role") or not isinstance(part["text"], str):
            raise Refusal(400, "invalid_request", "a part is key, role and text")
    if len({part["key"] for part in parts}) != len(parts):
        raise Refusal(400, "invalid_request", "part keys repeat")
    spaces = request["spaces"]
    if not isinstance(spaces, list) or len(set(map(str, spaces))) != len(spaces):
        raise Refusal(400, "invalid_request", "spaces is a list of distinct ids")
    if any(space != SPACE for space in spaces):
        raise Refusal(400, "unknown_space", "a space this plugin does not declare")
    return request


def check_query_request(request):
    """The request as given, or a `Refusal`."""
    if not isinstance(request, dict) or set(request) != QUERY_FIELDS | {"query"}:
        raise Refusal(400, "invalid_request", "missing or unknown fields")
    query = request["query"]
    if request["contribution"] != "ingestion" or not isinstance(query, dict):
        raise Refusal(400, "invalid_request", "not an ingestion request")
    if set(query) != {"modality", "text"} or query["modality"] != "text":
        raise Refusal(400, "invalid_request", "a query is text")
    if not isinstance(query["text"], str) or not query["text"]:
        raise Refusal(400, "invalid_request", "a query is text")
    if request["space"] != SPACE:
        raise Refusal(400, "unknown_space", "a space this plugin does not declare")
    return request


def segment_answer(request, mode, call, dimensions):
    """Each Part's sentences with their vectors in the spaces asked for."""
    segments = []
    for part in request["parts"]:
        for start, end in sentences(part["text"]):
            text = part["text"][start:end]
            if mode == "segments_differ" and not request["spaces"]:
                end = len(part["text"])  # asked for segments alone, it cuts another way
            salt = str(call) if mode == "nondeterministic" else ""
            segment = {
                "part_key": part["key"],
                "start": start,
                "end": end,
                "vectors": {space: vector(text, salt, dimensions) for space in request["spaces"]},
            }
            if mode == "leaks_secret_in_answer":
                segment["provenance"] = {"source": f"key {os.environ.get(SECRET, '')}"}
            segments.append(segment)
    if not segments:
        raise Refusal(422, "no_text", "no Part holds a word")
    if len(segments) > MAX_SEGMENTS:
        raise Refusal(422, "too_many_segments", f"more than {MAX_SEGMENTS} sentences")
    for segment in segments[:1]:
        vectors = segment["vectors"]
        if mode == "wrong_dimensions":
            segment["vectors"] = {space: [*values, 0.5] for space, values in vectors.items()}
        if mode == "offsets":
            segment["end"] += 1000
        if mode == "overflow":
            segment["vectors"] = {space: [1e39, *values[1:]] for space, values in vectors.items()}
    return {"segments": segments}


def rank(request):
    """A retrieval round: ask for candidates, then rank them by this plugin's vectors.

    The candidates are hybrid ones in this plugin's own space when the search offers it (words
    and meaning fused by the core), else keyword ones.
    """
    limit = request["limit"]
    if request["round"] == 1:
        k = min(20, limit * 2)
        text = request["query"]["text"]
        own = [s["id"] for s in request["spaces"] if s["id"].split("@")[0] == SPACE]
        if own:
            ask = {"primitive": "hybrid", "space": own[0], "query_text": text, "alpha": 0.5}
        else:
            ask = {"primitive": "bm25", "field": "source", "query_text": text}
        return {"requests": [{**ask, "k": k}]}
    query = vector(request["query"]["text"])
    seen, scored = set(), []
    for served in request["served"]:
        for candidate in served["candidates"]:
            if candidate["segment_id"] in seen:
                continue
            seen.add(candidate["segment_id"])
            score = sum(a * b for a, b in zip(query, vector(candidate["text"]), strict=True))
            scored.append((-round(score, 6), len(scored), candidate["segment_id"]))
    scored.sort()
    return {
        "ranking": {
            "hits": [{"segment_id": segment, "score": -score} for score, _, segment in scored][
                :limit
            ]
        }
    }


def check_search_request(request):
    if not isinstance(request, dict) or not SEARCH_FIELDS <= set(request) <= SEARCH_FIELDS | {
        "budget"
    }:
        raise Refusal(400, "invalid_request", "missing or unknown fields")
    if request["profile"] != "default" or request["contribution"] != "retrieval":
        raise Refusal(400, "invalid_request", "undeclared profile")
    if not isinstance(request["round"], int) or not 1 <= request["round"] <= 3:
        raise Refusal(400, "invalid_request", "round out of range")
    if not isinstance(request["spaces"], list):
        raise Refusal(400, "invalid_request", "spaces is a list")
    return request


class Handler(BaseHTTPRequestHandler):
    mode = "correct"
    retrieval = False
    plugin_api = "0.14.0"
    dimensions = DIMENSIONS
    key = None  # bytes: requests to a Contribution must be signed with it
    calls = itertools.count(1)

    def log_message(self, format, *args):  # quiet: tests read stdout and stderr
        pass

    def _send(self, status, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # the host may have stopped waiting (a deadline): nothing to answer then
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def _guard(self, body=b""):
        """Refuse what no host that launched this plugin sends."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if self.key is not None and host not in LOOPBACK:
            raise Refusal(403, "forbidden_host", "only loopback is served")
        if self.key is not None and self.path.startswith("/v0/contributions/"):
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            if signature_problem(token, self.key, self.command, self.path, body):
                raise Refusal(401, "unauthenticated", "a signed engine request is required")

    def do_GET(self):
        try:
            self._guard()
        except Refusal as refusal:
            return self._send(refusal.status, refusal.envelope)
        if self.path == "/v0/health":
            return self._send(200, {"status": "ok"})
        if self.path == "/v0/discovery":
            manifest = os.environ.get(
                "QUIVR_PLUGIN_MANIFEST", os.path.join(HERE, "quivr-plugin.yaml")
            )
            with open(manifest, "rb") as file:
                digest = "sha256:" + hashlib.sha256(file.read()).hexdigest()
            if self.mode == "wrong_digest":
                digest = "sha256:" + "0" * 64
            contributions = ["ingestion", "retrieval"] if self.retrieval else ["ingestion"]
            return self._send(
                200,
                {
                    "plugin_api": self.plugin_api,
                    "plugin": {"id": PLUGIN_ID, "version": "0.1.0"},
                    "manifest_digest": digest,
                    "contributions": contributions,
                },
            )
        return self._send(
            404, {"code": "not_found", "message": "no such route", "retryable": False}
        )

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._send(
                413, {"code": "request_too_large", "message": "too large", "retryable": False}
            )
        body = self.rfile.read(length)
        try:
            self._guard(body)
            return self._answer(body)
        except Refusal as refusal:
            return self._send(refusal.status, refusal.envelope)

    def _answer(self, body):
        mode = self.mode
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if self.path == SEGMENT_AND_EMBED:
            check = check_segment_request
        elif self.path == EMBED_QUERY:
            check = check_query_request
        elif self.path == SEARCH and self.retrieval:
            check = check_search_request
        else:
            raise Refusal(404, "not_found", "no such route")
        try:
            check(request)
        except Refusal as refusal:
            if mode == "accepts_invalid":
                return self._send(200, {"segments": []})
            if mode == "retryable_refusal":
                refusal.envelope["retryable"] = True
            raise
        if mode == "refuses":
            raise Refusal(422, "unsupported_text", "not this one")
        if mode == "busy":
            raise Refusal(503, "busy", "try again later", retryable=True)
        if mode == "crashes":
            return self._send(500, b"Traceback (most recent call last): at /home/plugin")
        if self.path == SEARCH:
            return self._send(200, rank(request))
        call = next(self.calls)
        if self.path == EMBED_QUERY:
            if mode in ("slow", "slow_query"):
                time.sleep(1.3)  # past query_timeout_ms (1000)
            salt = str(call) if mode == "query_drifts" else ""
            values = vector(request["query"]["text"], salt, self.dimensions)
            if mode == "wrong_dimensions":
                values = [*values, 0.5]
            if mode == "nan":
                return self._send(200, b'{"vector": [NaN' + b", 0.5" * (DIMENSIONS - 1) + b"]}")
            return self._send(200, {"vector": values})
        if mode == "slow":
            time.sleep(2.5)  # past timeout_ms (2000)
        answer = segment_answer(request, mode, call, self.dimensions)
        if mode == "nan":
            raw = json.dumps(answer).replace("0.0,", "NaN,", 1).encode()
            return self._send(200, raw)
        if mode == "too_large":
            return self._send(200, json.dumps(answer).encode() + b" " * 300_000)
        return self._send(200, answer)


def serve(host, port, mode="correct", key=None, retrieval=False, dimensions=DIMENSIONS):
    """A running server (in a daemon thread); its `RequestHandlerClass.mode` may be changed."""
    handler = type(
        "ModeHandler",
        (Handler,),
        {
            "mode": mode,
            "key": key,
            "retrieval": retrieval,
            "dimensions": dimensions,
            "calls": itertools.count(1),
        },
    )
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def record(path):
    """Write the environment this process was started with, and count the start."""
    with open(path + ".partial", "w", encoding="utf-8") as file:
        json.dump({"environment": dict(os.environ), "pid": os.getpid()}, file)
    os.replace(path + ".partial", path)
    with open(path + ".starts", "a", encoding="utf-8") as file:
        file.write(f"{os.getpid()}\n")


if __name__ == "__main__":
    options = argparse.ArgumentParser()
    options.add_argument("--mode", default="correct")
    options.add_argument("--retrieval", action="store_true")
    options.add_argument("--record")
    options.add_argument("--dimensions", type=int, default=DIMENSIONS)
    options.add_argument("--plugin-api", default="0.14.0")
    arguments = options.parse_args()
    if arguments.record:
        record(arguments.record)
    if arguments.mode == "leaks_secret":
        print(f"hashing embedder starting with key {os.environ.get(SECRET)}", file=sys.stderr)
    else:
        print("hashing embedder starting", file=sys.stderr)
    token = os.environ.get("QUIVR_PLUGIN_TOKEN")
    handler = type(
        "ModeHandler",
        (Handler,),
        {
            "mode": arguments.mode,
            "retrieval": arguments.retrieval,
            "dimensions": arguments.dimensions,
            "plugin_api": arguments.plugin_api,
            "key": None if token is None else token.encode(),
            "calls": itertools.count(1),
        },
    )
    server = ThreadingHTTPServer(
        (os.environ["QUIVR_PLUGIN_HOST"], int(os.environ["QUIVR_PLUGIN_PORT"])), handler
    )
    server.serve_forever()
