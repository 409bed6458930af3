"""The notes example passes the Source conformance suite, as any third-party Source should."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import mnemon_example_notes as notes

from mnemon_testing.conformance import SourceConformance


class TestNotesConformance(SourceConformance):
    plugin = notes
    scopes = ({"user_id": "ada"}, {"user_id": "grace"})
    # without a user there is no partition to serve
    unavailable_scope: ClassVar[dict[str, Any]] = {"workspace": "billing"}
    invalid_writes = (
        ("add", {"text": ""}),
        ("add", {"text": "x" * 2_001}),
        ("add", {}),
        ("add", {"text": "fine", "colour": "red"}),
        # one note is one line: a line break could start a line that reads as another note
        ("add", {"text": "one note\n- another"}),
        ("replace", {}),
    )

    def configure(self, directory: Path) -> dict[str, Any]:
        return {"data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "read", {}

    def manage_read(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "read", {}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "replace", {"text": f"- {marker}\n"}

    def write_for_agent(self, marker: str) -> tuple[str, dict[str, Any]]:
        # notes are the agent's own: partitioned by agent when the scope names one
        return "add", {"text": marker}
