"""The focus example selects configured Sources and splits the budget evenly."""

from __future__ import annotations

from pathlib import Path

import mnemon_example_focus as focus
import mnemon_example_notes as notes
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon import CompositionRejected, InstallError
from mnemon_testing import MemoryCompositionRunner


@given(st.integers(min_value=0, max_value=10_000_000), st.integers(min_value=1, max_value=64))
def test_split_evenly_always_sums_to_the_total(total: int, count: int) -> None:
    shares = focus.split_evenly(total, count)
    assert sum(shares) == total
    assert len(shares) == count
    assert max(shares) - min(shares) <= 1


async def test_focus_splits_the_budget_over_configured_sources(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        for name in ("a", "b", "c"):
            path = tmp_path / f"{name}.md"
            path.write_text(name * 1000, encoding="utf-8")
            await runner.mount(notes, instance_id=name, config={"path": str(path)})
        await runner.mount(
            focus,
            instance_id="focus",
            config={"source_keys": ["source:c", "source:a"], "mode": "routed"},
        )
        turn = await runner.begin_turn({"budget": {"max_projection_characters": 1001}})
        view = turn.view
        await turn.release()
    assert [(f.source_key, f.mode, len(f.text)) for f in view.fragments] == [
        ("source:c", "routed", 501),
        ("source:a", "routed", 500),
    ]
    assert "2 configured Source(s) in routed mode" in view.explanation


async def test_a_required_missing_source_is_rejected_by_the_strategy(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("a", encoding="utf-8")
    async with MemoryCompositionRunner() as runner:
        await runner.mount(notes, instance_id="a", config={"path": str(path)})
        await runner.mount(
            focus,
            instance_id="focus",
            config={"source_keys": ["source:a", "source:docs"], "required": True},
        )
        with pytest.raises(CompositionRejected, match="source:docs is not installed"):
            await runner.begin_turn()


def test_focus_requires_a_source() -> None:
    assert focus.memory_plugin.requires == ("source",)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "source_keys"),
        ({"source_keys": ["source:a", "source:a"]}, "unique"),
        ({"source_keys": []}, r"focus configuration\.source_keys: a non-empty list"),
        (
            {"source_keys": ["source:a"], "mode": "loud"},
            r'focus configuration\.mode: must be "eager"',
        ),
        (
            {"source_keys": ["source:a"], "required": "yes"},
            r"configuration\.required: must be true or false",
        ),
        ({"source_keys": ["source:a"], "extra": 1}, r"focus configuration\.extra: unknown key"),
        (
            {"source_keys": ["source:a"], "mod": "eager"},
            r"configuration\.mod: unknown key; did you mean 'mode'\?",
        ),
    ],
    ids=[
        "missing-keys",
        "duplicate-keys",
        "empty-keys",
        "bad-mode",
        "required-not-bool",
        "unknown-key",
        "misspelt",
    ],
)
async def test_invalid_focus_configuration_is_refused(config: dict, message: str) -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match=message):
            await runner.mount(focus, instance_id="focus", config=config)
        assert runner.inspect()["registry_revision"] == 0
