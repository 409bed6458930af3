"""The Source passes mnemon's Source conformance suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mnemon_testing.conformance import SourceConformance

import __PACKAGE__


class Test__CLASS__Conformance(SourceConformance):
    plugin: ClassVar[Any] = __PACKAGE__
    scopes = ({"user_id": "ada"}, {"user_id": "grace"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"workspace": "billing"}
    invalid_writes = (("add", {"text": ""}), ("add", {}), ("add", {"text": "x" * 2_001}))

    def configure(self, directory: Path) -> dict[str, Any]:
        return {"data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "search", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "list", {}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def write_for_agent(self, marker: str) -> tuple[str, dict[str, Any]]:
        # items are partitioned by agent too, so the agent check applies
        return "add", {"text": marker}
