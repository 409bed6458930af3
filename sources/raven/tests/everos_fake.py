"""An in-memory EverOS for the `everos` backend's tests, reached through `httpx.MockTransport`.

It checks request bodies as EverOS's reference describes them (exactly one of `user_id`/
`agent_id`, `top_k` of -1 or 1..100, messages with `sender_id`, `role`, a millisecond
`timestamp` and `content`, no unknown search keys) and answers in EverOS's envelopes, built
from the shapes in `everos_shapes/`. Every add is extracted at once: a user message becomes an
episode of its sender, an assistant message a case of its sender. `fail_next()` makes the next
request fail; `replies` replays a recorded answer for a path.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from mnemon_source_raven import everos

SHAPES = Path(__file__).parent / "everos_shapes"
FAKES: dict[str, FakeEveros] = {}
_SAFE = re.compile(r"^[A-Za-z0-9_.@+-]+$")
_SEARCH_KEYS = {
    "user_id", "agent_id", "app_id", "project_id", "query", "method", "top_k", "radius",
    "min_score", "include_profile", "enable_llm_rerank", "filters",
}  # fmt: skip


def shape(name: str) -> Any:
    """A recorded answer from `everos_shapes/`."""
    return json.loads((SHAPES / name).read_text(encoding="utf-8"))


def _invalid(message: str, path: str) -> httpx.Response:
    body = shape("error-invalid-input.json")
    body["error"].update(message=message, path=path)
    return httpx.Response(422, json=body)


class FakeEveros:
    """One EverOS server; `transport` is what an `EverosBackend` is given."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.health: Any = shape("health.json")
        self.replies: dict[str, Any] = {}
        self.memories: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
        self._failures: list[Callable[[httpx.Request], httpx.Response]] = []
        self.transport = httpx.MockTransport(self.handle)

    def fail_next(self, failure: Callable[[httpx.Request], httpx.Response]) -> None:
        """Answer the next request with `failure(request)` (it may raise an httpx error)."""
        self._failures.append(failure)

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies of the requests made to `path`, in order."""
        return [body for _, seen, _, body in self.requests if seen == path]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append((request.method, path, dict(request.headers), body))
        if self._failures:
            return self._failures.pop(0)(request)
        if path == "/health" and request.method == "GET":
            return httpx.Response(200, json=self.health)
        match = re.fullmatch(r"/api/v[12]/memory/(search|add|flush)", path)
        if match is None or request.method != "POST" or not isinstance(body, dict):
            return httpx.Response(
                404, json={"request_id": "0" * 32, "error": {"code": "NOT_FOUND"}}
            )
        if path in self.replies:
            return httpx.Response(200, json=self.replies[path])
        operation = match.group(1)
        if operation == "search":
            return self._search(body, path)
        if operation == "add":
            return self._add(body, path)
        if not 1 <= len(str(body.get("session_id", ""))) <= 128:
            return _invalid("session_id: length 1-128", path)
        return httpx.Response(200, json={"request_id": "f" * 32, "data": {"status": "extracted"}})

    def _search(self, body: dict[str, Any], path: str) -> httpx.Response:
        if set(body) - _SEARCH_KEYS:
            return _invalid("Extra inputs are not permitted", path)
        if (body.get("user_id") is None) == (body.get("agent_id") is None):
            return _invalid("exactly one of user_id / agent_id must be provided", path)
        top_k = body.get("top_k", -1)
        if not isinstance(top_k, int) or not (top_k == -1 or 1 <= top_k <= 100):
            return _invalid("top_k: -1 or 1..100", path)
        if not str(body.get("query", "")):
            return _invalid("query: minLength 1", path)
        track = "user" if body.get("user_id") is not None else "agent"
        owner = str(body.get(f"{track}_id"))
        scope = (body.get("app_id", "default"), body.get("project_id", "default"))
        words = set(str(body["query"]).lower().split())
        scored = []
        for item in self.memories[(*scope, track, owner)]:
            text = item["summary"] if track == "user" else item["task_intent"]
            shared = words & set(text.lower().split())
            if shared:
                scored.append({**item, "score": len(shared) / len(words)})
        scored.sort(key=lambda item: item["score"], reverse=True)
        limit = 10 if top_k == -1 else top_k
        data: dict[str, Any] = {
            "episodes": scored[:limit] if track == "user" else [],
            "profiles": [],
            "agent_cases": scored[:limit] if track == "agent" else [],
            "agent_skills": [],
            "unprocessed_messages": [],
        }
        return httpx.Response(200, json={"request_id": "a" * 32, "data": data})

    def _add(self, body: dict[str, Any], path: str) -> httpx.Response:
        session = body.get("session_id")
        messages = body.get("messages")
        if not isinstance(session, str) or not 1 <= len(session) <= 128:
            return _invalid("session_id: length 1-128", path)
        if not isinstance(messages, list) or not 1 <= len(messages) <= 500:
            return _invalid("Field required: messages", path)
        scope = (body.get("app_id", "default"), body.get("project_id", "default"))
        for name in ("app_id", "project_id"):
            if name in body and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", str(body[name])):
                return _invalid(f"{name}: ScopeId", path)
        for message in messages:
            sender, role = message.get("sender_id"), message.get("role")
            stamp = message.get("timestamp")
            if not isinstance(sender, str) or not _SAFE.fullmatch(sender) or sender in (".", ".."):
                return _invalid("sender_id", path)
            if role not in ("user", "assistant", "tool") or (
                role == "tool" and not message.get("tool_call_id")
            ):
                return _invalid("role", path)
            if not isinstance(stamp, int) or isinstance(stamp, bool) or stamp < 10**12:
                return _invalid("timestamp: Unix epoch milliseconds", path)
            if not isinstance(message.get("content"), str):
                return _invalid("content", path)
        for index, message in enumerate(messages):
            track = "user" if message["role"] == "user" else "agent"
            sender = message["sender_id"]
            number = len(self.memories[(*scope, track, sender)]) + 1
            if track == "user":
                item = {
                    "id": f"{sender}_ep_20260301_{number:08d}",
                    "user_id": sender, "app_id": scope[0], "project_id": scope[1],
                    "session_id": session, "timestamp": "2026-03-01T09:15:00Z",
                    "sender_ids": [sender], "summary": message["content"],
                    "subject": f"message {index}", "episode": message["content"],
                    "type": "Conversation", "atomic_facts": [],
                }  # fmt: skip
            else:
                item = {
                    "id": f"{sender}_ac_20260301_{number:08d}",
                    "agent_id": sender, "app_id": scope[0], "project_id": scope[1],
                    "session_id": session, "task_intent": message["content"],
                    "approach": "", "quality_score": 0.5, "key_insight": None,
                    "timestamp": "2026-03-01T09:15:00Z",
                }  # fmt: skip
            self.memories[(*scope, track, sender)].append(item)
        data = {"message_count": len(messages), "status": "extracted"}
        return httpx.Response(200, json={"request_id": "b" * 32, "data": data})


def fake_for(base_url: str) -> FakeEveros:
    """The fake serving `base_url` (made on first use)."""
    if base_url not in FAKES:
        FAKES[base_url] = FakeEveros()
    return FAKES[base_url]


def make_backend(ctx: Any) -> everos.EverosBackend:
    """`backend = "everos_fake:make_backend"`: the real backend, on the fake of its base URL."""
    settings = everos.EverosSettings.read(ctx.config)
    return everos.make_backend(ctx, transport=fake_for(settings.base_url).transport)
