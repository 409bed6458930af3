"""The provider directory: one coded problem per broken plugin, never hiding the others."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from mnemon_source_nexent import PluginProblem, ProviderDirectory, build_provider

GOOD = """\
name: {name}
version: "{version}"
entry_point: provider.py
class_name: Provider
implements: [searchable]
"""
CODE = """\
class Provider:
    def __init__(self, config):
        self.config = config

    async def search(self, request):
        return []
"""


def plugin(root: Path, folder: str, manifest: str, code: str | None = CODE) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "plugin.yaml").write_text(textwrap.dedent(manifest), encoding="utf-8")
    if code is not None:
        (path / "provider.py").write_text(code, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("manifest", "code", "problem"),
    [
        ("name: [unclosed\n", CODE, PluginProblem("bad", "invalid_yaml")),
        ("- just\n- a list\n", CODE, PluginProblem("bad", "invalid_yaml")),
        (GOOD.replace("class_name: Provider\n", ""), CODE,
         PluginProblem("bad", "missing_field", "class_name")),
        (GOOD.replace("[searchable]", "searchable"), CODE,
         PluginProblem("bad", "implements_not_list", "implements")),
        (GOOD.replace("[searchable]", "[searchable, teleport]"), CODE,
         PluginProblem("bad", "unknown_implements", "implements")),
        (GOOD, None, PluginProblem("bad", "missing_entry_file", "entry_point")),
        (GOOD.replace("provider.py", "../escape.py"), CODE,
         PluginProblem("bad", "missing_entry_file", "entry_point")),
    ],
    ids=["invalid-yaml", "not-a-mapping", "missing-field", "implements-not-list",
         "unknown-implements", "missing-entry-file", "entry-outside-folder"],
)  # fmt: skip
def test_each_manifest_problem_is_coded_and_never_hides_the_others(
    tmp_path: Path, manifest: str, code: str | None, problem: PluginProblem
) -> None:
    plugin(tmp_path, "bad", manifest.format(name="bad", version="1"), code)
    plugin(tmp_path, "good", GOOD.format(name="good", version="1"))
    directory = ProviderDirectory(tmp_path)
    assert directory.refresh()
    assert problem in directory.problems
    assert list(directory.plugins) == ["good"]


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        (CODE.replace("class Provider", "class Other"), "missing_class"),
        (CODE.replace("async def search", "def search"), "missing_method"),
        (CODE.replace("async def search", "async def lookup"), "missing_method"),
    ],
    ids=["missing-class", "search-not-a-coroutine", "no-search"],
)
def test_class_problems_are_found_when_an_instance_is_built(
    tmp_path: Path, code: str, problem: str
) -> None:
    plugin(tmp_path, "p", GOOD.format(name="p", version="1"), code)
    directory = ProviderDirectory(tmp_path)
    directory.refresh()
    instance, problems = build_provider(directory.plugins["p"], {})
    assert (instance, problems) == (None, [problem])


def test_the_entry_module_is_imported_only_when_built_under_its_own_name(tmp_path: Path) -> None:
    plugin(tmp_path, "lazy", GOOD.format(name="lazy", version="1"))
    directory = ProviderDirectory(tmp_path)
    directory.refresh()
    before = set(sys.modules)
    record = directory.plugins["lazy"]
    assert set(sys.modules) == before  # reading the manifest imports nothing
    instance, problems = build_provider(record, {"k": "v"})
    assert problems == []
    assert instance.config == {"k": "v"}
    loaded = [name for name in set(sys.modules) - before if "lazy" in name]
    assert loaded
    assert all(name.startswith("_mnemon_nexent_plugins.") for name in loaded)
    assert "provider" not in sys.modules


def test_plugins_are_added_and_updated_without_a_restart(tmp_path: Path) -> None:
    directory = ProviderDirectory(tmp_path)
    directory.refresh()
    assert directory.plugins == {}
    plugin(tmp_path, "later", GOOD.format(name="later", version="1"))
    assert directory.refresh()
    assert directory.plugins["later"].version == "1"
    assert not directory.refresh()  # nothing moved: no rescan
    manifest = tmp_path / "later" / "plugin.yaml"
    manifest.write_text(GOOD.format(name="later", version="2.0"), encoding="utf-8")
    stat = manifest.stat()
    os.utime(manifest, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert directory.refresh()
    assert directory.plugins["later"].version == "2.0"


def test_the_shim_serves_nexents_module_names_from_these_declarations() -> None:
    from mnemon_source_nexent import install_nexent_shim, models

    assert install_nexent_shim() in (True, False)
    from nexent.memory.models import MemorySearchRequest  # type: ignore[import-not-found]
    from nexent.memory.providers.retry import (  # type: ignore[import-not-found]
        DegradableProviderError,
    )

    assert MemorySearchRequest is models.MemorySearchRequest
    assert DegradableProviderError is models.DegradableProviderError
