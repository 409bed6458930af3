"""The contract report: Quivr's contract report v1 shape, shared by every contract runner.

mnemon's runner (`certify`) and the Quivr-compat runner of mnemon-strategy-quivr report in the
same vendored shape. Each names its checks and the Contribution they judge in a
`ContractChecks`; the schema's check-id and contribution enums are extended with exactly those.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from jsonschema import Draft202012Validator

from ._manifest import load_schema

__all__ = [
    "CHECKS",
    "MNEMON_CHECKS",
    "WHOLE_PLUGIN",
    "CheckResult",
    "ContractChecks",
    "check_lines",
    "report_validator",
    "summarize",
    "timed",
]

#: every check mnemon's runner reports, in order, with its title
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
#: the checks that judge the plugin as a whole: the report names no Contribution for them
WHOLE_PLUGIN = frozenset({"manifest", "compatibility", "health", "discovery"})
Status = Literal["pass", "fail", "skip"]
_MARKS = {"pass": "ok  ", "fail": "FAIL", "skip": "skip"}


@dataclass
class CheckResult:
    """One check's outcome: `fail` when it has issues, `skip` with the reason in `note`.

    Attributes:
        id: the check's id (`manifest`, `invoke`, ...).
        title: what the check asserts, as the report shows it.
        contribution: the Contribution it judges, or None for a check of the whole plugin.
    """

    id: str
    title: str
    contribution: str | None = None
    fixture: str | None = None
    status: Status = "pass"
    duration_ms: int = 0
    note: str | None = None
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
            "title": self.title,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "issues": self.issues,
        }
        if self.contribution is not None:
            value["contribution"] = self.contribution
        if self.fixture is not None:
            value["fixture"] = self.fixture
        if self.note is not None:
            value["note"] = self.note
        return value


@dataclass(frozen=True)
class ContractChecks:
    """The checks one contract runner reports, and the Contribution they judge.

    Attributes:
        contribution: the Contribution the report names on every check but the whole
            plugin's (`source` for mnemon's protocol, `retrieval` for a Quivr ranker).
        titles: every check id in report order, with its default title.
    """

    contribution: str
    titles: Mapping[str, str]

    @property
    def ids(self) -> tuple[str, ...]:
        """The check ids, in report order."""
        return tuple(self.titles)

    def result(
        self, check_id: str, title: str | None = None, fixture: str | None = None
    ) -> CheckResult:
        """A passing result of `check_id` (its default title unless `title` is given)."""
        contribution = None if check_id in WHOLE_PLUGIN else self.contribution
        return CheckResult(check_id, title or self.titles[check_id], contribution, fixture)

    def validator(self) -> Draft202012Validator:
        """The report schema, admitting these check ids and this Contribution."""
        return report_validator(self.ids, (self.contribution,))


#: the checks of mnemon's own runner
MNEMON_CHECKS = ContractChecks("source", CHECKS)


def report_validator(
    ids: Iterable[str] = CHECKS, contributions: Iterable[str] = ("source",)
) -> Draft202012Validator:
    """The vendored contract-report v1 schema, admitting more check ids and Contributions.

    The vendored schema predates some checks (`credentials`, `isolation`) and Contributions
    (`source`, `retrieval`); the ones given are added to its enums, the file is unchanged. By
    default, what mnemon's runner reports.
    """
    return _report_validator(tuple(ids), tuple(contributions))


@cache
def _report_validator(ids: tuple[str, ...], contributions: tuple[str, ...]) -> Draft202012Validator:
    schema = copy.deepcopy(load_schema("contract-report.schema.json"))
    check = schema["$defs"]["Check"]["properties"]
    known = check["id"]["enum"]
    known.extend(check_id for check_id in ids if check_id not in known)
    named = check["contribution"]["enum"]
    named.extend(name for name in contributions if name not in named)
    return Draft202012Validator(schema)


@contextmanager
def timed(check: CheckResult) -> Iterator[CheckResult]:
    """Measure the block's duration into the check, whatever the block raises."""
    started = time.monotonic()
    try:
        yield check
    finally:
        check.duration_ms = int((time.monotonic() - started) * 1000)


def summarize(checks: Sequence[CheckResult]) -> dict[str, int]:
    """The report's `summary`: how many checks passed, failed and were skipped."""
    return {
        "passed": sum(check.status == "pass" for check in checks),
        "failed": sum(check.status == "fail" for check in checks),
        "skipped": sum(check.status == "skip" for check in checks),
    }


def check_lines(check: Mapping[str, Any]) -> list[str]:
    """A check of a report (its JSON) as the human report prints it: a line, then its issues."""
    line = f"  {_MARKS[check['status']]} {check['id']}: {check['title']}"
    if check.get("note"):
        line += f" ({check['note']})"
    return [
        line,
        *(f"       {i['code']} at {i['path']}: {i['message']}" for i in check["issues"]),
    ]
