"""A Quivr retrieval plugin for mnemon's tests: BM25 re-rank of served candidates.

Standard library only, so it runs as `run.command` in any Python 3. `mode` selects one
deliberate defect (each breaks one rule) or `correct`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75


def words(text):
    return [w.casefold() for w in WORD.findall(text)]


def bm25(query, candidates):
    """(segment_id, score) best first; ties keep the served order."""
    documents = [words(c["text"]) for c in candidates]
    average = sum(map(len, documents)) / max(1, len(documents))
    terms = set(words(query))
    scored = []
    for index, (candidate, document) in enumerate(zip(candidates, documents, strict=True)):
        counts = Counter(document)
        score = 0.0
        for term in terms:
            having = sum(term in d for d in documents)
            idf = math.log(1 + (len(documents) - having + 0.5) / (having + 0.5))
            tf = counts[term]
            score += (
                idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(document) / max(1.0, average)))
            )
        scored.append((-score, index, candidate["segment_id"], score))
    scored.sort()
    return [(segment, round(score, 6)) for _, _, segment, score in scored]


def unique_candidates(served):
    seen, out = set(), []
    for entry in served:
        for candidate in entry["candidates"]:
            if candidate["segment_id"] not in seen:
                seen.add(candidate["segment_id"])
                out.append(candidate)
    return out


def answer(request, mode):
    """The answer to one round, with the defect of `mode`."""
    query, limit = request["query"]["text"], request["limit"]
    ask = {"primitive": "bm25", "field": "source", "query_text": query, "k": min(20, limit * 2)}
    if request["round"] == 1 or mode == "too_many_rounds":
        if mode == "too_many_requests":
            return {"requests": [ask, ask, ask]}
        if mode == "candidate_limit":
            return {"requests": [{**ask, "k": 50}]}
        if mode == "unknown_space":
            return {
                "requests": [
                    {"primitive": "near_vector", "space": "nowhere@1", "query_text": query, "k": 2}
                ]
            }
        if mode == "plugin_dependency":
            return {
                "requests": [
                    {
                        "primitive": "profile",
                        "profile": {"name": "core.retrieve/default", "limit": 5},
                    }
                ]
            }
        if mode == "schema_violation":
            return {"requests": [ask], "ranking": {"hits": []}}
        return {"requests": [ask]}
    ranked = bm25(query, unique_candidates(request["served"]))
    hits = [{"segment_id": s, "score": score} for s, score in ranked[:limit]]
    if mode == "unserved_candidate":
        hits = [{"segment_id": "never-served", "score": 1.0}, *hits[: limit - 1]]
    if mode == "duplicate_hit":
        hits = [hits[0], hits[0]]
    if mode == "too_many_hits":
        hits = [{"segment_id": s, "score": score} for s, score in ranked[: limit + 1]]
    result = {"ranking": {"hits": hits}}
    if mode == "over_budget":
        result["usage"] = {"paid_calls": 1, "cost_cents": 5}
    return result


class Handler(BaseHTTPRequestHandler):
    mode = "correct"

    def log_message(self, format, *args):  # quiet: tests read stdout/stderr
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

    def do_GET(self):
        if self.path == "/v0/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"code": "not_found", "message": "no such route", "retryable": False})

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.mode
        if mode == "refuses":
            return self._send(
                400, {"code": "unsupported_query", "message": "not this one", "retryable": False}
            )
        if mode == "busy":
            return self._send(503, {"code": "busy", "message": "try later", "retryable": True})
        if mode == "crashes":
            return self._send(500, b"Traceback: secret-token-123 at /home/plugin")
        if mode == "slow":
            time.sleep(2)
        if mode == "response_too_large":
            return self._send(200, json.dumps(answer(request, "correct")).encode() + b" " * 70_000)
        return self._send(200, answer(request, mode))


def serve(host, port, mode="correct"):
    """A running server (in a daemon thread) and its port."""
    handler = type("ModeHandler", (Handler,), {"mode": mode})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


if __name__ == "__main__":
    handler = type(
        "ModeHandler", (Handler,), {"mode": os.environ.get("QUIVR_RANKER_MODE", "correct")}
    )
    server = ThreadingHTTPServer(
        (os.environ["QUIVR_PLUGIN_HOST"], int(os.environ["QUIVR_PLUGIN_PORT"])), handler
    )
    server.serve_forever()
