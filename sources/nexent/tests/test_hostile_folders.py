"""Hostile provider directories: alias bombs, deep nesting, dangling symlinks, deep trees.

A broken entry is one plugin's coded problem or is skipped; it never fails a turn and never hides
the other plugins. The pytest timeout guards the bounded time of every refusal.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mnemon_source_nexent as nexent
import pytest
from mnemon_source_nexent import PluginProblem, ProviderDirectory
from nexent_fake import PLUGINS, FakeService

from mnemon_testing import MemoryCompositionRunner, SelectAll

SCOPE = {"user_id": "ada", "tenant_id": "acme"}
GOOD = """\
name: {name}
version: "1"
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


# past the nesting bound (48): a default no JSON value in mnemon could hold
DEEP_DEFAULT = "{a: " * 60 + "1" + "}" * 60


def alias_bomb(name: str) -> str:
    # nine levels of ten aliases: 10**9 strings once anything walks `description`
    lines = [f"name: {name}", 'version: "1"', "entry_point: provider.py", "class_name: Provider",
             "implements: [searchable]", 'l0: &l0 ["lol"]']  # fmt: skip
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]")
    lines.append("description: *l9")
    return "\n".join(lines) + "\n"


def plugin(root: Path, folder: str, manifest: str, code: str = CODE) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "plugin.yaml").write_text(manifest, encoding="utf-8")
    (path / "provider.py").write_text(code, encoding="utf-8")
    return path


def settle(path: Path) -> None:
    """Date `path` back a minute, as a folder nobody touched lately."""
    stamp = path.stat()
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns - 60_000_000_000))


@pytest.fixture
def service() -> Iterator[FakeService]:
    fake = FakeService()
    yield fake
    fake.close()


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param(alias_bomb("bad"), id="alias-bomb"),
        pytest.param(
            GOOD.format(name="bad") + "description: " + "[" * 3000 + "]" * 3000 + "\n",
            id="nested-3000-deep",
        ),
        pytest.param(
            GOOD.format(name="bad") + f"config_schema:\n  - key: k\n    default: {DEEP_DEFAULT}\n",
            id="default-nested-60-deep",
        ),
    ],
)
def test_an_alias_bomb_or_deep_nesting_is_invalid_yaml_and_hides_no_other(
    tmp_path: Path, manifest: str
) -> None:
    plugin(tmp_path, "bad", manifest)
    plugin(tmp_path, "good", GOOD.format(name="good"))
    directory = ProviderDirectory(tmp_path)
    assert directory.refresh()
    assert directory.problems == [PluginProblem("bad", "invalid_yaml")]
    assert list(directory.plugins) == ["good"]


def test_dangling_symlinks_loops_and_odd_names_never_fail_the_scan(tmp_path: Path) -> None:
    good = plugin(tmp_path, "good", GOOD.format(name="good"))
    # an editor's lock files: dangling symlinks, in the directory and in a plugin folder
    (tmp_path / ".#plugin.yaml").symlink_to("user@host.1234")
    (good / ".#plugin.yaml").symlink_to("user@host.1234")
    deep = good / "node_modules" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / ".#index.js").symlink_to("user@host.1234")
    (tmp_path / "looped-folder").symlink_to("looped-folder")
    manifest_loop = tmp_path / "manifest-loop"
    manifest_loop.mkdir()
    (manifest_loop / "plugin.yaml").symlink_to("plugin.yaml")
    entry_loop = plugin(tmp_path, "entry-loop", GOOD.format(name="entry-loop"))
    (entry_loop / "provider.py").unlink()
    (entry_loop / "provider.py").symlink_to("provider.py")
    os.mkdir(os.fsencode(tmp_path) + b"/caf\xe9")  # a name that is not UTF-8
    directory = ProviderDirectory(tmp_path)
    assert directory.refresh()
    assert list(directory.plugins) == ["good"]
    assert directory.problems == [PluginProblem("entry-loop", "missing_entry_file", "entry_point")]
    assert not directory.refresh()


def test_an_unchanged_directory_is_not_walked_and_a_new_plugin_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = plugin(tmp_path, "good", GOOD.format(name="good"))
    deep = good / "vendor"
    for level in range(20):
        deep = deep / f"level{level}"
        deep.mkdir(parents=True)
        for index in range(10):
            (deep / f"file{index}.txt").write_text("unrelated", encoding="utf-8")
    settle(tmp_path)
    directory = ProviderDirectory(tmp_path)
    # no public way shows what a scan looks at: the two calls that reach the disk are watched
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(os, "scandir", watched(os.scandir, seen))
    monkeypatch.setattr(os, "stat", watched(os.stat, seen))
    assert directory.refresh()
    assert list(directory.plugins) == ["good"]
    assert seen
    assert not [path for _, path in seen if "vendor" in path]  # never below a plugin's folder
    seen.clear()
    assert not directory.refresh()
    assert "scandir" not in [call for call, _ in seen]  # an unchanged listing is not read again
    plugin(tmp_path, "later", GOOD.format(name="later"))
    assert directory.refresh()
    assert sorted(directory.plugins) == ["good", "later"]


def watched(function: Callable[..., Any], seen: list[tuple[str, str]]) -> Callable[..., Any]:
    """`function`, noting its name and the path of each call in `seen`."""

    def call(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
        seen.append((function.__name__, "" if isinstance(path, int) else os.fsdecode(path)))
        return function(path, *args, **kwargs)

    return call


async def test_a_hostile_directory_never_fails_a_turn_and_a_later_provider_is_served(
    tmp_path: Path, service: FakeService
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / ".#plugin.yaml").symlink_to("user@host.1234")
    plugin(plugins, "bomb", alias_bomb("bomb"))
    strategy = SelectAll()
    runner = MemoryCompositionRunner()
    config = {
        "plugin_dir": str(plugins),
        "plugin": {"name": "reference", "endpoint": service.url, "api_key": "sk-test-0123456789"},
        "nexent_shim": True,
        "data_dir": str(tmp_path / "data"),
    }
    await runner.mount(nexent, instance_id="mem", config=config)
    await runner.mount(strategy, instance_id="all", config={"required": False})
    async with runner:
        turn = await runner.begin_turn({"scope": SCOPE})
        await turn.release()
        assert {(c.facts.availability, c.facts.reason) for c in strategy.seen} == {
            ("unavailable", "provider-not-found")
        }
        shutil.copytree(PLUGINS / "reference", plugins / "reference")
        (plugins / "reference" / ".#provider.py").symlink_to("user@host.1234")
        turn = await runner.begin_turn({"scope": SCOPE})
        assert [r.route_id for r in turn.view.routes] == ["search"]
        await turn.release()
        status = await runner.management_client("source:mem", SCOPE).read("status", {})
    assert list(status["problems"]) == [{"folder": "bomb", "code": "invalid_yaml", "field": None}]
