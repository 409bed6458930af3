"""A `remote` entry in a profile: a relative manifest path is taken from the profile's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mnemon_remote import RemoteSettings

from mnemon import DefinitionError, load_profile

PLUGINS = Path(__file__).parent / "plugins"

PROFILE = """
[strategy]
use = "focus"

[[entries]]
id = "focus"
use = "mnemon_example_focus"
[entries.config]
source_keys = ["source:notes"]

[[entries]]
id = "notes"
use = "mnemon_remote"
[entries.config]
manifest = "plugins/notes/mnemon-source.yaml"
launch = true
configuration = {{ path = "{notes}" }}
"""


async def test_a_relative_manifest_is_read_from_the_profiles_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    shutil.copytree(PLUGINS / "notes", project / "plugins" / "notes")
    notes = tmp_path / "notes.md"
    notes.write_text("Served from the profile's plugin folder.\n", encoding="utf-8")
    (project / "mnemon.toml").write_text(PROFILE.format(notes=notes), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the host runs from another folder, where the relative path names nothing
    monkeypatch.chdir(elsewhere)
    profile = load_profile(project / "mnemon.toml")
    async with profile.open_host() as host, host.turn(scope={"user_id": "ada"}) as turn:
        fragments = [fragment.text for fragment in turn.view.fragments]
        diagnostics = [diagnostic.code for diagnostic in turn.view.diagnostics]
    assert fragments == ["Served from the profile's plugin folder.\n"], diagnostics


def test_a_relative_manifest_without_a_profile_folder_is_refused_by_key(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as caught:
        RemoteSettings({"manifest": "plugins/notes/mnemon-source.yaml", "launch": True})
    assert str(caught.value).startswith("remote configuration.manifest: must be an absolute path")
    assert "plugins/notes" not in str(caught.value)


def test_an_absolute_manifest_ignores_the_profile_folder(tmp_path: Path) -> None:
    manifest = PLUGINS / "notes" / "mnemon-source.yaml"
    settings = RemoteSettings({"manifest": str(manifest), "launch": True}, config_dir=str(tmp_path))
    assert settings.report.path == manifest
