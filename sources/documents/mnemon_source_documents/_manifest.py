"""What the documents Source is and offers: its manifest, routes, actions and management."""

from __future__ import annotations

from typing import Any

from mnemon.sdk import memory_text_schema

from ._files import DOCUMENT_ID_PATTERN
from ._markdown import MAX_BODY_CHARACTERS, MAX_TITLE_CHARACTERS

__all__ = [
    "ACTION_IDS",
    "CAPABILITIES",
    "DEFAULT_SEARCH_LIMIT",
    "MANIFEST",
    "PACKAGE",
    "ROLE",
    "ROUTE_IDS",
    "TYPE_ID",
]

PACKAGE = "mnemon-source-documents"
TYPE_ID = "documents"
ROLE = "narrative"
CAPABILITIES = ("project", "search", "write", "status")
ROUTE_IDS = ("search",)
ACTION_IDS = ("create", "update")
DEFAULT_SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 20
MAX_QUERY_CHARACTERS = 500

_DOCUMENT: dict[str, Any] = {
    "type": "string",
    "pattern": DOCUMENT_ID_PATTERN,
    "description": "The document handle, as search results and receipts give it.",
}
_TITLE: dict[str, Any] = {
    **memory_text_schema(MAX_TITLE_CHARACTERS, single_line=True),
    "description": "A one-line title.",
}
# the schema bounds a body by characters; the configured byte limit is checked by the Source
_BODY: dict[str, Any] = {
    **memory_text_schema(MAX_BODY_CHARACTERS, allow_blank=True),
    "description": "The Markdown body.",
}
_REVISION: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 512}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_CREATE = _object({"title": _TITLE, "body": _BODY}, ["title", "body"])
_UPDATE = _object(
    {
        "document": _DOCUMENT,
        "expected_revision": {
            **_REVISION,
            "description": "The document's revision the change is based on.",
        },
        "title": _TITLE,
        "body": _BODY,
    },
    ["document", "expected_revision"],
)

MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": ROLE,
    "capabilities": list(CAPABILITIES),
    "consistency": "exact-snapshot",
    # every document belongs to a workspace: a scope without one has none to read
    "partition_keys": ["workspace"],
    "routes": [
        {
            "id": "search",
            "description": (
                "Search this workspace's Markdown documents by keywords. Returns excerpts of "
                "the best matches with each document's handle, title and revision."
            ),
            "capability": "search",
            "input_schema": _object(
                {
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_QUERY_CHARACTERS,
                        "description": "Keywords; any of them may match.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "default": DEFAULT_SEARCH_LIMIT,
                        "description": "How many documents to return at most.",
                    },
                },
                ["query"],
            ),
            "max_calls": 3,
            "max_results": MAX_SEARCH_LIMIT,
            "max_characters": 12_000,
        }
    ],
    "actions": [
        {
            "id": "create",
            "description": "Create a new Markdown document in this workspace.",
            "capability": "write",
            "input_schema": _CREATE,
        },
        {
            "id": "update",
            "description": (
                "Change the title and/or body of a document, based on the revision you read; "
                "a document changed since then is refused."
            ),
            "capability": "write",
            "input_schema": _UPDATE,
        },
    ],
    "management": {
        "label": "Workspace documents",
        "description": (
            "Markdown documents of a workspace: list and read them as they are now, create "
            "and update them (confirmed and fenced by the workspace revision)."
        ),
        "fields": [
            {
                "id": "data-dir",
                "label": "Data folder",
                "input": "text",
                "description": "Absolute folder for the documents (data_dir).",
            },
            {
                "id": "max-document-bytes",
                "label": "Largest document (bytes)",
                "input": "number",
                "description": "max_document_bytes",
            },
            {
                "id": "max-documents",
                "label": "Documents per workspace",
                "input": "number",
                "description": "max_documents",
            },
            {
                "id": "excerpt-characters",
                "label": "Excerpt length (characters)",
                "input": "number",
                "description": "excerpt_characters",
            },
            {
                "id": "lock-timeout",
                "label": "Lock wait (seconds)",
                "input": "number",
                "description": "lock_timeout",
            },
            {
                "id": "recheck-files-per-turn",
                "label": "Files re-checked per turn",
                "input": "number",
                "description": "recheck_files_per_turn",
            },
            {
                "id": "rescan-seconds",
                "label": "Full rescan interval (seconds)",
                "input": "number",
                "description": "rescan_seconds",
            },
        ],
        "operations": [
            {
                "id": "list",
                "kind": "read",
                "description": "The documents as they are now: handle, title, revision.",
                "input_schema": _object(
                    {
                        "offset": {"type": "integer", "minimum": 0},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 1_000},
                    },
                    [],
                ),
            },
            {
                "id": "read",
                "kind": "read",
                "description": "One document as it is now, with its body.",
                "input_schema": _object({"document": _DOCUMENT}, ["document"]),
            },
            {
                "id": "create",
                "kind": "mutate",
                "description": "Create a document.",
                "input_schema": _CREATE,
            },
            {
                "id": "update",
                "kind": "mutate",
                "description": (
                    "Change a document's title and/or body (optionally fenced by the "
                    "document's own revision as well)."
                ),
                "input_schema": _object(
                    {
                        "document": _DOCUMENT,
                        "expected_revision": _REVISION,
                        "title": _TITLE,
                        "body": _BODY,
                    },
                    ["document"],
                ),
            },
        ],
        "records": [
            {
                "id": "document",
                "label": "Document",
                "description": "The Markdown documents of the scope's workspace, by title.",
                "record_schema": _object(
                    {
                        "id": {"type": "string"},
                        "title": _TITLE,
                        "body": _BODY,
                        "revision": {"type": ["string", "null"]},
                    },
                    ["title", "body"],
                ),
                "readable": True,
                "writable": True,
                "label_field": "title",
                "key_fields": ["title", "body"],
            }
        ],
    },
}
