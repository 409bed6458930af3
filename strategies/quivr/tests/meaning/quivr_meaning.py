"""A Quivr retrieval plugin for mnemon's tests that asks for candidates by meaning.

Written from the retrieval Contribution of Quivr's Plugin Protocol v0 text, with the standard
library only. Round 1 asks for the candidate requests its `asks` name, in the first vector
space the search offers (`mnemon.none@1` when it offers none); round 2 ranks every served
candidate in the order served, first request first, with the score the core gave it. Each
search request it receives is kept in `seen`, so a test can read what the host offered and
served.

`asks` names requests: `bm25`, `near_vector` (by `query_text`), `hybrid` (with `alpha`),
`ranked_fusion` (hybrid with `fusion: ranked`), `vector` (near_vector with a query vector of
the space's dimensions), `wrong_dimensions` (one number more) and `unknown_space` (a space
never offered).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEARCH = "/v0/contributions/retrieval/search"
NO_SPACE = {"id": "mnemon.none@1", "dimensions": 4}


def candidate_requests(search, asks, alpha):
    """The round-1 requests `asks` names, in the first space the search offers."""
    space = (search["spaces"] or [NO_SPACE])[0]
    dimensions = space["dimensions"]
    text = search["query"]["text"]
    k = min(20, 2 * search["limit"])
    by_meaning = {"primitive": "near_vector", "space": space["id"], "k": k}
    hybrid = {
        "primitive": "hybrid",
        "space": space["id"],
        "query_text": text,
        "field": "source",
        "alpha": alpha,
        "fusion": "relative_score",
        "k": k,
    }
    made = {
        "bm25": {"primitive": "bm25", "field": "source", "query_text": text, "k": k},
        "near_vector": {**by_meaning, "query_text": text},
        "hybrid": hybrid,
        "ranked_fusion": {**hybrid, "fusion": "ranked"},
        "vector": {**by_meaning, "vector": [1 / math.sqrt(dimensions)] * dimensions},
        "wrong_dimensions": {**by_meaning, "vector": [0.5] * (dimensions + 1)},
        "unknown_space": {**by_meaning, "space": "nowhere@1", "query_text": text},
    }
    return [made[name] for name in asks]


def ranking(search):
    """Every served candidate once, in served order, scored as the core scored it."""
    seen, hits = set(), []
    for served in search["served"]:
        for candidate in served["candidates"]:
            if candidate["segment_id"] not in seen:
                seen.add(candidate["segment_id"])
                hits.append({"segment_id": candidate["segment_id"], "score": candidate["score"]})
    return {"ranking": {"hits": hits[: search["limit"]]}}


class Handler(BaseHTTPRequestHandler):
    asks = ("near_vector",)
    alpha = 0.5
    seen = None  # a list: serve() gives each server its own

    def log_message(self, format, *args):  # quiet: tests read stdout and stderr
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v0/health":
            return self._send(200, {"status": "ok"})
        return self._send(
            404, {"code": "not_found", "message": "no such route", "retryable": False}
        )

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            search = json.loads(body)
        except ValueError:
            search = None
        if self.path != SEARCH or not isinstance(search, dict) or "spaces" not in search:
            return self._send(
                400, {"code": "invalid_request", "message": "not a search", "retryable": False}
            )
        self.seen.append(search)
        if search["round"] == 1:
            return self._send(200, {"requests": candidate_requests(search, self.asks, self.alpha)})
        return self._send(200, ranking(search))


def serve(host, port, asks=("near_vector",), alpha=0.5):
    """A running server (in a daemon thread); its handler's `seen` lists every search."""
    handler = type("Asking", (Handler,), {"asks": tuple(asks), "alpha": alpha, "seen": []})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


if __name__ == "__main__":
    options = argparse.ArgumentParser()
    options.add_argument("--ask", action="append", default=[])
    options.add_argument("--alpha", type=float, default=0.5)
    arguments = options.parse_args()
    server = serve(
        os.environ["QUIVR_PLUGIN_HOST"],
        int(os.environ["QUIVR_PLUGIN_PORT"]),
        arguments.ask or ["near_vector"],
        arguments.alpha,
    )
    threading.Event().wait()
