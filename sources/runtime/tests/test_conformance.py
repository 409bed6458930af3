"""The runtime Source passes the Source conformance suite, as any third-party Source would."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import mnemon_source_runtime as runtime

from mnemon_testing.conformance import SourceConformance

LIMIT = 4096


class TestRuntimeConformance(SourceConformance):
    plugin = runtime
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {}
    invalid_writes = (
        ("mutate", {"target": "notes", "operation": "add", "text": "unknown target"}),
        ("mutate", {"target": "user", "operation": "add"}),
        ("mutate", {"target": "user", "operation": "add", "text": "x" * 2001}),
        # 1,500 characters, 6,000 bytes: within the text bound, over the byte cap
        ("mutate", {"target": "user", "operation": "add", "text": "\U0001f642" * 1500}),
        ("mutate", {"target": "user", "operation": "add", "text": "   "}),
        ("mutate", {"target": "memory", "operation": "add", "text": "nul \x00 inside"}),
        ("mutate", {"target": "user", "operation": "add", "text": "x", "colour": "red"}),
        ("mutate", {"target": "user", "operation": "add", "text": "x", "id": "u1"}),
        ("mutate", {"target": "user", "operation": "replace", "id": "u999", "text": "x"}),
        ("mutate", {"target": "user", "operation": "remove", "id": "m1"}),
        ("mutate", {"target": "user", "operation": "remove", "id": "../u1"}),
        ("mutate", {"target": "user", "operation": "add", "text": "x", "importance": 9}),
    )

    def configure(self, directory: Path) -> dict[str, Any]:
        return {"data_dir": str(directory), "memory_limit_bytes": LIMIT}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "mutate", {"target": "memory", "operation": "add", "text": marker}

    def manage_read(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "read", {}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        # notes, like write(): agent-private, so the suite's isolation checks apply to both
        return "mutate", {"target": "memory", "operation": "add", "text": marker}

    def write_for_agent(self, marker: str) -> tuple[str, dict[str, Any]]:
        # the agent's own notes: never another agent's, never an agent-less scope's
        return "mutate", {"target": "memory", "operation": "add", "text": marker}
