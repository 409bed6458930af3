"""A remote plugin's answer costs only its own Source: broken, echoing or huge answers."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import mnemon_example_focus as focus
import mnemon_example_notes as notes
import pytest
from mnemon_remote import (
    InvalidAnswer,
    Redactor,
    RemoteSettings,
    create_app,
    decode_answer,
    define_remote_source,
)
from remote_kit import TOKEN

from mnemon import render_wake
from mnemon.sdk import PluginContext, define_memory_source, install_memory
from mnemon_testing import MemoryCompositionRunner

PLUGINS = Path(__file__).parent / "plugins"
MANIFEST = PLUGINS / "notes" / "mnemon-source.yaml"
SECRET = "s3cret-value-0042"
BOTH = {"source_keys": ["source:notes", "source:local"]}


class Over:
    """The remote Source `source:notes` over an ASGI app in this process."""

    def __init__(self, app: Any, **settings: Any) -> None:
        self.transport = httpx.ASGITransport(app=app)
        self.settings = settings

    def apply(self, ctx: PluginContext) -> None:
        config = {"manifest": str(MANIFEST), "endpoint": "http://127.0.0.1", **self.settings}
        source = define_remote_source(RemoteSettings(config, token=TOKEN), self.transport)
        install_memory(ctx, sources=[source])


def _rewriting(app: Any, suffix: str, rewrite: Any) -> Any:
    """`app`, with the answers of calls ending in `suffix` rewritten (request, answer) -> bytes."""

    async def wrapper(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(suffix):
            await app(scope, receive, send)
            return
        request = b""
        while True:
            message = await receive()
            request += message.get("body", b"")
            if not message.get("more_body"):
                break
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": request, "more_body": False}

        parts: dict[str, Any] = {"body": b""}

        async def keep(message: Any) -> None:
            if message["type"] == "http.response.start":
                parts["start"] = message
            else:
                parts["body"] += message.get("body", b"")

        await app(scope, replay, keep)
        body = rewrite(json.loads(request)["request"], json.loads(parts["body"]))
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapper


async def _view(runner: MemoryCompositionRunner) -> tuple[list[str], list[tuple[str, str]]]:
    """One turn: its fragments' texts, and (key, code) of its diagnostics."""
    turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
    try:
        fragments = [f"{f.source_key}: {f.text}" for f in turn.view.fragments]
        return fragments, [(d.key or "", d.code) for d in turn.view.diagnostics]
    finally:
        await turn.release()


def _with_nan_hint(request: Any, answer: Any) -> bytes:
    answer["hints"] = {"load": 0.5}
    return json.dumps(answer).replace("0.5", "NaN").encode()


def _for_another_instance(request: Any, answer: Any) -> bytes:
    return json.dumps({**answer, "instance_key": "source:someone-else"}).encode()


def _in_the_other_mode(request: Any, answer: Any) -> bytes:
    other = "eager" if request["mode"] == "routed" else "routed"
    fragment = {"source_key": request["instance_key"], "mode": other, "text": "x"}
    return json.dumps({**answer, "fragments": [fragment]}).encode()


@pytest.mark.parametrize(
    ("suffix", "rewrite", "code"),
    [
        ("/facts", _with_nan_hint, "source-facts-failed"),
        ("/facts", _for_another_instance, "source-facts-invalid"),
        ("/project", _in_the_other_mode, "source-project-invalid"),
    ],
    ids=["nan-in-hints", "another-instance", "another-mode"],
)
async def test_an_answer_breaking_the_contract_drops_only_its_source(
    tmp_path: Path, suffix: str, rewrite: Any, code: str
) -> None:
    local = tmp_path / "local.md"
    local.write_text("Kept in-process.", encoding="utf-8")
    (tmp_path / "remote.md").write_text("Served remotely.", encoding="utf-8")
    app = create_app(
        notes.NOTES_SOURCE,
        MANIFEST,
        token=TOKEN,
        configuration={"path": str(tmp_path / "remote.md")},
    )
    async with MemoryCompositionRunner() as runner:
        await runner.mount(Over(_rewriting(app, suffix, rewrite)), instance_id="notes")
        await runner.mount(notes, instance_id="local", config={"path": str(local)})
        await runner.mount(focus, instance_id="focus", config=BOTH)
        fragments, diagnostics = await _view(runner)
    assert fragments == ["source:local: Kept in-process."]
    assert ("source:notes", code) in diagnostics


class _Echoing:
    """The notes Source, repeating a secret it was given (and its caller secret) everywhere."""

    def __init__(self, runtime: Any) -> None:
        self._notes = runtime

    async def facts(self, request: Any) -> Any:
        facts = await self._notes.facts(request)
        return facts.model_copy(update={"hints": {"key": SECRET, SECRET: TOKEN}})

    async def project(self, request: Any) -> Any:
        contribution = await self._notes.project(request)
        fragments = [
            f.model_copy(update={"text": f"{f.text} {SECRET}"[: request.max_characters]})
            for f in contribution.fragments
        ]
        return contribution.model_copy(update={"fragments": tuple(fragments)})

    async def query(self, request: Any) -> Any:
        evidence = await self._notes.query(request)
        items = [i.model_copy(update={"text": f"{i.text} ({TOKEN})"}) for i in evidence.items]
        return evidence.model_copy(update={"items": tuple(items), "output": {"echo": SECRET}})


ECHOING = define_memory_source(
    notes.NOTES_SOURCE.manifest, lambda init: _Echoing(notes.NOTES_SOURCE.create(init))
)


async def test_the_secrets_a_plugin_was_given_never_leave_it(tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text("Ada prefers tea.", encoding="utf-8")
    app = create_app(ECHOING, MANIFEST, token=TOKEN, configuration={"path": str(tmp_path / "n.md")})
    plugin = Over(app, secrets={"NOTES_TOKEN": SECRET})
    async with MemoryCompositionRunner() as runner:
        await runner.mount(plugin, instance_id="notes")
        await runner.mount(focus, instance_id="focus", config={"source_keys": ["source:notes"]})
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        evidence = await turn.execute_route("source:notes/read", {})
        shown = [turn.view.model_dump_json(), render_wake(turn.view), evidence.model_dump_json()]
        await turn.release()
    for text in shown:
        assert SECRET not in text
        assert TOKEN not in text
    assert "Ada prefers tea. [redacted]" in shown[1]
    assert "[redacted]" in shown[2]


async def test_a_large_answer_is_decoded_off_the_event_loop() -> None:
    threads: list[threading.Thread] = []

    def build(value: Any) -> Any:
        threads.append(threading.current_thread())
        return value

    small = json.dumps({"text": "x"}).encode()
    large = json.dumps({"text": "x" * 200_000}).encode()
    assert await decode_answer(small, build) == {"text": "x"}
    assert await decode_answer(large, build) == {"text": "x" * 200_000}
    assert threads[0] is threading.current_thread()  # a small answer costs no thread hop
    assert threads[1] is not threading.current_thread()


async def test_the_event_loop_keeps_serving_while_a_large_answer_is_decoded() -> None:
    """Other turns go on: a tick scheduled during the decode runs before it ends."""
    release = threading.Event()
    order: list[str] = []

    def build(value: Any) -> Any:
        release.wait(10)  # held until the loop has shown it is free
        order.append("decoded")
        return value

    async def tick() -> None:
        await anyio.lowlevel.checkpoint()
        order.append("ticked")
        release.set()

    large = json.dumps({"text": "x" * 200_000}).encode()
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        await decode_answer(large, build)
    assert order == ["ticked", "decoded"]


@pytest.mark.parametrize(
    "raw",
    [b'{"a": NaN}', b'{"a": Infinity}', b"[" * 2000 + b"]" * 2000, b"not json", b'{"a": 1e999}'],
    ids=["nan", "infinity", "too-deep", "not-json", "overflow"],
)
async def test_an_answer_that_is_not_strict_json_is_invalid(raw: bytes) -> None:
    with pytest.raises(InvalidAnswer):
        await decode_answer(raw, lambda value: value)


async def test_an_answer_nested_near_the_parsers_limit_is_invalid_not_a_crash() -> None:
    """Scrubbing walks the answer: 1,000 levels (that orjson still reads) end as invalid."""
    raw = b'["\\n", ' + b"[" * 1000 + b"]" * 1000 + b"]"
    with pytest.raises(InvalidAnswer):
        await decode_answer(raw, lambda value: value, redactor=Redactor([SECRET]))
