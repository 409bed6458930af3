"""The core does a few delicate things in exactly one place each, and those places work."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from mnemon._awaited import awaited
from mnemon._models import ViewRoute, from_checked

CORE = Path(__file__).resolve().parents[1] / "mnemon"


def places(pattern: str) -> list[str]:
    """The core's modules whose code matches `pattern`."""
    found = re.compile(pattern)
    return sorted(
        path.relative_to(CORE).as_posix()
        for path in CORE.rglob("*.py")
        if "scaffolds" not in path.parts and found.search(path.read_text(encoding="utf-8"))
    )


@pytest.mark.parametrize(
    ("pattern", "only"),
    [
        (r"\bisawaitable\(", ["_awaited.py"]),
        (r"\bmodel_construct\(", []),
        (r"__pydantic_(fields_set|extra|private)__", ["_models/base.py"]),
    ],
    ids=["maybe-await", "model-construct", "pydantic-internals"],
)
def test_each_delicate_step_has_one_place(pattern: str, only: list[str]) -> None:
    assert places(pattern) == only


async def test_a_plain_answer_is_returned_without_a_checkpoint() -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        # cancelled, yet nothing awaits: a plain value passes straight through
        assert await awaited(7) == 7


async def test_an_awaitable_answer_is_awaited() -> None:
    async def later() -> str:
        await anyio.lowlevel.checkpoint()
        return "done"

    assert await awaited(later()) == "done"


def test_a_model_built_from_checked_values_equals_a_validated_one() -> None:
    values = {
        "id": "source:notes/read",
        "source_key": "source:notes",
        "route_id": "read",
        "description": "Read the notes.",
        "capability": "read",
        "input_schema": {"type": "object"},
        "max_calls": 1,
        "max_results": 1,
        "max_characters": 100,
        "max_item_characters": 100,
    }
    assert from_checked(ViewRoute, dict(values)) == ViewRoute.model_validate(values)
