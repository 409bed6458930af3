"""The contract report of the Quivr-compat mode: its checks, in Quivr's report v1 shape."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHECK_IDS", "CHECK_TITLES", "CheckResult", "summarize", "timed"]

CHECK_IDS = (
    "manifest",
    "compatibility",
    "health",
    "discovery",
    "fixtures",
    "invoke",
    "replay",
    "invalid_request",
    "credentials",
)
CHECK_TITLES = {
    "compatibility": "the manifest's ranges admit this engine and Plugin API",
    "health": "GET /v0/health answers 200",
    "discovery": "GET /v0/discovery matches quivr-plugin.yaml",
    "fixtures": "retrieval fixtures build valid searches",
    "invoke": "every profile ranks served candidates within its limits",
    "replay": "the same search twice returns the same ranking",
    "invalid_request": "invalid searches are refused with a terminal error envelope",
    "credentials": "no secret value appears in any answer or in the plugin's output",
}
_WHOLE_PLUGIN = {"manifest", "compatibility", "health", "discovery"}


@dataclass
class CheckResult:
    """One check's verdict: `fail` with issues, `skip` with the reason in `note`."""

    id: str
    title: str
    fixture: str | None = None
    note: str | None = None
    skipped: bool = False
    duration_ms: int = 0
    issues: list[dict[str, str]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """`fail`, `skip` or `pass`."""
        if self.issues:
            return "fail"
        return "skip" if self.skipped else "pass"

    def issue(self, code: str, path: str, message: str) -> None:
        """Record one issue: the check fails."""
        self.issues.append({"code": code, "path": path, "message": message})

    def as_json(self) -> dict[str, Any]:
        """The check in the report's shape."""
        value: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "issues": self.issues,
        }
        if self.id not in _WHOLE_PLUGIN:
            value["contribution"] = "retrieval"
        if self.fixture is not None:
            value["fixture"] = self.fixture
        if self.note is not None:
            value["note"] = self.note
        return value


@contextmanager
def timed(check: CheckResult) -> Iterator[CheckResult]:
    """Measure the block's duration into the check."""
    started = time.monotonic()
    try:
        yield check
    finally:
        check.duration_ms = int((time.monotonic() - started) * 1000)


def summarize(checks: Sequence[CheckResult]) -> tuple[dict[str, int], bool]:
    """The report's `summary` and `certified`: no check failed and at least one passed."""
    statuses = [check.status for check in checks]
    summary = {
        "passed": statuses.count("pass"),
        "failed": statuses.count("fail"),
        "skipped": statuses.count("skip"),
    }
    return summary, summary["failed"] == 0 and summary["passed"] > 0
