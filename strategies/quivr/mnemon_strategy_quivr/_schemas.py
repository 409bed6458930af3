"""Quivr's JSON Schemas, loaded once, with the parts the vendored files lack or exceed.

The manifest schema shipped here is Quivr's Plugin API 0.6 version: it predates the
`retrieval` Contribution, profile names and `requires`, which the retrieval request schema
refers to, a vector space's `input_price`, the ingestion `paging` switch, subscription
`vectors` (0.10, reserved before) and a connector kind's `api` routes (0.11). Quivr's
normative fixtures (index.json) are newer; the definitions added below follow them. The
segment_and_embed response schema is newer than what mnemon speaks (Plugin API 0.14 at most):
its Plugin API 0.17 and 0.18 fields are taken out. The embed_query schemas were not found
upstream; they are written here from the protocol's text and its normative requests.
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
    "EMBED_QUERY_REQUEST",
    "EMBED_QUERY_RESPONSE",
    "discovery_validator",
    "error_validator",
    "fixture_validator",
    "health_validator",
    "ingestion_fixture_validator",
    "manifest_validator",
    "query_request_validator",
    "query_response_validator",
    "request_validator",
    "response_validator",
    "schema",
    "segment_request_validator",
    "segment_response_validator",
]

_FILES = (
    "plugin-manifest.schema.json",
    "retrieval-search-request.schema.json",
    "retrieval-search-response.schema.json",
    "error.schema.json",
    "discovery.schema.json",
    "health.schema.json",
    "retrieval-fixture.schema.json",
    "ingestion-segment-and-embed-request.schema.json",
    "ingestion-segment-and-embed-response.schema.json",
    "ingestion-fixture.schema.json",
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
# a vector space's price (Plugin API 0.9, index.json) and bounded full-text pages (0.18)
INPUT_PRICE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["usd_per_million_tokens"],
    "properties": {"usd_per_million_tokens": {"type": "number", "minimum": 0}},
}
PAGING = {"type": "boolean"}
# subscription vectors (Plugin API 0.10, the protocol's manifest table): what the core sends,
# and the expression's query text, a JSON Pointer that `query: true` needs
VECTORS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "parts": {"type": "boolean"},
        "query": {"type": "boolean"},
        "query_text_pointer": {"type": "string", "pattern": "^(/([^~/]|~[01])*)+$"},
        "query_expression_schema": {"type": ["object", "boolean"]},
    },
    "if": {"required": ["query"], "properties": {"query": {"const": True}}},
    "then": {"required": ["query_text_pointer"]},
}
# a connector kind's API routes (Plugin API 0.11): judged whole by their own rules, so that
# every problem in them is `invalid_connector_api` (index.json), never `schema_violation`
CONNECTOR_API = {"type": "object"}
#: `POST /v0/contributions/ingestion/embed_query`: the envelope, the space and a text query
EMBED_QUERY_REQUEST = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ingestion embed_query request, v0 (mnemon's, from the protocol's text)",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "invocation_id",
        "contribution",
        "organization_id",
        "configuration",
        "space",
        "query",
    ],
    "properties": {
        "invocation_id": {"type": "string", "minLength": 1, "maxLength": 128},
        "contribution": {"const": "ingestion"},
        "organization_id": {"type": "string", "minLength": 1},
        "configuration": {"type": "object"},
        "space": {"$ref": "plugin-manifest.schema.json#/$defs/SpaceId"},
        "query": {
            "type": "object",
            "additionalProperties": False,
            "required": ["modality", "text"],
            "properties": {
                "modality": {"const": "text"},
                "text": {"type": "string", "minLength": 1},
            },
        },
    },
}
#: the 200 answer of embed_query: one vector, nothing else
EMBED_QUERY_RESPONSE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ingestion embed_query response, v0 (mnemon's, from the protocol's text)",
    "type": "object",
    "additionalProperties": False,
    "required": ["vector"],
    "properties": {
        "vector": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4096,
            "items": {"type": "number"},
        }
    },
}
# what a segment_and_embed answer may carry only under Plugin API 0.17 and 0.18
NEWER_SEGMENT_FIELDS = ("source_ranges", "source_separator")
NEWER_ANSWER_FIELDS = ("next_start",)


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
    manifest["$defs"]["VectorSpace"]["properties"]["input_price"] = INPUT_PRICE
    manifest["$defs"]["Ingestion"]["properties"]["paging"] = PAGING
    manifest["$defs"]["Subscription"]["properties"]["vectors"] = VECTORS
    manifest["$defs"]["ConnectorKind"]["properties"]["api"] = CONNECTOR_API
    schemas["plugin-manifest.schema.json"] = manifest
    answer = copy.deepcopy(schemas["ingestion-segment-and-embed-response.schema.json"])
    for name in NEWER_ANSWER_FIELDS:
        del answer["properties"][name]
    for name in NEWER_SEGMENT_FIELDS:
        del answer["properties"]["segments"]["items"]["properties"][name]
    schemas["ingestion-segment-and-embed-response.schema.json"] = answer
    schemas["ingestion-embed-query-request.schema.json"] = copy.deepcopy(EMBED_QUERY_REQUEST)
    schemas["ingestion-embed-query-response.schema.json"] = copy.deepcopy(EMBED_QUERY_RESPONSE)
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


def segment_request_validator() -> Draft202012Validator:
    """The validator of one `segment_and_embed` request."""
    return _validator("ingestion-segment-and-embed-request.schema.json")


def segment_response_validator() -> Draft202012Validator:
    """The validator of one `segment_and_embed` answer (without Plugin API 0.17+ fields)."""
    return _validator("ingestion-segment-and-embed-response.schema.json")


def query_request_validator() -> Draft202012Validator:
    """The validator of one `embed_query` request (mnemon's schema, from the protocol)."""
    return _validator("ingestion-embed-query-request.schema.json")


def query_response_validator() -> Draft202012Validator:
    """The validator of one `embed_query` answer (mnemon's schema, from the protocol)."""
    return _validator("ingestion-embed-query-response.schema.json")


def ingestion_fixture_validator() -> Draft202012Validator:
    """The validator of an ingestion fixture (Parts, queries and what to expect)."""
    return _validator("ingestion-fixture.schema.json")
