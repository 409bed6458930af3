"""What judging a manifest yields: broken rules, and the later Plugin API features it uses.

A leaf module: the inspector and the rules of each Contribution both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from mnemon.versions import Version

__all__ = ["Feature", "ManifestIssue", "compiles"]


@dataclass(frozen=True)
class ManifestIssue:
    """One broken rule: its code, the JSON path at fault, and a message naming the rule."""

    code: str
    path: str
    message: str


@dataclass(frozen=True)
class Feature:
    """A part of a manifest that needs a Plugin API version its range must admit.

    Attributes:
        path: the JSON path of the field that uses it (where `incompatible_plugin_api` points).
        label: what it is, for messages (`connector attachments`).
        since: the first Plugin API version with it.
    """

    path: str
    label: str
    since: Version


def compiles(schema: Any) -> bool:
    """Whether `schema` is a valid JSON Schema 2020-12 (an object or a boolean)."""
    if isinstance(schema, bool):
        return True
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True
