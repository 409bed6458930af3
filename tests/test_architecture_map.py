"""docs/architecture.md is the map of the core: every module of `mnemon/` is named on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"
# the top level and the four subpackages; a new module is placed on the map when it is added
MODULES = sorted(
    path.relative_to(ROOT).as_posix()
    for folder in ("mnemon", "mnemon/sdk", "mnemon/_cli", "mnemon/_engine", "mnemon/_models")
    for path in (ROOT / folder).glob("*.py")
)


def test_the_core_has_the_modules_the_map_covers() -> None:
    assert "mnemon/_host.py" in MODULES
    assert "mnemon/_engine/compose.py" in MODULES
    assert len(MODULES) > 50


@pytest.mark.parametrize("module", MODULES)
def test_every_core_module_is_named_on_the_map(module: str) -> None:
    assert f"`{module}`" in MAP.read_text(encoding="utf-8"), (
        f"{module} is not on docs/architecture.md: add it under the concept it belongs to"
    )


def test_the_map_names_only_modules_that_exist() -> None:
    text = MAP.read_text(encoding="utf-8")
    named = set(re.findall(r"`(mnemon/[\w/]+\.py)`", text))
    assert named, "the map names modules by path"
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_map_names_the_integrations() -> None:
    text = MAP.read_text(encoding="utf-8")
    for folder in sorted((ROOT / "integrations").glob("*/pyproject.toml")):
        assert f"`integrations/{folder.parent.name}/`" in text
