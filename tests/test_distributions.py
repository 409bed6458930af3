"""Every distribution of the repository declares what it imports and bounds its core version."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted(
    path
    for pattern in ("testing", "sources/*", "strategies/*", "examples/*", "integrations/*")
    for path in ROOT.glob(f"{pattern}/pyproject.toml")
)
_NAME = re.compile(r"^[A-Za-z0-9._-]+")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(project: dict[str, Any], *, extras: bool = False) -> dict[str, str]:
    requirements = list(project.get("dependencies", []))
    if extras:  # an import made only for an optional feature may come from its extra
        for optional in project.get("optional-dependencies", {}).values():
            requirements.extend(optional)
    declared = {}
    for requirement in requirements:
        match = _NAME.match(requirement)
        assert match, requirement
        declared[_normalized(match.group())] = requirement
    return declared


def _imported_top_level(package: Path) -> set[str]:
    names: set[str] = set()
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_distribution_declares_every_package_it_imports(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    packages = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["packages"]
    declared = _declared(project, extras=True)
    owners = packages_distributions()
    missing = []
    for package in packages:
        own = Path(package).name
        for name in sorted(_imported_top_level(pyproject.parent / package)):
            if name in sys.stdlib_module_names or name in (own, "__future__"):
                continue
            # an editable install lists no package files: the core's import name is known here
            default = ["mnemon-runtime"] if name == "mnemon" else [name]
            distributions = {_normalized(d) for d in owners.get(name, default)}
            if not distributions & set(declared):
                missing.append(f"{name} (from {', '.join(sorted(distributions))})")
    assert missing == [], f"{pyproject.parent.name} imports undeclared packages: {missing}"


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_distribution_bounds_the_core_it_was_written_for(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    core = _declared(project).get("mnemon-runtime")
    assert core is not None, "every plugin depends on the core"
    assert ">=" in core, f"{core!r}: a lower bound"
    assert "<" in core.replace("<=", ""), f"{core!r}: an upper bound below the next minor"


def _plugin_distributions() -> list[Path]:
    return [
        path
        for path in PYPROJECTS
        if "mnemon.plugins"
        in tomllib.loads(path.read_text(encoding="utf-8"))["project"].get("entry-points", {})
    ]


@pytest.mark.parametrize(
    "pyproject", _plugin_distributions(), ids=lambda p: str(p.parent.relative_to(ROOT))
)
def test_a_plugin_ships_a_manifest_matching_its_distribution(pyproject: Path) -> None:
    from mnemon import __version__
    from mnemon.versions import parse_range

    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = data["project"]
    [(name, module)] = project["entry-points"]["mnemon.plugins"].items()
    # the plugin's package first (mnemon-source-raven also ships its manifest reader)
    package = data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"][0]
    manifest = tomllib.loads((pyproject.parent / package / "mnemon-plugin.toml").read_text("utf-8"))
    plugin = manifest["plugin"]
    assert plugin["id"] == name, "the manifest id is the entry point's name"
    assert plugin["version"] == project["version"]
    assert parse_range(plugin["mnemon"]).admits(__version__)
    assert [entry["plugin"].partition(":")[0] for entry in plugin["contributes"]["entries"]] == [
        module
    ]


def test_the_core_is_released_as_mnemon_runtime() -> None:
    core = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert core["name"] == "mnemon-runtime"  # `mnemon` on PyPI is an unrelated project


@pytest.mark.parametrize(
    "pyproject",
    [ROOT / "pyproject.toml", *PYPROJECTS],
    ids=lambda p: str(p.parent.relative_to(ROOT)),
)
def test_a_distribution_ships_its_type_information(pyproject: Path) -> None:
    # every package is checked with mypy --strict here; without the PEP 561 marker a plugin
    # author's type checker ignores those types ("missing library stubs or py.typed marker")
    wheel = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]
    for package in wheel["packages"]:
        assert (pyproject.parent / package / "py.typed").is_file(), f"{package}: no py.typed"
