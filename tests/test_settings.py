"""Host settings: one object for MemoryHost, profiles, the runner and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemon import DefinitionError, HostSettings, MemoryHost, load_profile
from mnemon_testing import MemoryCompositionRunner
from tests.kit import fake_source, strategy_plugin


def test_a_host_takes_settings_an_object_or_fields_alike(tmp_path: Path) -> None:
    settings = HostSettings(source_timeout=2.5, data_dir=str(tmp_path), max_input_bytes=4096)
    assert MemoryHost(settings).settings == settings
    assert MemoryHost(source_timeout=2.5, data_dir=tmp_path, max_input_bytes=4096).settings == (
        settings
    )
    # fields override the object they are given with
    assert MemoryHost(settings, source_timeout=1).settings.source_timeout == 1.0
    assert MemoryHost(settings, source_timeout=1).settings.data_dir == str(tmp_path)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"source_timout": 3}, "unknown host setting 'source_timout'"),
        ({"config_dir": "relative/tok_SECRET"}, "config_dir: must be an absolute path"),
        ({"data_dir": "relative/tok_SECRET"}, "data_dir: must be an absolute path"),
        ({"max_input_bytes": 10}, "max_input_bytes: must be an integer from 1024"),
        ({"switches": {"Tok_SECRET on": False}}, "switches: a name must match"),
        ({"switches": {"external-memory.search": "SECRET"}}, "switches['external-memory.search']"),
    ],
)
def test_a_bad_setting_is_named_and_never_quoted(options: dict, message: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        MemoryHost(**options)
    assert str(caught.value).startswith(message)
    assert "SECRET" not in str(caught.value)


async def test_reconfigure_keeps_what_it_is_not_given(tmp_path: Path) -> None:
    async with MemoryHost(data_dir=tmp_path, source_timeout=4) as host:
        await host.reconfigure(max_input_bytes=2048)
        assert host.settings.source_timeout == 4.0
        assert host.settings.data_dir == str(tmp_path)
        assert host.settings.max_input_bytes == 2048


async def test_the_runner_passes_every_setting_through(tmp_path: Path) -> None:
    source, probe = fake_source()
    async with MemoryCompositionRunner(data_dir=tmp_path, config_dir=tmp_path / "cfg") as runner:
        await runner.mount(source, instance_id="a")
        await runner.mount(strategy_plugin(), instance_id="strategy")
    assert probe.inits[0].data_dir == str(tmp_path)
    assert probe.inits[0].config_dir == str(tmp_path / "cfg")


async def test_sources_see_the_hosts_switches(tmp_path: Path) -> None:
    source, probe = fake_source()
    switches = {"external-memory.search": False, "maintenance.window": True}
    async with MemoryCompositionRunner(switches=switches) as runner:
        await runner.mount(source, instance_id="a")
        await runner.mount(strategy_plugin(), instance_id="strategy")
    assert dict(probe.inits[-1].switches) == switches


async def test_a_profile_sets_switches_and_a_bad_one_names_its_key(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text('[switches]\n"external-memory.ingest" = false\n', encoding="utf-8")
    assert load_profile(profile).settings.switches == {"external-memory.ingest": False}
    profile.write_text('[switches]\n"external-memory.ingest" = "off"\n', encoding="utf-8")
    with pytest.raises(
        DefinitionError, match=r"toml\.switches\['external-memory\.ingest'\]: must be true or false"
    ):
        load_profile(profile)


async def test_a_profile_hands_its_folder_to_sources_for_relative_paths(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text('data_dir = "state"\nmax_input_bytes = 8192\n', encoding="utf-8")
    loaded = load_profile(profile)
    settings = loaded.settings
    assert settings.config_dir == str(tmp_path)
    assert settings.data_dir == str(tmp_path / "state")
    assert settings.max_input_bytes == 8192
    async with loaded.open_host(source_timeout=3) as host:
        assert host.settings.source_timeout == 3.0
        assert host.settings.config_dir == str(tmp_path)
