"""What the contract runner's checks of every Contribution judge alike.

Two answers to the same request must be the same (`replay`): the first place they differ is
named, never their values. An invalid request must be refused with a valid, terminal error
envelope (`invalid_request`): retrying a request the schema refuses can never succeed.
"""

from __future__ import annotations

import json
from typing import Any

from mnemon_remote import CheckResult

from ._schemas import error_validator

__all__ = ["first_difference", "judge_refusal"]


def first_difference(first: Any, second: Any, at: str = "") -> str | None:
    """The JSON Pointer of the first place two JSON values differ, or None."""
    if isinstance(first, dict) and isinstance(second, dict):
        for key in sorted(set(first) | set(second)):
            where = at + "/" + str(key).replace("~", "~0").replace("/", "~1")
            found = first_difference(first.get(key), second.get(key), where)
            if found is not None:
                return found
        return None
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            found = first_difference(a, b, f"{at}/{index}")
            if found is not None:
                return found
        return None
    return None if first == second else at or "/"


def judge_refusal(check: CheckResult, route: str, status: int, answer: bytes, reason: str) -> None:
    """Record why an answer to an invalid request is not a terminal refusal, if it is not."""
    if 200 <= status < 300:
        check.issue(
            "accepted_invalid_request",
            route,
            f"HTTP {status} for an invalid request ({reason}); answer 4xx with the error "
            "envelope and retryable false",
        )
        return
    try:
        envelope = json.loads(answer)
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict) or not error_validator().is_valid(envelope):
        check.issue(
            "invalid_envelope", route, f"HTTP {status} without a valid error envelope ({reason})"
        )
        return
    transient = envelope.get("error_class") == "transient"
    if envelope["retryable"] or transient:
        check.issue(
            "wrong_error_class",
            "/retryable",
            f"HTTP {status} with a retryable or transient envelope for an invalid request "
            f"({reason}); retrying cannot succeed, answer retryable false",
        )
