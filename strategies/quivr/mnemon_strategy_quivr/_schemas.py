"""Quivr's JSON Schemas, loaded once, with the retrieval parts the vendored manifest lacks.

The manifest schema shipped here is Quivr's Plugin API 0.6 version: it predates the
`retrieval` Contribution, profile names and `requires`, which the retrieval request schema
refers to. Quivr's normative fixtures (index.json) are newer; the definitions added below
follow them.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "discovery_validator",
    "error_validator",
    "fixture_validator",
    "health_validator",
    "manifest_validator",
    "request_validator",
    "response_validator",
    "schema",
]

_FILES = (
    "plugin-manifest.schema.json",
    "retrieval-search-request.schema.json",
    "retrieval-search-response.schema.json",
    "error.schema.json",
    "discovery.schema.json",
    "health.schema.json",
    "retrieval-fixture.schema.json",
)
# every Contribution a discovery document may list (the vendored schema knows only normalizer)
DISCOVERED = ["normalizer", "subscription", "connector", "ingestion", "retrieval"]
PROFILE_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,63}$", "maxLength": 64}
RETRIEVAL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["profiles"],
    "properties": {
        "profiles": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 16,
            # every retrieval plugin serves the default profile (index.json)
            "required": ["default"],
            "propertyNames": {"$ref": "#/$defs/ProfileName"},
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["max_latency_ms", "max_cost_cents"],
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "max_latency_ms": {"type": "integer", "minimum": 1, "maximum": 60000},
                    "max_cost_cents": {"type": "number", "minimum": 0},
                },
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "max_rounds": {"type": "integer", "minimum": 1, "maximum": 3},
                "max_requests": {"type": "integer", "minimum": 1, "maximum": 8},
                "max_candidates": {"type": "integer", "minimum": 1, "maximum": 100},
                "max_response_bytes": {"type": "integer", "minimum": 1024, "maximum": 16777216},
            },
        },
    },
}
REQUIRES = {
    "type": "array",
    "maxItems": 16,
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["plugin", "version", "profiles"],
        "properties": {
            "plugin": {"$ref": "#/$defs/PluginId"},
            "version": {"$ref": "#/$defs/Range"},
            "profiles": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {"$ref": "#/$defs/ProfileName"},
            },
        },
    },
}


@cache
def _loaded() -> dict[str, Any]:
    folder = resources.files(__package__) / "schemas"
    schemas = {name: json.loads((folder / name).read_text("utf-8")) for name in _FILES}
    manifest = copy.deepcopy(schemas["plugin-manifest.schema.json"])
    manifest["$defs"]["ProfileName"] = PROFILE_NAME
    manifest["$defs"]["Retrieval"] = RETRIEVAL
    manifest["properties"]["contributions"]["properties"]["retrieval"] = {
        "$ref": "#/$defs/Retrieval"
    }
    manifest["properties"]["requires"] = REQUIRES
    schemas["plugin-manifest.schema.json"] = manifest
    # the vendored envelope predates error_class; the protocol's later fields are accepted
    envelope = copy.deepcopy(schemas["error.schema.json"])
    envelope["properties"]["error_class"] = {"enum": ["access", "transient", "source"]}
    envelope["properties"]["retry_after_seconds"] = {"type": "number", "minimum": 0}
    envelope["dependentRequired"] = {"retry_after_seconds": ["error_class"]}
    schemas["error.schema.json"] = envelope
    discovery = copy.deepcopy(schemas["discovery.schema.json"])
    discovery["properties"]["contributions"]["items"]["enum"] = DISCOVERED
    schemas["discovery.schema.json"] = discovery
    return schemas


def schema(name: str) -> Any:
    """A deep copy of one schema by file name (the manifest one with retrieval added)."""
    return copy.deepcopy(_loaded()[name])


@cache
def _registry() -> Registry[Any]:
    # the schemas have no $id and refer to each other by file name
    return Registry().with_resources(
        (name, Resource.from_contents(body, default_specification=DRAFT202012))
        for name, body in _loaded().items()
    )


@cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(_loaded()[name], registry=_registry())


def error_validator() -> Draft202012Validator:
    """The validator of the error envelope of every non-2xx plugin answer."""
    return _validator("error.schema.json")


def manifest_validator() -> Draft202012Validator:
    """The validator of `quivr-plugin.yaml` (as its JSON value)."""
    return _validator("plugin-manifest.schema.json")


def request_validator() -> Draft202012Validator:
    """The validator of one retrieval search request (one round)."""
    return _validator("retrieval-search-request.schema.json")


def response_validator() -> Draft202012Validator:
    """The validator of one retrieval search answer."""
    return _validator("retrieval-search-response.schema.json")


def discovery_validator() -> Draft202012Validator:
    """The validator of `GET /v0/discovery` (any Contribution mnemon knows may be listed)."""
    return _validator("discovery.schema.json")


def health_validator() -> Draft202012Validator:
    """The validator of a healthy `GET /v0/health` answer."""
    return _validator("health.schema.json")


def fixture_validator() -> Draft202012Validator:
    """The validator of a retrieval fixture (a query and a catalogue of candidates)."""
    return _validator("retrieval-fixture.schema.json")
