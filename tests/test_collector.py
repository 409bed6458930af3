"""`collector = "serving"`: Python's garbage collector set up for many turns at once."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemon import DefinitionError, MemoryHost, load_profile
from tests.kit import fake_source, strategy_plugin

SERVING_THRESHOLD = 20_000


@pytest.fixture(autouse=True)
def collector() -> Iterator[tuple[int, int, int]]:
    """The thresholds before the test; they and the frozen objects are put back after it."""
    # a serving host's full collection would finalize what earlier tests left for the
    # collector, and their resource warnings would be reported as this test's: collect that
    # garbage first, without reporting it
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)
    gc.unfreeze()


async def test_a_serving_host_freezes_start_up_and_raises_the_young_threshold_while_open(
    collector: tuple[int, int, int],
) -> None:
    gc.unfreeze()
    host = MemoryHost(collector="serving")
    assert gc.get_threshold() == (SERVING_THRESHOLD, *collector[1:])
    assert gc.get_freeze_count() > 0
    plugin, _ = fake_source()
    await host.mount(plugin, instance_id="a")
    await host.mount(strategy_plugin(), instance_id="strategy")
    async with host.turn(scope={"user_id": "u"}) as turn:
        assert [item.source_key for item in turn.view.consistency] == ["source:a"]
    await host.dispose()
    assert gc.get_threshold() == collector
    await host.dispose()  # closing twice gives nothing back twice
    assert gc.get_threshold() == collector


async def test_the_thresholds_come_back_when_the_last_serving_host_closes(
    collector: tuple[int, int, int],
) -> None:
    first = MemoryHost(collector="serving")
    second = MemoryHost(collector="serving")
    await first.dispose()
    assert gc.get_threshold()[0] == SERVING_THRESHOLD
    await second.dispose()
    assert gc.get_threshold() == collector


async def test_a_threshold_the_process_changed_meanwhile_is_left_as_it_is() -> None:
    host = MemoryHost(collector="serving")
    gc.set_threshold(5_000, 20, 20)
    await host.dispose()
    assert gc.get_threshold() == (5_000, 20, 20)


async def test_by_default_the_collector_is_left_as_python_set_it(
    collector: tuple[int, int, int],
) -> None:
    gc.unfreeze()
    async with MemoryHost(source_timeout=5.0):
        assert gc.get_threshold() == collector
        assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("value", ["fast", "", None, True], ids=repr)
def test_an_unknown_collector_is_refused_naming_the_setting(value: object) -> None:
    with pytest.raises(DefinitionError, match=r"^collector: Input should be 'python' or 'serving'"):
        MemoryHost(collector=value)


def test_a_profile_asks_for_the_serving_collector(tmp_path: Path) -> None:
    path = tmp_path / "mnemon.toml"
    path.write_text('collector = "serving"\n', encoding="utf-8")
    assert load_profile(path).settings.collector == "serving"
    path.write_text("", encoding="utf-8")
    assert load_profile(path).settings.collector == "python"
