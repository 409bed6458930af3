"""A to-do Source served over the remote protocol, whose tasks are records people manage.

Written against the public SDK and the server kit, as a plugin author writes one: each
user's tasks live in a JSON file of the configured `data_dir` (else a fresh temporary folder), and the `task` record kind is
readable, writable and deletable, so `mnemon list`, `export`, `import` and `forget` drive it
through the host. With `answer: outside-shape` in its configuration, an ASGI wrapper around
the kit's app rewrites every `records-read` answer into one that breaks the kind's schema (a
hostile or buggy plugin the host must survive).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn
from mnemon_remote import create_app

from mnemon import ManagementResult, RevisionConflict, SourceError
from mnemon.sdk import ManageRequest, SourceFacts, ViewContribution, define_memory_source

TASK = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string", "minLength": 1, "maxLength": 80},
        "done": {"type": "boolean"},
    },
    "required": ["title"],
    "additionalProperties": False,
}
MANIFEST: dict[str, Any] = {
    "type_id": "tasks",
    "package_name": "example.tasks",
    "role": "tasks",
    "capabilities": ["project"],
    "consistency": "exact-snapshot",
    "management": {
        "label": "Tasks",
        "description": "A user's tasks.",
        "records": [
            {
                "id": "task",
                "label": "Task",
                "record_schema": TASK,
                "readable": True,
                "writable": True,
                "deletable": True,
                "label_field": "title",
                "key_fields": ["title"],
            }
        ],
    },
}
# a secret the hostile answer carries in a record: it must never reach a message
LEAKED = "Ada's unlock code is 4711"


class Tasks:
    """One user's tasks per file; the idempotency keys of the writes kept beside them."""

    def __init__(self, key: str, folder: Path) -> None:
        self.key = key
        self.folder = folder

    def _path(self, user: str) -> Path:
        return self.folder / f"tasks-{hashlib.sha256(user.encode()).hexdigest()[:16]}.json"

    def _load(self, user: str | None) -> dict[str, Any]:
        if user is None:
            raise SourceError("missing-scope", "tasks need a user")
        path = self._path(user)
        if not path.exists():
            return {"tasks": [], "keys": {}, "next": 1}
        value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return value

    def _save(self, user: str, state: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._path(user).write_text(json.dumps(state), encoding="utf-8")

    async def facts(self, request: Any) -> SourceFacts:
        user = request.scope.user_id
        if user is None:
            return SourceFacts(
                instance_key=self.key, type_id="tasks", role="tasks",
                availability="unavailable", reason="missing-scope",
            )  # fmt: skip
        revision = _revision(self._load(user)["tasks"])
        return SourceFacts(
            instance_key=self.key, type_id="tasks", role="tasks", availability="ready",
            revision=revision, capabilities=("project",),
        )  # fmt: skip

    async def project(self, request: Any) -> ViewContribution:
        return ViewContribution(fragments=())

    async def manage(self, request: ManageRequest) -> ManagementResult:
        user = request.scope.user_id
        state = self._load(user)
        assert user is not None
        tasks: list[dict[str, Any]] = state["tasks"]
        value = request.input
        operation = request.operation.id
        if request.operation.kind == "mutate" and request.expected_revision != _revision(tasks):
            # re-checked here too: the host's check and this write are two calls apart
            raise RevisionConflict("the tasks changed since their revision was read")
        if operation == "records-read":
            start = int(value.get("cursor", "0"))
            end = start + int(value["limit"])
            output: dict[str, Any] = {
                "records": tasks[start:end],
                "next_cursor": str(end) if end < len(tasks) else None,
            }
        elif operation == "records-write":
            results = []
            for index, item in enumerate(value["records"]):
                key = item["idempotency_key"]
                if key in state["keys"]:
                    results.append(
                        {"index": index, "completion": "committed", "id": state["keys"][key],
                         "replayed": True}
                    )  # fmt: skip
                    continue
                task = {
                    "id": f"t-{state['next']}",
                    "title": item["record"]["title"],
                    "done": bool(item["record"].get("done", False)),
                }
                state["next"] += 1
                state["keys"][key] = task["id"]
                tasks.append(task)
                results.append({"index": index, "completion": "committed", "id": task["id"]})
            self._save(user, state)
            output = {"results": results}
        elif operation == "records-delete":
            kept = [task for task in tasks if task["id"] != value["id"]]
            state["tasks"] = kept
            self._save(user, state)
            output = {"id": value["id"], "deleted": len(kept) < len(tasks)}
        else:
            raise SourceError("invalid_payload", "no such operation")
        return ManagementResult(source_key=self.key, operation=operation, output=output)


def _revision(tasks: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(tasks).encode()).hexdigest()[:16]


def create(init: Any) -> Tasks:
    # the configured folder, else the one the server was given
    return Tasks(init.instance_key, Path(init.configuration.get("data_dir") or init.data_dir))


TASKS_SOURCE = define_memory_source(MANIFEST, create)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Message, Receive, Send], Awaitable[None]]


def outside_the_shape(app: App) -> App:
    """`app`, with every `records-read` answer replaced by one breaking the kind's schema."""

    async def wrapper(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/manage"):
            await app(scope, receive, send)
            return
        start: Message = {}
        body = b""

        async def keep(message: Message) -> None:
            nonlocal start, body
            if message["type"] == "http.response.start":
                start = message
            else:
                body += message.get("body", b"")

        await app(scope, receive, keep)
        value = json.loads(body)
        if start.get("status") == 200 and value.get("operation") == "records-read":
            # a title far over its 80 characters, and `done` of the wrong type
            value["output"] = {
                "records": [{"id": "t-1", "title": LEAKED * 10, "done": "yes"}],
                "next_cursor": None,
            }
            body = json.dumps(value).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapper


if __name__ == "__main__":
    configuration = json.loads(os.environ.get("MNEMON_PLUGIN_CONFIGURATION") or "{}")
    served: App = create_app(
        TASKS_SOURCE,
        os.environ["MNEMON_PLUGIN_MANIFEST"],
        token=os.environ["MNEMON_PLUGIN_TOKEN"],
        configuration=configuration,
        data_dir=tempfile.mkdtemp(prefix="tasks-plugin-"),
    )
    if configuration.get("answer") == "outside-shape":
        served = outside_the_shape(served)
    uvicorn.run(
        served,  # type: ignore[arg-type]
        host=os.environ["MNEMON_PLUGIN_HOST"],
        port=int(os.environ["MNEMON_PLUGIN_PORT"]),
        log_level="warning",
    )
    sys.exit(0)
