"""`mnemon init` and `mnemon demo` name plugins by id; `[standard]` installs exactly those."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from mnemon import load_profile
from tests.test_cli import mnemon

ROOT = Path(__file__).resolve().parents[1]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_of_plugin() -> dict[str, str]:
    """Each plugin id of the repository's distributions -> the distribution registering it."""
    owners = {}
    for pyproject in ROOT.glob("*/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        for plugin_id in project.get("entry-points", {}).get("mnemon.plugins", {}):
            owners[plugin_id] = _normalized(project["name"])
    return owners


def test_the_starter_profile_names_its_plugins_by_id_and_loads(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init").returncode == 0
    profile = load_profile(tmp_path / "mnemon.toml")
    assert all(entry.plugin is not None and not entry.use for entry in profile.entries)
    assert profile.settings.strategy_type_id == "layered"


def test_the_standard_extra_installs_what_init_and_demo_name(tmp_path: Path) -> None:
    assert mnemon(tmp_path, "init").returncode == 0
    written = tomllib.loads((tmp_path / "mnemon.toml").read_text(encoding="utf-8"))
    named = {entry["plugin"] for entry in written["entries"]}
    assert "minilm" in named  # the offline embedder `init` mounts when it is installed
    owners = _distribution_of_plugin()
    core = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    standard = core["optional-dependencies"]["standard"]
    installed = {_normalized(re.split(r"[\[<>=~!; ]", item)[0]) for item in standard}
    assert "mnemon-runtime[cli]" in standard  # the command itself
    assert installed - {"mnemon-runtime"} == {owners[plugin_id] for plugin_id in named}


BROKEN_RUNTIME = """
[plugin]
id = "clash"
version = "1.0.0"
display_name = "Clash"
description = "Contributes an entry name the runtime plugin already contributes."
mnemon = ">=0.1.0 <9.0.0"

[[plugin.contributes.entries]]
name = "runtime"
plugin = "clash"
"""


def test_init_and_demo_without_the_starter_plugins_write_nothing_and_name_standard(
    tmp_path: Path,
) -> None:
    # two manifests contributing one entry name leave the runtime plugin unusable here
    drop_in = tmp_path / ".mnemon" / "plugins" / "clash"
    drop_in.mkdir(parents=True)
    (drop_in / "mnemon-plugin.toml").write_text(BROKEN_RUNTIME, encoding="utf-8")
    result = mnemon(tmp_path, "init")
    assert result.returncode == 1
    assert "the starter profile's plugins cannot be loaded: runtime (broken)" in result.stderr
    assert "nothing was written" in result.stderr
    assert "pip install 'mnemon-runtime[standard]'" in result.stderr
    assert result.stderr.rstrip().endswith("then mnemon init")
    assert not (tmp_path / "mnemon.toml").exists()
    as_json = mnemon(tmp_path, "init", "--force", "--json")
    assert json.loads(as_json.stdout)["error"]["code"] == "missing-plugins"
    assert "then mnemon init --force" in json.loads(as_json.stdout)["error"]["message"]
    demo = mnemon(tmp_path, "demo", "--directory", ".")
    assert demo.returncode == 1
    assert "runtime (broken)" in demo.stderr
    assert demo.stderr.rstrip().endswith("then mnemon demo")
    assert not (tmp_path / "mnemon.toml").exists()
