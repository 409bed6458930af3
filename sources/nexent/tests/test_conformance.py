"""The Nexent Source, hosting the reference provider over loopback HTTP, passes conformance."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import mnemon_source_nexent as nexent
from nexent_fake import PLUGINS, shared_service

from mnemon_testing.conformance import SourceConformance


class TestNexentConformance(SourceConformance):
    plugin = nexent
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"agent_id": "a1"}
    secrets: ClassVar[dict[str, str]] = {"plugin.api_key": "sk-conformance-7f3a9b1c"}
    shared_data_reason = (
        "a Nexent provider is an external service its configuration names: two entries "
        "pointing at the same service and credentials read the same memory, on purpose"
    )
    invalid_writes = (
        ("ingest", {"units": []}),
        ("ingest", {"units": [{"content": "nul \x00 inside"}]}),
        ("ingest", {"units": [{"content": "x", "role": "robot"}]}),
    )

    def configure(self, directory: Path) -> dict[str, Any]:
        return {
            "plugin_dir": str(PLUGINS),
            "plugin": {"name": "reference", "endpoint": shared_service().url},
            "nexent_shim": True,
            "data_dir": str(directory),
        }

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "ingest", {"units": [{"content": marker, "role": "user"}]}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "search", {"query": marker}
