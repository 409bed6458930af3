"""The contract report: Quivr's contract report v1 shape, with mnemon's two extra checks."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from jsonschema import Draft202012Validator

from ._manifest import load_schema

__all__ = ["CHECKS", "CheckResult", "report_validator"]

#: every check the runner reports, in order, with its title
CHECKS = {
    "manifest": "The manifest is well formed",
    "compatibility": "The manifest's ranges admit this mnemon and protocol",
    "health": "GET /v0/health answers ok",
    "discovery": "GET /v0/discovery matches the manifest",
    "fixtures": "The fixtures are valid against the manifest",
    "invoke": "Every call answers in time and passes the core's validators",
    "replay": "The same request gets the same answer",
    "invalid_request": "Invalid requests are refused with a final error envelope",
    "credentials": "No secret appears in any answer or in the plugin's output",
    "isolation": "Data written in one scope never shows in another",
}
_WHOLE_PLUGIN = {"manifest", "compatibility", "health", "discovery"}
Status = Literal["pass", "fail", "skip"]


@dataclass
class CheckResult:
    """One check's outcome: `fail` when it has issues, `skip` with the reason in `note`."""

    id: str
    status: Status = "pass"
    duration_ms: int = 0
    note: str | None = None
    fixture: str | None = None
    issues: list[dict[str, str]] = field(default_factory=list)

    def issue(self, code: str, path: str, message: str) -> None:
        """Record one issue; the check fails."""
        self.issues.append({"code": code, "path": path, "message": message})
        self.status = "fail"

    def skip(self, note: str) -> None:
        """Mark the check skipped, saying why."""
        self.status = "skip"
        self.note = note

    def as_json(self) -> dict[str, Any]:
        """The check in the report's shape."""
        value: dict[str, Any] = {
            "id": self.id,
            "title": CHECKS[self.id],
            "status": self.status,
            "duration_ms": self.duration_ms,
            "issues": self.issues,
        }
        if self.id not in _WHOLE_PLUGIN:
            value["contribution"] = "source"
        if self.fixture is not None:
            value["fixture"] = self.fixture
        if self.note is not None:
            value["note"] = self.note
        return value


@cache
def report_validator() -> Draft202012Validator:
    """The vendored contract-report v1 schema, admitting the `credentials` and `isolation` ids."""
    schema = copy.deepcopy(load_schema("contract-report.schema.json"))
    ids = schema["$defs"]["Check"]["properties"]["id"]["enum"]
    ids.extend(check for check in CHECKS if check not in ids)
    # Quivr names its own contributions; a mnemon plugin contributes a Source
    schema["$defs"]["Check"]["properties"]["contribution"]["enum"].append("source")
    return Draft202012Validator(schema)
