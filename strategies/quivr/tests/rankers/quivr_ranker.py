"""A Quivr retrieval plugin for mnemon's tests: BM25 re-rank of served candidates.

Standard library only, so it runs as `run.command` in any Python 3. `mode` selects one
deliberate defect (each breaks one rule or one certification check) or `correct`. A launched
ranker takes its options from its argv, the only way a test reaches it (its environment is the
run convention's): `--mode MODE`, `--record FILE` (write what it was started with: its
environment and the pid of its child), `--with-child` (start a worker process that ignores
SIGTERM, as a careless plugin's helper would), `--also NAME` (discovery lists Contribution NAME
too, for a manifest that declares it beside retrieval; the ranker serves none of its routes).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75
MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quivr-plugin.yaml")
# what quivr-plugin.yaml declares (no YAML parser in the standard library)
PROFILES = {"default", "hasty"}
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
SECRET = "BM25_API_KEY"


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


def invalid(request):
    """Why a search request is invalid, or None: the checks Quivr's runner probes."""
    if not isinstance(request, dict):
        return "the body is not a JSON object"
    if not REQUIRED.issubset(request) or not ALLOWED.issuperset(request):
        return "missing or unknown fields"
    if request["profile"] not in PROFILES:
        return "undeclared profile"
    if not isinstance(request["round"], int) or not 1 <= request["round"] <= 3:
        return "round out of range"
    if not isinstance(request["spaces"], list) or request["contribution"] != "retrieval":
        return "bad spaces or contribution"
    return None


def answer(request, mode, call=0):
    """The answer to one round, with the defect of `mode` (`call` counts the rankings)."""
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
    if mode == "nondeterministic":
        # a tie-break on something that changes per call, such as the clock
        for hit in hits:
            hit["score"] = round(hit["score"] + call / 1000, 6)
    return result


def discovery(mode, also=()):
    # the run convention names the manifest the host inspected; in-process, the one beside
    with open(os.environ.get("QUIVR_PLUGIN_MANIFEST", MANIFEST), "rb") as manifest:
        digest = "sha256:" + hashlib.sha256(manifest.read()).hexdigest()
    if mode == "wrong_digest":
        digest = "sha256:" + "0" * 64
    return {
        # 0.6 predates retrieval: the manifest does not admit it
        "plugin_api": "0.6.0" if mode == "old_plugin_api" else "0.14.0",
        "plugin": {"id": "mnemon.bm25", "version": "0.1.0"},
        "manifest_digest": digest,
        "contributions": ["retrieval", *also],
    }


class Handler(BaseHTTPRequestHandler):
    mode = "correct"
    also = ()
    rankings = itertools.count()  # each server gets its own (serve, __main__)

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

    def _refuse(self, retryable=False):
        envelope = {"code": "invalid_request", "message": "invalid search", "retryable": retryable}
        if self.mode == "leaks_secret_in_answer":
            envelope["message"] = f"invalid search for key {os.environ.get(SECRET)}"
        return self._send(400, envelope)

    def do_GET(self):
        if self.path == "/v0/health":
            if self.mode == "unhealthy":
                self._send(503, {"code": "starting", "message": "not ready", "retryable": True})
            else:
                self._send(200, {"status": "ok"})
        elif self.path == "/v0/discovery":
            self._send(200, discovery(self.mode, self.also))
        else:
            self._send(404, {"code": "not_found", "message": "no such route", "retryable": False})

    def do_POST(self):
        mode = self.mode
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        if mode == "accepts_invalid":
            if invalid(request):
                return self._send(200, {"ranking": {"hits": []}})
        elif invalid(request):
            return self._refuse(retryable=mode == "retryable_refusal")
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
        # two rounds within the default profile's 5 s, one over the hasty one's 1 s (a budget a
        # healthy ranker keeps even on a loaded machine)
        if mode == "sluggish":
            time.sleep(1.5)
        if mode == "response_too_large":
            return self._send(200, json.dumps(answer(request, "correct")).encode() + b" " * 70_000)
        call = next(self.rankings) if request["round"] > 1 else 0
        return self._send(200, answer(request, mode, call))


def serve(host, port, mode="correct"):
    """A running server (in a daemon thread) and its port."""
    handler = type("ModeHandler", (Handler,), {"mode": mode, "rankings": itertools.count()})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


# a helper that outlives a plain SIGTERM to the group: only SIGKILL ends it
CHILD = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def start_child():
    """A worker process in the ranker's process group, once it ignores SIGTERM."""
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    child.stdout.readline()
    return child


def record(path, child):
    """Write what the ranker was started with, for the test that launched it."""
    value = {"environment": dict(os.environ), "child": None if child is None else child.pid}
    with open(path + ".partial", "w", encoding="utf-8") as file:
        json.dump(value, file)
    os.replace(path + ".partial", path)


if __name__ == "__main__":
    options = argparse.ArgumentParser()
    options.add_argument("--mode", default="correct")
    options.add_argument("--record")
    options.add_argument("--with-child", action="store_true")
    options.add_argument("--also", action="append", default=[])
    arguments = options.parse_args()
    mode = arguments.mode
    child = start_child() if arguments.with_child else None
    if arguments.record:
        record(arguments.record, child)
    if mode == "leaks_secret":
        print(f"bm25 ranker starting with key {os.environ.get(SECRET)}", file=sys.stderr)
    else:
        print("bm25 ranker starting", file=sys.stderr)
    handler = type(
        "ModeHandler",
        (Handler,),
        {"mode": mode, "rankings": itertools.count(), "also": tuple(arguments.also)},
    )
    server = ThreadingHTTPServer(
        (os.environ["QUIVR_PLUGIN_HOST"], int(os.environ["QUIVR_PLUGIN_PORT"])), handler
    )
    server.serve_forever()
