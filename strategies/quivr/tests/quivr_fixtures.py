"""Quivr's normative fixtures, vendored under fixtures/quivr (see its NOTICE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent / "fixtures" / "quivr"
FIXTURES = ROOT / "fixtures"
INDEX = json.loads((FIXTURES / "index.json").read_text("utf-8"))["cases"]


def load(relative: str) -> Any:
    """A fixture file's value (JSON, or YAML read with safe_load)."""
    path = FIXTURES / relative
    if path.suffix == ".json":
        return json.loads(path.read_text("utf-8"))
    return yaml.safe_load(path.read_text("utf-8"))


def rows(prefix: str) -> list[dict[str, Any]]:
    """index.json rows whose file starts with `prefix`."""
    return [row for row in INDEX if row["file"].startswith(prefix)]
