"""The client Source under failure: hung, killed and impostor plugins, errors and limits."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mnemon_example_focus as focus
import mnemon_example_notes as notes
import mnemon_remote
import pytest
import yaml
from mnemon_remote import RemoteSettings, create_app, define_remote_source
from remote_kit import TOKEN

from mnemon import ActionError, DefinitionError, RouteError, SourceError
from mnemon.sdk import PluginContext, define_memory_source, install_memory
from mnemon_testing import MemoryCompositionRunner

PLUGINS = Path(__file__).parent / "plugins"
FOCUS = {"source_keys": ["source:notes"]}


def _manifest(tmp_path: Path, **changes: Any) -> Path:
    manifest = yaml.safe_load(
        (PLUGINS / "notes" / "mnemon-source.yaml").read_text(encoding="utf-8")
    )
    manifest.update(changes)
    path = tmp_path / "mnemon-source.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


class Over:
    """The remote Source over an ASGI app in this process."""

    def __init__(self, app: Any) -> None:
        self.transport = httpx.ASGITransport(app=app)

    def apply(self, ctx: PluginContext) -> None:
        install_memory(
            ctx,
            sources=[
                define_remote_source(RemoteSettings(ctx.configuration, token=TOKEN), self.transport)
            ],
        )


def _hanging(app: Any, suffix: str) -> Any:
    async def wrapper(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith(suffix):
            await anyio.sleep_forever()
        await app(scope, receive, send)

    return wrapper


def _app(definition: Any, manifest: Path, notes_file: Path) -> Any:
    """The definition served in this process, its configuration set at start."""
    return create_app(definition, manifest, token=TOKEN, configuration={"path": str(notes_file)})


def _config(manifest: Path, **more: Any) -> dict[str, Any]:
    return {"manifest": str(manifest), "endpoint": "http://127.0.0.1", **more}


async def _diagnostics(runner: MemoryCompositionRunner) -> list[tuple[str | None, str]]:
    """(key, code) of each diagnostic; an unavailable Source's reason stands for its code."""
    turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
    try:
        return [
            (
                d.key,
                d.message.rsplit(" ", 1)[-1].strip("().")
                if d.code == "source-unavailable"
                else d.code,
            )
            for d in turn.view.diagnostics
        ]
    finally:
        await turn.release()


async def test_a_hung_plugin_is_cut_at_timeout_ms(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, timeout_ms=50)
    app = _hanging(_app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md"), "/facts")
    async with MemoryCompositionRunner(source_timeout=30) as runner:
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        assert ("source:notes", "plugin-timeout") in await _diagnostics(runner)


async def test_a_hung_plugin_is_cut_at_the_host_deadline(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, timeout_ms=300_000)
    app = _hanging(_app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md"), "/facts")
    async with MemoryCompositionRunner(source_timeout=0.05) as runner:
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        assert ("source:notes", "source-facts-timeout") in await _diagnostics(runner)


async def test_a_hung_route_read_raises_timeout(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, timeout_ms=50)
    app = _hanging(_app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md"), "/query")
    (tmp_path / "n.md").write_text("tea", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        with pytest.raises(RouteError) as caught:
            await turn.execute_route("source:notes/read", {})
        assert caught.value.code == "timeout"
        assert caught.value.retryable is True
        await turn.release()


async def test_an_impostor_is_unavailable_with_discovery_mismatch(tmp_path: Path) -> None:
    served = _manifest(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    declared = _manifest(other, version="0.2.0")  # the host holds a different manifest
    app = _app(notes.NOTES_SOURCE, served, tmp_path / "n.md")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(Over(app), instance_id="notes", config=_config(declared))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        assert ("source:notes", "discovery-mismatch") in await _diagnostics(runner)


async def test_an_answer_over_max_response_bytes_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, limits={"max_response_bytes": 1024})
    (tmp_path / "n.md").write_text("x" * 4000, encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        app = _app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md")
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        assert ("source:notes", "source-project-failed") in await _diagnostics(runner)


async def test_an_envelope_is_the_plugins_decision(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    async with MemoryCompositionRunner() as runner:
        app = _app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md")
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        # the notes Source refuses a write over its size limit: invalid_payload, nothing written
        await turn.execute_action("source:notes/replace", {"text": "x" * 199_999}, lambda o: True)
        with pytest.raises(ActionError) as caught:
            await turn.execute_action("source:notes/add", {"text": "y" * 10}, lambda o: True)
        assert caught.value.code == "invalid_payload"
        assert caught.value.retryable is False
        assert caught.value.receipt is not None
        assert caught.value.receipt.completion == "failed"
        await turn.release()


class _RateLimited:
    """The notes Source, whose reads and writes a provider's quota refuses for a while."""

    def __init__(self, notes_runtime: Any) -> None:
        self._notes = notes_runtime

    async def facts(self, request: Any) -> Any:
        return await self._notes.facts(request)

    async def project(self, request: Any) -> Any:
        return await self._notes.project(request)

    async def query(self, request: Any) -> Any:
        raise SourceError("rate_limited", "quota of tok-SECRET-55 used up", retry_after=7)

    async def mutate(self, request: Any) -> Any:
        raise SourceError("rate_limited", "quota of tok-SECRET-55 used up", retry_after=2.5)


RATE_LIMITED = define_memory_source(
    notes.NOTES_SOURCE.manifest, lambda init: _RateLimited(notes.NOTES_SOURCE.create(init))
)


async def test_a_retry_after_reaches_the_route_and_action_errors(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    (tmp_path / "n.md").write_text("tea", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        app = _app(RATE_LIMITED, manifest, tmp_path / "n.md")
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        with pytest.raises(RouteError) as read:
            await turn.execute_route("source:notes/read", {})
        with pytest.raises(ActionError) as write:
            await turn.execute_action("source:notes/add", {"text": "tea"}, lambda o: True)
        await turn.release()
    route_error, action_error = read.value, write.value
    assert (route_error.code, route_error.kind, route_error.retryable) == (
        "rate_limited",
        "transient",
        True,
    )
    assert (route_error.retry_after, route_error.origin_code) == (7.0, "rate_limited")
    assert (action_error.code, action_error.retry_after) == ("rate_limited", 2.5)
    receipt: Any = action_error.receipt
    assert receipt.completion == "unknown"  # a retryable refusal proves nothing was written
    assert dict(receipt.detail) == {
        "error_code": "rate_limited",
        "error_kind": "transient",
        "origin_code": "rate_limited",
        "retry_after": 2.5,
    }
    for text in (str(route_error), str(action_error), receipt.model_dump_json()):
        assert "tok-SECRET" not in text


@pytest.mark.parametrize(
    "body",
    [
        b'{"code": "rate_limited", "message": "m", "retryable": true, '
        b'"retry_after_seconds": Infinity}',
        b'{"code": "rate_limited", "message": "m", "retryable": true, "retry_after_seconds": NaN}',
        b'{"code": "rate_limited", "message": "m", "retryable": true, "retry_after_seconds": -1}',
    ],
    ids=["infinity", "nan", "negative"],
)
def test_a_retry_after_that_is_no_number_of_seconds_is_no_envelope(body: bytes) -> None:
    from jsonschema import Draft202012Validator
    from mnemon_remote._manifest import load_schema
    from mnemon_remote._wire import parse_envelope

    assert parse_envelope(body, Draft202012Validator(load_schema("error.schema.json"))) is None


def test_envelope_classes_map_onto_the_taxonomy() -> None:
    from mnemon_remote._wire import (
        Envelope,
        envelope_for,
        error_class_contradicts,
        source_error_from,
    )

    cases = [
        ({"retryable": True, "error_class": "transient"}, "transient", False),
        ({"retryable": False, "error_class": "access"}, "access", False),
        ({"retryable": False, "error_class": "source"}, "terminal", False),
        ({"retryable": False}, "terminal", False),
        ({"retryable": True, "error_class": "access"}, "transient", True),
        ({"retryable": False, "error_class": "transient"}, "terminal", True),
    ]
    for fields, kind, contradicts in cases:
        envelope = Envelope(code="rate_limited", message="m", **fields)
        error = source_error_from(envelope, write=True)
        assert (error.kind, error.code) == (kind, "rate_limited")
        assert error_class_contradicts(envelope) is contradicts
        assert error.nothing_written is (not envelope.retryable)
    for code in ("rate_limited", "unauthorized", "invalid_payload"):
        status, envelope = envelope_for(SourceError(code))
        back = source_error_from(envelope, write=False)
        assert back.kind == SourceError(code).kind
        assert back.retry_after is None
        assert not error_class_contradicts(envelope)
        assert status in (503, 403, 422)
    status, envelope = envelope_for(SourceError("rate_limited", retry_after=7))
    assert (status, envelope.retry_after_seconds) == (503, 7.0)
    assert source_error_from(envelope, write=False).retry_after == 7.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "manifest: a manifest path is required"),
        ({"endpoint": "http://x", "launch": True}, "either endpoint or launch"),
        ({"endpoint": "file:///x"}, "endpoint: must be an http(s) URL"),
        ({"endpoint": "http://x", "colour": 1}, "remote configuration.colour: unknown key"),
        ({"launch": "yes"}, "remote configuration.launch: must be true or false"),
        ({"launch": True, "startup_timeout": True}, "startup_timeout: 0 to 300 seconds"),
        (
            {"launch": True, "configuration": {"path": 3}},
            "configuration.path: does not match",
        ),
        (
            {"endpoint": "http://x", "configuration": {"path": "/etc/passwd"}},
            "a running plugin has the configuration it was started with",
        ),
        ({"endpoint": "http://x", "token_env": "NO_SUCH_TOKEN"}, "NO_SUCH_TOKEN holds no caller"),
        ({"launch": True, "token_env": "X"}, "a launched plugin gets a fresh caller secret"),
        ({"endpoint": "http://x", "max_response_bytes": 10}, "max_response_bytes: 1 KiB to"),
        ({"endpoint": "http://x", "secrets": {"OTHER": "value-12345"}}, "'OTHER' is not declared"),
    ],
    ids=[
        "no-manifest",
        "both",
        "bad-endpoint",
        "unknown-key",
        "launch-not-bool",
        "timeout-not-a-number",
        "bad-configuration",
        "configuration-of-a-running-plugin",
        "no-caller-secret",
        "caller-secret-of-a-launch",
        "tiny-response-cap",
        "undeclared-secret",
    ],
)
def test_bad_configuration_names_the_key(
    config: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_PLUGIN_TOKEN", TOKEN)
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    if config:
        config = {"manifest": str(PLUGINS / "notes" / "mnemon-source.yaml"), **config}
    with pytest.raises(DefinitionError) as caught:
        RemoteSettings(config)
    assert message in str(caught.value)
    for value in ("value-12345", "/etc/passwd", TOKEN):
        assert value not in str(caught.value)


def test_the_host_caps_answers_below_what_the_plugin_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MNEMON_PLUGIN_TOKEN", TOKEN)
    manifest = str(PLUGINS / "notes" / "mnemon-source.yaml")  # declares 1 MiB
    base = {"manifest": manifest, "endpoint": "http://x"}
    assert RemoteSettings(base).max_response_bytes == 1_048_576
    assert RemoteSettings({**base, "max_response_bytes": 4096}).max_response_bytes == 4096
    assert RemoteSettings({**base, "max_response_bytes": 8 << 20}).max_response_bytes == 1_048_576


def _launched_with_pid_file(tmp_path: Path, pid_file: Path) -> Path:
    """A manifest whose run.command has the notes plugin write its process id to `pid_file`."""
    manifest = yaml.safe_load(
        (PLUGINS / "notes" / "mnemon-source.yaml").read_text(encoding="utf-8")
    )
    manifest["run"]["command"] = [
        sys.executable,
        str(PLUGINS / "notes" / "serve_notes.py"),
        str(pid_file),
    ]
    path = tmp_path / "mnemon-source.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    """The notes plugin started by hand, as an operator would: its secret and configuration."""
    environment = {
        **os.environ,
        "MNEMON_PLUGIN_HOST": "127.0.0.1",
        "MNEMON_PLUGIN_PORT": str(port),
        "MNEMON_PLUGIN_MANIFEST": str(PLUGINS / "notes" / "mnemon-source.yaml"),
        "MNEMON_PLUGIN_TOKEN": TOKEN,
        "MNEMON_PLUGIN_CONFIGURATION": json.dumps({"data_dir": str(data_dir)}),
    }
    return subprocess.Popen(
        [sys.executable, str(PLUGINS / "notes" / "serve_notes.py")],
        env=environment,
        start_new_session=True,
    )


async def _until_up(port: int) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(500):
            try:
                await client.get(f"http://127.0.0.1:{port}/v0/health")
                return
            except httpx.HTTPError:
                await anyio.sleep(0.02)
    raise AssertionError("the plugin did not start")


async def test_a_killed_plugin_is_unavailable_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMON_PLUGIN_TOKEN", TOKEN)  # the value the plugin was started with
    port = _free_port()
    process = _start(port, tmp_path)
    try:
        await _until_up(port)
        config = {
            "manifest": str(PLUGINS / "notes" / "mnemon-source.yaml"),
            "endpoint": f"http://127.0.0.1:{port}",
        }
        async with MemoryCompositionRunner() as runner:
            await runner.mount(mnemon_remote, instance_id="notes", config=config)
            await runner.mount(focus, instance_id="focus", config=FOCUS)
            assert await _diagnostics(runner) == []
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            assert ("source:notes", "plugin-unavailable") in await _diagnostics(runner)
            process = _start(port, tmp_path)
            await _until_up(port)
            assert await _diagnostics(runner) == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def test_a_launched_plugin_that_died_is_launched_again(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    config = {
        "manifest": str(_launched_with_pid_file(tmp_path, pid_file)),
        "launch": True,
        "configuration": {"data_dir": str(tmp_path / "data")},
    }
    async with MemoryCompositionRunner() as runner:
        await runner.mount(mnemon_remote, instance_id="notes", config=config)
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        await turn.execute_action("source:notes/add", {"text": "kept on disk"}, lambda o: True)
        await turn.release()
        first = int(pid_file.read_text(encoding="utf-8"))
        os.kill(first, signal.SIGKILL)
        # a turn that comes while the plugin restarts may still find it down (on a busy
        # machine the new process can take seconds to listen); later turns must find it back
        fragments: list[str] = []
        for _ in range(40):
            turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
            fragments = [f.text for f in turn.view.fragments]
            await turn.release()
            if fragments:
                break
            await anyio.sleep(0.25)
        assert fragments == ["- kept on disk\n"]
        assert int(pid_file.read_text(encoding="utf-8")) != first
    # unmounting stopped the second process
    second = int(pid_file.read_text(encoding="utf-8"))
    with pytest.raises(ProcessLookupError):
        os.kill(second, 0)


async def test_a_write_cut_by_the_deadline_is_unknown_not_failed(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, timeout_ms=50)
    app = _hanging(_app(notes.NOTES_SOURCE, manifest, tmp_path / "n.md"), "/mutate")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(Over(app), instance_id="notes", config=_config(manifest))
        await runner.mount(focus, instance_id="focus", config=FOCUS)
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        with pytest.raises(ActionError) as caught:
            await turn.execute_action("source:notes/add", {"text": "tea"}, lambda o: True)
        assert caught.value.code == "timeout"
        assert caught.value.receipt is not None
        assert caught.value.receipt.completion == "unknown"
        await turn.release()
