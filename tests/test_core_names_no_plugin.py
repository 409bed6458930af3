"""The core names no plugin: no first-party plugin's distribution or import name is a string in it.

What the core needs from a plugin comes through a contract or an entry-point group any plugin
could use. The names are read from the plugins' own `pyproject.toml` files (their distribution
names and the packages their wheels ship), with the family prefixes several of them share
(`mnemon-source-`, `mnemon_strategy_`, ...), so a new plugin is covered without editing this test.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "mnemon"
PLUGIN_FOLDERS = ("sources", "strategies", "integrations", "embedders", "examples")

# Files that still name plugins while the rest of issue 30 lands on other branches; each is
# fixed there, and this list is emptied once they are merged. Nothing may be added to it.
NOT_YET = {}


def _plugin_projects() -> list[dict[str, object]]:
    return [
        tomllib.loads(path.read_text(encoding="utf-8"))
        for folder in PLUGIN_FOLDERS
        for path in sorted((ROOT / folder).glob("*/pyproject.toml"))
    ]


def plugin_names() -> tuple[set[str], set[str]]:
    """The plugins' distribution and import names, and the prefixes of their families."""
    names: set[str] = set()
    for project in _plugin_projects():
        names.add(project["project"]["name"])  # type: ignore[index]
        wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]  # type: ignore[index]
        names.update(wheel["packages"])
    # a family: two words (mnemon-source) that begin several plugins' names
    heads = Counter(
        "-".join(re.split(r"[-_]", name)[:2]) for name in names if len(re.split(r"[-_]", name)) > 2
    )
    families = {head for head, count in heads.items() if count > 2}
    return names, families


def pattern() -> re.Pattern[str]:
    names, families = plugin_names()
    spelled = [re.escape(name) for name in sorted(names, key=len, reverse=True)]
    # a family's prefix begins a name (`mnemon_strategy_x`) or stands alone (`mnemon_strategy`),
    # but `mnemon-source.yaml` is a file name of the remote protocol, not a plugin
    spelled += [
        re.escape(head).replace(r"\-", "[-_]") + r"(?:(?=[-_]\w)|(?![\w.-]))" for head in families
    ]
    return re.compile(r"(?<![\w-])(?:" + "|".join(spelled) + r")(?![\w])")


def strings_of(path: Path) -> list[str]:
    """Every string literal of a module, docstrings included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_the_names_are_read_from_the_plugins_projects() -> None:
    names, families = plugin_names()
    # a check that found no plugin would pass on anything
    assert {"mnemon-remote", "mnemon_mcp", "mnemon-source-raven"} <= names
    assert {"mnemon-source", "mnemon-strategy"} <= families
    found = pattern()
    for text in ("mnemon_strategy", "pip install mnemon-remote", "mnemon_source_raven.x"):
        assert found.search(text), text
    for text in ("mnemon-runtime", "mnemon-plugin.toml", "mnemon.plugins", "mnemon_home"):
        assert not found.search(text), text


def test_no_module_of_the_core_names_a_plugin() -> None:
    found = pattern()
    offenders = {}
    for path in sorted(CORE.rglob("*.py")):
        relative = path.relative_to(CORE).as_posix()
        named = sorted({match for text in strings_of(path) for match in found.findall(text)})
        if named and relative not in NOT_YET:
            offenders[relative] = named
    assert offenders == {}


def test_a_file_leaves_the_list_once_it_names_no_plugin() -> None:
    # the list only shrinks: a fixed file still on it would hide a new offence
    found = pattern()
    for relative in sorted(NOT_YET):
        named = {match for text in strings_of(CORE / relative) for match in found.findall(text)}
        assert named, f"{relative} names no plugin now: take it off NOT_YET"
