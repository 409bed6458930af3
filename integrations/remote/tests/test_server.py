"""The server SDK trusts only its caller, its own configuration and its manifest's schemas.

It validates strictly, refuses with the envelope and answers discovery honestly.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import mnemon_example_notes as notes
import pytest
import yaml
from mnemon_remote import create_app, serve
from remote_kit import AUTH, TOKEN

from mnemon import DefinitionError
from mnemon.sdk import define_memory_source

PLUGINS = Path(__file__).parent / "plugins"
MANIFEST = PLUGINS / "notes" / "mnemon-source.yaml"
FACTS = "/v0/contributions/source/facts"
MUTATE = "/v0/contributions/source/mutate"


def _client(
    notes_file: Path | None = None, *, definition: Any = notes.NOTES_SOURCE, **headers: str
) -> httpx.AsyncClient:
    configuration = {} if notes_file is None else {"path": str(notes_file)}
    app = create_app(definition, MANIFEST, token=TOKEN, configuration=configuration)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8400",
        headers={**AUTH, **headers},
    )


def _facts(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "invocation_id": "one",
        "instance_key": "source:notes",
        "provenance": {"entry_id": "notes", "package_name": "example.notes", "type_id": "notes"},
        "request": {
            "instance_key": "source:notes",
            "scope": {"user_id": "ada"},
            "scenario": "agent.turn",
        },
    }
    body.update(changes)
    return body


def _write(text: Any, **input_more: Any) -> dict[str, Any]:
    offer = {
        "id": "source:notes/add",
        "source_key": "source:notes",
        "action_id": "add",
        "description": "d",
        "capability": "write",
        "input_schema": {"type": "object"},  # what a caller claims; the manifest's rules
    }
    request = {
        "view": {"id": "view:1", "scope": {"user_id": "ada"}},
        "offer": offer,
        "grant": None,
        "input": {"text": text, **input_more},
        "idempotency_key": "k1",
    }
    return _facts(request=request)


async def test_discovery_names_the_exact_manifest_bytes() -> None:
    async with _client() as client:
        discovery = (await client.get("/v0/discovery")).json()
        health = await client.get("/v0/health")
    assert discovery == {
        "plugin_api": "0.2.0",
        "plugin": {"id": "example.notes", "version": "0.1.0"},
        "manifest_digest": "sha256:" + hashlib.sha256(MANIFEST.read_bytes()).hexdigest(),
        "contributions": ["source"],
    }
    assert (health.status_code, health.json()) == (200, {"status": "ok"})


async def test_a_valid_call_answers_the_sources_result(tmp_path: Path) -> None:
    async with _client(tmp_path / "n.md") as client:
        response = await client.post(FACTS, json=_facts())
    assert response.status_code == 200
    assert response.json()["availability"] == "ready"
    assert response.json()["type_id"] == "notes"


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Authorization": ""}, 401, "unauthorized"),
        ({"Authorization": "Bearer test-caller-secret-0123456788"}, 401, "unauthorized"),
        ({"Authorization": f"Basic {TOKEN}"}, 401, "unauthorized"),
        ({"Host": "attacker.example"}, 403, "forbidden_host"),
        ({"Host": "127.0.0.1.attacker.example:8400"}, 403, "forbidden_host"),
        ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
    ],
    ids=[
        "no-secret",
        "wrong-secret",
        "basic-scheme",
        "foreign-host",
        "rebinding-name",
        "text-plain",
        "form",
    ],
)
async def test_a_stranger_is_refused_before_the_source_runs(
    tmp_path: Path, headers: dict[str, str], status: int, code: str
) -> None:
    """Another local process, or a web page through the browser, cannot call the Source."""
    notes_file = tmp_path / "n.md"
    body = json.dumps(_write("planted by a stranger")).encode()
    async with _client(notes_file) as client:
        request_headers = {"Content-Type": "application/json", **headers}
        for path in (FACTS, MUTATE):
            response = await client.post(path, content=body, headers=request_headers)
            assert (response.status_code, response.json()["code"]) == (status, code)
            assert response.json()["retryable"] is False
            assert TOKEN not in response.text
        if status != 415:  # a GET carries no body, but must carry the secret and a loopback Host
            for path in ("/v0/discovery", "/v0/health"):
                response = await client.get(path, headers=headers)
                assert response.status_code == status
    assert not notes_file.exists()


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:9", "localhost:8400", "[::1]:8400", "LOCALHOST"]
)
async def test_loopback_hosts_are_answered(host: str) -> None:
    async with _client(Host=host) as client:
        assert (await client.get("/v0/health")).status_code == 200


async def test_a_call_cannot_change_the_configuration(tmp_path: Path) -> None:
    """The Source runs with what its launcher handed over; a body naming a file is refused."""
    configured, elsewhere = tmp_path / "n.md", tmp_path / "elsewhere.md"
    elsewhere.write_text("private", encoding="utf-8")
    async with _client(configured) as client:
        body = _write("appended")
        body["configuration"] = {"path": str(elsewhere)}
        refused = await client.post(MUTATE, json=body)
        del body["configuration"]
        written = await client.post(MUTATE, json=body)
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_request")
    assert written.status_code == 200
    assert elsewhere.read_text(encoding="utf-8") == "private"
    assert configured.read_text(encoding="utf-8") == "- appended\n"


@pytest.mark.parametrize(
    ("text", "more"),
    [("x" * 5_000, {}), ("fine", {"colour": "vermilion-77"}), ("", {}), (7, {})],
    ids=["past-max-length", "undeclared-property", "empty", "not-text"],
)
async def test_inputs_are_checked_against_the_manifests_schema(
    tmp_path: Path, text: Any, more: dict[str, Any]
) -> None:
    notes_file = tmp_path / "n.md"
    async with _client(notes_file) as client:
        response = await client.post(MUTATE, json=_write(text, **more))
    assert (response.status_code, response.json()["code"]) == (400, "invalid_input")
    assert response.json()["retryable"] is False
    assert "xxxx" not in response.text
    assert "vermilion-77" not in response.text
    assert not notes_file.exists()


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"unexpected": 1}, 400, "invalid_request"),
        (
            {
                "request": {
                    "instance_key": "source:notes",
                    "scope": {},
                    "scenario": "agent.turn",
                    "extra": 1,
                }
            },
            400,
            "invalid_request",
        ),
        ({"invocation_id": ""}, 400, "invalid_request"),
    ],
    ids=["unknown-field", "unknown-request-field", "empty-invocation-id"],
)
async def test_invalid_requests_are_refused_with_a_final_envelope(
    tmp_path: Path, change: dict[str, Any], status: int, code: str
) -> None:
    async with _client(tmp_path / "n.md") as client:
        response = await client.post(FACTS, json=_facts(**change))
    assert response.status_code == status
    assert response.json()["code"] == code
    assert response.json()["retryable"] is False
    assert str(tmp_path) not in response.text


@pytest.mark.parametrize(
    "body", [b"{nope", b'{"invocation_id": NaN}', b"[" * 5000 + b"]" * 5000], ids=str
)
async def test_a_body_that_is_not_strict_json_is_refused(body: bytes) -> None:
    async with _client(**{"Content-Type": "application/json"}) as client:
        response = await client.post(FACTS, content=body)
        unknown = await client.post("/v0/contributions/source/explode", content=b"{}")
    assert (response.status_code, response.json()["code"], response.json()["retryable"]) == (
        400,
        "invalid_request",
        False,
    )
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_call")


async def test_an_undeclared_route_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text("tea", encoding="utf-8")
    route = {
        "id": "source:notes/elsewhere",
        "source_key": "source:notes",
        "route_id": "elsewhere",
        "description": "d",
        "capability": "read",
        "input_schema": {"type": "object"},
        "max_calls": 1,
        "max_results": 1,
        "max_characters": 100,
    }
    request = {
        "view": {"id": "view:1", "scope": {"user_id": "ada"}},
        "route": route,
        "grant": {"source_key": "source:notes", "value": {"revision": "r", "text": "tea"}},
        "input": {},
    }
    async with _client(tmp_path / "n.md") as client:
        response = await client.post("/v0/contributions/source/query", json=_facts(request=request))
    assert (response.status_code, response.json()["code"]) == (404, "unknown_route")


class _Lying:
    """The notes Source, answering facts for another instance."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    async def facts(self, request: Any) -> Any:
        facts = await self._runtime.facts(request)
        return facts.model_copy(update={"instance_key": "source:someone-else"})


async def test_an_answer_breaking_the_contract_never_leaves_the_server(tmp_path: Path) -> None:
    lying = define_memory_source(
        notes.NOTES_SOURCE.manifest, lambda init: _Lying(notes.NOTES_SOURCE.create(init))
    )
    async with _client(tmp_path / "n.md", definition=lying) as client:
        response = await client.post(FACTS, json=_facts())
    assert (response.status_code, response.json()["code"]) == (500, "invalid_output")
    assert "someone-else" not in response.text


def test_serving_a_definition_that_disagrees_with_the_manifest_is_refused(tmp_path: Path) -> None:
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    manifest["source"]["routes"][0]["max_calls"] = 3
    (tmp_path / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    with pytest.raises(DefinitionError, match=r"source\.routes: differs"):
        create_app(notes.NOTES_SOURCE, tmp_path, token=TOKEN)
    other = define_memory_source(
        {**notes.NOTES_SOURCE.manifest.model_dump(), "role": "other"}, lambda init: None
    )
    with pytest.raises(DefinitionError, match=r"source\.role: differs"):
        create_app(other, MANIFEST, token=TOKEN)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"token": "short"}, "a caller secret of at least 16 characters"),
        ({"token": TOKEN, "configuration": {"path": 7}}, r"configuration\.path: does not match"),
        ({"token": TOKEN, "configuration": {"colour": "vermilion-77"}}, r"configuration\.\(root\)"),
    ],
    ids=["short-secret", "bad-configuration", "unknown-configuration-key"],
)
def test_a_server_refuses_to_start_unprotected_or_misconfigured(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(DefinitionError, match=message) as caught:
        create_app(notes.NOTES_SOURCE, MANIFEST, **options)
    assert "vermilion-77" not in str(caught.value)


def test_serve_without_a_caller_secret_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMON_PLUGIN_TOKEN", raising=False)
    with pytest.raises(DefinitionError, match="no caller secret; set MNEMON_PLUGIN_TOKEN"):
        serve(notes.NOTES_SOURCE, MANIFEST, port=0)


def test_a_launched_plugin_without_a_caller_secret_exits_with_the_reason(tmp_path: Path) -> None:
    environment = {
        "PATH": os.environ["PATH"],
        "MNEMON_PLUGIN_MANIFEST": str(MANIFEST),
        "MNEMON_PLUGIN_PORT": "0",
    }
    finished = subprocess.run(
        [sys.executable, str(PLUGINS / "notes" / "serve_notes.py")],
        env=environment,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode != 0
    assert b"MNEMON_PLUGIN_TOKEN" in finished.stderr


async def test_a_retried_write_gets_its_first_receipt(tmp_path: Path) -> None:
    body = _write("tea")
    async with _client(tmp_path / "n.md") as client:
        first = await client.post(MUTATE, json=body)
        second = await client.post(MUTATE, json=body)
    assert first.status_code == 200
    assert first.json() == second.json()
    assert (tmp_path / "n.md").read_text(encoding="utf-8") == "- tea\n"
    assert json.loads(first.content)["completion"] == "committed"
