"""The server SDK validates strictly, refuses with the envelope and answers discovery honestly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import mnemon_example_notes as notes
import pytest
import yaml
from mnemon_remote import create_app

from mnemon import DefinitionError, define_memory_source

PLUGINS = Path(__file__).parent / "plugins"
MANIFEST = PLUGINS / "notes" / "mnemon-source.yaml"


def _client() -> httpx.AsyncClient:
    app = create_app(notes.NOTES_SOURCE, MANIFEST)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plugin")


def _facts(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "invocation_id": "one",
        "instance_key": "source:notes",
        "provenance": {"entry_id": "notes", "package_name": "example.notes", "type_id": "notes"},
        "configuration": {"path": str(tmp_path / "n.md")},
        "request": {
            "instance_key": "source:notes",
            "scope": {"user_id": "ada"},
            "scenario": "agent.turn",
        },
    }
    body.update(changes)
    return body


async def test_discovery_names_the_exact_manifest_bytes() -> None:
    async with _client() as client:
        discovery = (await client.get("/v0/discovery")).json()
        health = await client.get("/v0/health")
    assert discovery == {
        "plugin_api": "0.1.0",
        "plugin": {"id": "example.notes", "version": "0.1.0"},
        "manifest_digest": "sha256:" + hashlib.sha256(MANIFEST.read_bytes()).hexdigest(),
        "contributions": ["source"],
    }
    assert (health.status_code, health.json()) == (200, {"status": "ok"})


async def test_a_valid_call_answers_the_sources_result(tmp_path: Path) -> None:
    async with _client() as client:
        response = await client.post("/v0/contributions/source/facts", json=_facts(tmp_path))
    assert response.status_code == 200
    assert response.json()["availability"] == "ready"
    assert response.json()["type_id"] == "notes"


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
        ({"configuration": {"path": 7}}, 400, "invalid_configuration"),
        ({"configuration": {"colour": "red"}}, 400, "invalid_configuration"),
    ],
    ids=[
        "unknown-field",
        "unknown-request-field",
        "empty-invocation-id",
        "bad-configuration",
        "unknown-configuration-key",
    ],
)
async def test_invalid_requests_are_refused_with_a_final_envelope(
    tmp_path: Path, change: dict[str, Any], status: int, code: str
) -> None:
    async with _client() as client:
        response = await client.post(
            "/v0/contributions/source/facts", json=_facts(tmp_path, **change)
        )
    assert response.status_code == status
    assert response.json()["code"] == code
    assert response.json()["retryable"] is False
    assert str(tmp_path) not in response.text


async def test_a_body_that_is_not_json_is_refused() -> None:
    async with _client() as client:
        response = await client.post("/v0/contributions/source/facts", content=b"{nope")
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
    async with _client() as client:
        response = await client.post(
            "/v0/contributions/source/query", json=_facts(tmp_path, request=request)
        )
    assert (response.status_code, response.json()["code"]) == (404, "unknown_route")


def test_serving_a_definition_that_disagrees_with_the_manifest_is_refused(tmp_path: Path) -> None:
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    manifest["source"]["routes"][0]["max_calls"] = 3
    (tmp_path / "mnemon-source.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    with pytest.raises(DefinitionError, match=r"source\.routes: differs"):
        create_app(notes.NOTES_SOURCE, tmp_path)
    other = define_memory_source(
        {**notes.NOTES_SOURCE.manifest.model_dump(), "role": "other"}, lambda init: None
    )
    with pytest.raises(DefinitionError, match=r"source\.role: differs"):
        create_app(other, MANIFEST)


async def test_a_retried_write_gets_its_first_receipt(tmp_path: Path) -> None:
    offer = {
        "id": "source:notes/add",
        "source_key": "source:notes",
        "action_id": "add",
        "description": "d",
        "capability": "write",
        "input_schema": {"type": "object"},
    }
    request = {
        "view": {"id": "view:1", "scope": {"user_id": "ada"}},
        "offer": offer,
        "grant": None,
        "input": {"text": "tea"},
        "idempotency_key": "k1",
    }
    body = _facts(tmp_path, request=request)
    async with _client() as client:
        first = await client.post("/v0/contributions/source/mutate", json=body)
        second = await client.post("/v0/contributions/source/mutate", json=body)
    assert first.status_code == 200
    assert first.json() == second.json()
    assert (tmp_path / "n.md").read_text(encoding="utf-8") == "- tea\n"
    assert json.loads(first.content)["completion"] == "committed"
