"""The documents Source passes the Source conformance suite, as any third-party Source would."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mnemon_source_documents as documents

from mnemon_testing.conformance import SourceConformance

LIMIT = 4_096


class TestDocumentsConformance(SourceConformance):
    plugin = documents
    scopes = ({"workspace": "w1"}, {"workspace": "w2"})
    unavailable_scope: Mapping[str, Any] = {}
    invalid_writes = (
        # refused by the input schema or the JSON boundary, before the Source is asked
        ("create", {"title": "", "body": "empty title"}),
        ("create", {"title": "no body"}),
        ("create", {"title": "t", "body": "b", "colour": "red"}),
        ("create", {"title": "two\nlines", "body": "b"}),
        ("create", {"title": "t", "body": "lone \ud800 surrogate"}),
        ("update", {"document": "../../etc/passwd", "expected_revision": "r", "body": "x"}),
        # refused by the Source (invalid_payload / not_found), nothing written
        ("create", {"title": "too large", "body": "x" * (LIMIT + 1)}),
        ("create", {"title": "line\u2028separator", "body": "b"}),
        ("create", {"title": "t", "body": "nul \x00 inside"}),
        ("update", {"document": "doc-missing", "expected_revision": "r", "body": "x"}),
    )

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"data_dir": str(directory), "max_document_bytes": LIMIT}

    def write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "create", {"title": f"Note {marker}", "body": f"Remember {marker} for later."}

    def query(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "search", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "list", {"limit": 1_000}

    def manage_write(self, marker: str) -> tuple[str, Mapping[str, Any]]:
        return "create", {"title": f"Managed {marker}", "body": f"Written by a human: {marker}"}
