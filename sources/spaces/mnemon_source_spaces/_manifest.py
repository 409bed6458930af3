"""The `spaces` Source manifest: routes, actions and the management plane, with their limits."""

from __future__ import annotations

from typing import Any

from ._wire import RELATION_PATTERN, SPACE_PATTERN

__all__ = [
    "MANIFEST",
    "MAX_ENTITIES",
    "MAX_ENTITY_CHARACTERS",
    "MAX_IMPORT_ITEMS",
    "MAX_TAGS",
    "MAX_TAG_CHARACTERS",
    "MAX_TEXT_CHARACTERS",
    "PACKAGE",
    "RECALL_MODES",
    "TYPE_ID",
]

PACKAGE = "mnemon-source-spaces"
TYPE_ID = "spaces"
ROLE = "durable-evidence"
MAX_TEXT_CHARACTERS = 8_000
MAX_TAGS = 16
MAX_TAG_CHARACTERS = 64
MAX_ENTITIES = 16
MAX_ENTITY_CHARACTERS = 128
MAX_QUERY_CHARACTERS = 1_000
MAX_HANDLE_CHARACTERS = 300
#: the most memories one recall or related read returns: its `limit` input's maximum too
MAX_RECALL_LIMIT = 20
MAX_IMPORT_ITEMS = 1_000
#: the most entities one `entities` read returns
MAX_ENTITY_PAGE = 100
#: what `recall` searches (its `mode` input): the convention a recall route by meaning follows
RECALL_MODES = ("words", "meaning", "both")

_SPACE_NAME = {"type": "string", "pattern": SPACE_PATTERN}
_HANDLE = {"type": "string", "minLength": 1, "maxLength": MAX_HANDLE_CHARACTERS}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_LIMIT}
_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARACTERS}
_TAGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARACTERS},
    "maxItems": MAX_TAGS,
}
_ENTITIES = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_ENTITY_CHARACTERS},
    "maxItems": MAX_ENTITIES,
}
_IDEMPOTENCY = {"type": "string", "minLength": 1, "maxLength": 200}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": ROLE,
    "capabilities": ["status", "project", "recall", "related", "write", "link", "forget"],
    "consistency": "namespace-pinned-live-read",
    # the default `scope_keys`; an instance configured otherwise reports its own
    "partition_keys": ["user_id"],
    "routes": [
        {
            "id": "inspect",
            "description": (
                "The directory of long-term memory spaces (name, description, writable, how "
                "many memories) and the store's health, as JSON."
            ),
            "capability": "status",
            "input_schema": _object({}),
            "max_calls": 2,
            "max_results": 1,
            "max_characters": 8_000,
        },
        {
            "id": "recall",
            "description": (
                "Search long-term memory by query, best first. It matches the query's words, "
                "and its meaning when inspect lists meaning under recall (mode asks for one "
                "alone). Each result has a relevance tier (strong, related, weak), its "
                "space, tags and an id usable with related, link, forget."
            ),
            "capability": "recall",
            "input_schema": _object(
                {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARACTERS,
                    },
                    "limit": _LIMIT,
                    "spaces": {
                        "type": "array",
                        "items": _SPACE_NAME,
                        "minItems": 1,
                        "maxItems": 32,
                        "uniqueItems": True,
                    },
                    "mode": {
                        "type": "string",
                        "enum": list(RECALL_MODES),
                        "default": "both",
                        "description": (
                            "words: keywords only; meaning: by meaning only; both: fused"
                        ),
                    },
                    "meaning_weight": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 1,
                        "description": "With mode both: the share of meaning in the order",
                    },
                },
                ("query",),
            ),
            "max_calls": 4,
            "max_results": MAX_RECALL_LIMIT,
            "max_characters": 12_000,
        },
        {
            "id": "related",
            "description": "Memories linked to one memory, by an id that recall returned.",
            "capability": "related",
            "input_schema": _object({"id": _HANDLE, "limit": _LIMIT}, ("id",)),
            "max_calls": 4,
            "max_results": MAX_RECALL_LIMIT,
            "max_characters": 12_000,
        },
    ],
    "actions": [
        {
            "id": "remember",
            "description": (
                "Keep one durable memory (a self-contained statement) in a writable space, with "
                "optional tags and entities; a repeated idempotency key stores nothing new."
            ),
            "capability": "write",
            "input_schema": _object(
                {
                    "text": _TEXT,
                    "space": _SPACE_NAME,
                    "tags": _TAGS,
                    "entities": _ENTITIES,
                    "idempotency_key": _IDEMPOTENCY,
                },
                ("text",),
            ),
        },
        {
            "id": "link",
            "description": "Link two memories of one writable space, by ids recall returned.",
            "capability": "link",
            "input_schema": _object(
                {
                    "from": _HANDLE,
                    "to": _HANDLE,
                    "relation": {"type": "string", "pattern": RELATION_PATTERN},
                },
                ("from", "to"),
            ),
        },
        {
            "id": "forget",
            "description": "Delete one memory of a writable space, by an id recall returned.",
            "capability": "forget",
            "input_schema": _object({"id": _HANDLE}, ("id",)),
        },
    ],
    "management": {
        "label": "Long-term memory spaces",
        "description": (
            "Inspect the spaces, page through a space's memories, and add or delete memories "
            "(people may write to every configured space, read-only ones included)."
        ),
        "operations": [
            {
                "id": "inspect",
                "kind": "read",
                "description": "The directory of spaces and the store's health.",
                "input_schema": _object({}),
            },
            {
                "id": "list",
                "kind": "read",
                "description": "One page of a space's memories, newest first.",
                "input_schema": _object(
                    {
                        "space": _SPACE_NAME,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                        "cursor": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                    ("space",),
                ),
            },
            {
                "id": "recall",
                "kind": "read",
                "description": (
                    "Search the memories by query, best first, by their words and (when "
                    "inspect lists meaning under recall) their meaning; each result says why "
                    "it ranked (explain: its keyword and meaning ranks)."
                ),
                "input_schema": _object(
                    {
                        "query": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_QUERY_CHARACTERS,
                        },
                        "mode": {
                            "type": "string",
                            "enum": list(RECALL_MODES),
                            "default": "both",
                            "description": "words: keywords only; meaning: by meaning only; both",
                        },
                        "spaces": {
                            "type": "array",
                            "items": _SPACE_NAME,
                            "minItems": 1,
                            "maxItems": 32,
                            "uniqueItems": True,
                        },
                        "limit": _LIMIT,
                    },
                    ("query",),
                ),
            },
            {
                "id": "related",
                "kind": "read",
                "description": "The memories linked to one memory of a space, with each link.",
                "input_schema": _object(
                    {"space": _SPACE_NAME, "id": _HANDLE, "limit": _LIMIT}, ("space", "id")
                ),
            },
            {
                "id": "entities",
                "kind": "read",
                "description": (
                    "The entities a space's memories name, most mentioned first; complete is "
                    "false when the count stands on part of the space only."
                ),
                "input_schema": _object(
                    {
                        "space": _SPACE_NAME,
                        "prefix": {"type": "string", "maxLength": MAX_ENTITY_CHARACTERS},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_ENTITY_PAGE},
                    },
                    ("space",),
                ),
            },
            {
                "id": "remember",
                "kind": "mutate",
                "description": "Add one memory to a space.",
                "input_schema": _object(
                    {
                        "text": _TEXT,
                        "space": _SPACE_NAME,
                        "tags": _TAGS,
                        "entities": _ENTITIES,
                    },
                    ("text", "space"),
                ),
            },
            {
                "id": "import",
                "kind": "mutate",
                "description": (
                    "Add many memories to a space in one durable transaction, with one result "
                    "per memory; a repeated idempotency key stores nothing new, and an invalid "
                    "or oversized memory is refused alone with its code."
                ),
                "input_schema": _object(
                    {
                        "space": _SPACE_NAME,
                        # each memory is checked by the Source, so one bad item is refused
                        # alone (and the schema does not walk a thousand items)
                        "memories": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_IMPORT_ITEMS,
                        },
                    },
                    ("space", "memories"),
                ),
            },
            {
                "id": "reindex",
                "kind": "mutate",
                "description": (
                    "Give this scope's memories the vectors recall by meaning needs and they "
                    "still lack, as many as fit one call; call it again until remaining is 0."
                ),
                "input_schema": _object({}),
            },
            {
                "id": "maintenance-plan",
                "kind": "read",
                "description": (
                    "Each space with limits: how many memories it holds, and which are past "
                    "its limits (most memories, oldest age) with what happens to each."
                ),
                "input_schema": _object({}),
            },
            {
                "id": "maintenance-apply",
                "kind": "mutate",
                "description": (
                    "Apply the spaces' limits (archive or forget what is past them), if the "
                    "plan is still the one the digest names."
                ),
                "input_schema": _object(
                    {"plan_digest": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
                    ("plan_digest",),
                ),
            },
            {
                "id": "link",
                "kind": "mutate",
                "description": "Link two memories of one space by their ids.",
                "input_schema": _object(
                    {
                        "space": _SPACE_NAME,
                        "from": _HANDLE,
                        "to": _HANDLE,
                        "relation": {"type": "string", "pattern": RELATION_PATTERN},
                    },
                    ("space", "from", "to"),
                ),
            },
            {
                "id": "forget",
                "kind": "mutate",
                "description": "Delete one memory of a space by its id.",
                "input_schema": _object(
                    {"space": _SPACE_NAME, "id": _HANDLE},
                    ("space", "id"),
                ),
            },
        ],
        "records": [
            {
                "id": "memory",
                "label": "Long-term memory",
                "description": (
                    "The memories of the spaces this scope sees, space by space, newest first. "
                    "A record naming a space the scope lacks, or invalid or oversized, is "
                    "refused alone."
                ),
                # lenient on purpose: the Source checks each memory and refuses it alone with
                # its own code (too-large, invalid-item, unknown-space)
                "record_schema": _object(
                    {
                        "id": {"type": "string"},
                        "space": {"type": "string"},
                        "text": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "entities": {"type": "array", "items": {"type": "string"}},
                        "created_at": {"type": ["string", "null"]},
                    },
                    ("space", "text"),
                ),
                "readable": True,
                "writable": True,
                "deletable": True,
                "label_field": "text",
                "group_field": "space",
                "key_fields": ["space", "text", "tags", "entities"],
                "newest_first": True,
            }
        ],
        # the maintenance preflight: a View may archive into the spaces its grant pins writable
        "write_scope": True,
    },
}
