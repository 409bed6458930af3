"""The Raven Source, hosting the reference backend, passes the Source conformance suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import mnemon_source_raven as raven

from mnemon_testing.conformance import SourceConformance


class TestRavenUserTrackConformance(SourceConformance):
    plugin = raven
    scopes = ({"user_id": "u1"}, {"user_id": "u2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"agent_id": "a1"}
    invalid_writes = (
        ("store", {"messages": []}),
        ("store", {"messages": [{"role": "robot", "content": "x"}]}),
        ("store", {"messages": [{"role": "user", "content": "nul \x00 inside"}]}),
        ("store", {"messages": [{"role": "user", "content": "x"}], "colour": "red"}),
        ("store", {"messages": [{"role": "user", "content": "x"}], "is_final": True}),
        ("feedback", {"items": [{"memory_id": "m0", "helpful": True}]}),
        ("feedback", {"items": [{"memory_id": "m0", "helpful": True, "x": 1}]}),
        ("feedback", {"signals": [{"type": "memory_usage", "memory_id": "m0", "helpful": True}]}),
    )

    def configure(self, directory: Path) -> dict[str, Any]:
        return {"backend": "raven_reference:make_backend", "data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "store", {"messages": [{"role": "user", "content": marker}]}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        # an imported memory, stored through the backend's store() once
        record = {"record": {"text": marker}, "idempotency_key": f"conformance:{marker}"}
        return "records-write", {"kind": "memory", "records": [record]}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "recall", {"query": marker}


class TestRavenAgentTrackConformance(SourceConformance):
    plugin = raven
    scopes = ({"agent_id": "a1"}, {"agent_id": "a2"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"user_id": "u1"}

    def configure(self, directory: Path) -> dict[str, Any]:
        return {
            "backend": "raven_reference:make_backend",
            "track": "agent",
            "data_dir": str(directory),
        }

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        # the agent track keeps what the agent itself said: its own (assistant) turns
        return "store", {"messages": [{"role": "assistant", "content": marker}]}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        # on the agent track an imported memory is stored as the agent's own (assistant) turn
        record = {"record": {"text": marker}, "idempotency_key": f"conformance:{marker}"}
        return "records-write", {"kind": "memory", "records": [record]}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "recall", {"query": marker}
