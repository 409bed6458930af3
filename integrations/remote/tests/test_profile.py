"""A `remote` entry in a profile: a relative manifest path is taken from the profile's folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


CHATTY = """\
import os
import sys
import tempfile

from mnemon_example_notes import NOTES_SOURCE
from mnemon_remote import serve

print("chatty plugin listening, token tok_CHATTY_SECRET", file=sys.stderr, flush=True)
print("chatty plugin stdout line", flush=True)
serve(NOTES_SOURCE, os.environ["MNEMON_PLUGIN_MANIFEST"], data_dir=tempfile.mkdtemp())
"""


def test_a_launched_plugins_output_stays_out_of_the_commands_own(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "chatty"
    shutil.copytree(PLUGINS / "notes", plugin)
    (plugin / "serve_notes.py").write_text(CHATTY, encoding="utf-8")
    notes = tmp_path / "notes.md"
    notes.write_text("Quiet notes.\n", encoding="utf-8")
    profile = PROFILE.format(notes=notes).replace("plugins/notes/", "plugins/chatty/")
    (tmp_path / "mnemon.toml").write_text(profile, encoding="utf-8")
    command = [str(Path(sys.executable).parent / "mnemon"), "--no-color"]
    environment = {**os.environ, "MNEMON_HOME": str(tmp_path / "home")}

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *arguments], cwd=tmp_path, capture_output=True, text=True,
            timeout=120, check=False, env=environment,
        )  # fmt: skip

    quiet = run("view", "--user", "ada")
    assert quiet.returncode == 0, quiet.stderr
    assert "Quiet notes." in quiet.stdout
    assert "chatty plugin" not in quiet.stdout + quiet.stderr
    loud = run("--debug", "view", "--user", "ada")
    assert loud.returncode == 0, loud.stderr
    # with --debug, each line under the plugin's own logger name, never on the View's stdout
    assert "mnemon.plugins.chatty: chatty plugin stdout line" in loud.stderr
    assert "mnemon.plugins.chatty: chatty plugin listening" in loud.stderr
    assert "chatty plugin" not in loud.stdout
