"""Quivr retrieval plugins as mnemon rankers.

The rule engine judges a Quivr retrieval plugin's answers exactly as Quivr's normative fixtures
do (`check_search_output`).
"""

from __future__ import annotations

from ._rules import (
    RetrievalLimits,
    RetrievalProfile,
    RetrievalSession,
    check_search_output,
    check_search_request,
)

__all__ = [
    "RetrievalLimits",
    "RetrievalProfile",
    "RetrievalSession",
    "check_search_output",
    "check_search_request",
]
