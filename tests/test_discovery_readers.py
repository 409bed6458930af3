"""Manifests of other plugin formats, read by the reader a distribution registers for them.

A third party's reader (`mnemon.manifest_readers`, named for the manifest file it reads) is
installed the way pip leaves a distribution, on the import path, and plugins of its format are
dropped into the project's folder or installed in the entry-point group the reader names.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemon import InstallError, discover_plugins

from .test_discovery import RAISES_ON_IMPORT, SECRET, drop_in, fake_distribution, greeting

# a reader of the made-up `acme-plugin.json`: its tools are hosted by an `acme-host` plugin
READER = textwrap.dedent(
    """
    import json

    def read(text):
        data = json.loads(text)
        if data.get("explode"):
            raise KeyError(data["explode"])
        return {
            "format": "acme",
            "id": data["id"],
            "version": data["version"],
            "display_name": data["id"].title(),
            "entries": [{"name": name, "plugin": "acme_tools:" + name} for name in data["tools"]],
            "hosted_by": {"plugin": "acme-host", "key": "tool", "kind": "tool",
                          "distribution": "acme-host"},
        }

    read.entry_point_groups = ("acme.plugins",)
    """
)


def acme(plugin_id: str, *tools: str, **more: object) -> str:
    return json.dumps({"id": plugin_id, "version": "3", "tools": list(tools), **more})


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The reader's distribution installed on the import path."""
    folder = tmp_path / "site"
    fake_distribution(
        folder,
        module_body=READER,
        package="acme_reader",
        entry_points="[mnemon.manifest_readers]\nacme-plugin.json = acme_reader:read\n",
    )
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in ("acme_reader", "acme_tools", "exploding_reader"):
        sys.modules.pop(name, None)


def test_a_drop_in_of_another_format_is_read_by_its_reader(site: Path, tmp_path: Path) -> None:
    drop_in(
        tmp_path / ".mnemon" / "plugins", "acme", acme("hammers", "hammer"), name="acme-plugin.json"
    )
    found = discover_plugins(project_dir=tmp_path).get("hammers")
    assert found is not None
    assert found.manifest is not None
    assert (found.status, found.origin, found.manifest.format) == ("available", "project", "acme")
    assert found.manifest.as_json()["requires"] == {"acme": None}
    assert [(e.name, e.plugin) for e in found.manifest.entries] == [("hammer", "acme_tools:hammer")]
    # used by name through the plugin that hosts it, never mounted itself
    with pytest.raises(InstallError, match="mount the acme-host plugin with tool = 'hammer'"):
        found.load()
    # without the reader's distribution the file is not a manifest mnemon knows
    sys.path.remove(str(site))
    sys.modules.pop("acme_reader", None)
    assert discover_plugins(project_dir=tmp_path).get("hammers") is None


def test_the_reader_names_the_entry_point_group_of_its_format(site: Path, tmp_path: Path) -> None:
    package = site / "acme_tools"
    package.mkdir()
    (package / "__init__.py").write_text(RAISES_ON_IMPORT, encoding="utf-8")
    (package / "acme-plugin.json").write_text(acme("tools", "saw"), encoding="utf-8")
    info = site / "acme_tools-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text("[acme.plugins]\ntools = acme_tools\n", "utf-8")
    found = discover_plugins(project_dir=tmp_path).get("tools")
    assert found is not None
    assert (found.status, found.origin, found.distribution) == (
        "available",
        "entry-point",
        "acme-tools",
    )
    assert found.location == package / "acme-plugin.json"
    assert "acme_tools" not in sys.modules  # read, not imported


def test_a_manifest_its_reader_refuses_is_broken_and_quotes_nothing(
    site: Path, tmp_path: Path
) -> None:
    root = tmp_path / ".mnemon" / "plugins"
    drop_in(root, "bad-id", acme("Not An Id", "x"), name="acme-plugin.json")
    drop_in(root, "explodes", acme("boom", "x", explode=SECRET), name="acme-plugin.json")
    drop_in(root, "not-json", "{" + SECRET, name="acme-plugin.json")
    greeting(root, "good", "good")
    found = {
        plugin.location.parent.name: plugin for plugin in discover_plugins(project_dir=tmp_path)
    }
    assert (found["bad-id"].status, found["bad-id"].problem) == ("broken", "invalid-manifest")
    assert found["bad-id"].detail is not None
    assert found["bad-id"].detail.startswith("id: ")
    for folder, failure in (("explodes", "KeyError"), ("not-json", "JSONDecodeError")):
        plugin = found[folder]
        assert (plugin.status, plugin.problem) == ("broken", "invalid-manifest")
        assert plugin.detail == f"its reader failed ({failure})"
    assert found["good"].status == "available"


def test_a_reader_that_cannot_be_imported_breaks_only_the_files_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    fake_distribution(
        site,
        module_body=RAISES_ON_IMPORT,
        package="exploding_reader",
        entry_points="[mnemon.manifest_readers]\nacme-plugin.json = exploding_reader:read\n",
    )
    monkeypatch.syspath_prepend(str(site))
    root = tmp_path / ".mnemon" / "plugins"
    drop_in(root, "acme", acme("hammers", "hammer"), name="acme-plugin.json")
    greeting(root, "good", "good")
    found = {
        plugin.location.parent.name: plugin for plugin in discover_plugins(project_dir=tmp_path)
    }
    broken = found["acme"]
    assert (broken.status, broken.problem) == ("broken", "unreadable")
    assert broken.detail == (
        "its reader exploding_reader:read (exploding-reader) failed to import (RuntimeError)"
    )
    assert found["good"].status == "available"
