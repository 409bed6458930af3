"""First-party manifests agree with their plugins: schemas, versions, core ranges and labels."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from mnemon import discover_plugins, load_profile
from mnemon._cli._starter import starter_profile

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = sorted(
    path.relative_to(ROOT).as_posix()
    for folder in ("sources", "strategies", "integrations", "examples", "embedders")
    for path in (ROOT / folder).glob("*/mnemon_*/mnemon-plugin.toml")
)


def schemas_tool() -> ModuleType:
    """`.ci/config_schemas.py`, the tool `make config-schemas` runs."""
    spec = importlib.util.spec_from_file_location("config_schemas", ROOT / ".ci/config_schemas.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(manifest: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / manifest).read_text(encoding="utf-8"))["plugin"]  # type: ignore[no-any-return]


def test_every_first_party_plugin_is_covered() -> None:
    # every first-party manifest's schema comes from its plugin's configuration model
    assert set(schemas_tool().MODELS) == set(MANIFESTS)
    assert len(MANIFESTS) == 17


def test_every_config_schema_is_generated_from_the_current_model() -> None:
    assert schemas_tool().stale() == [], "run `make config-schemas` and commit the manifests"


def test_a_schema_edited_by_hand_is_found_stale_and_regenerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = schemas_tool()
    for manifest in tool.MODELS:
        (tmp_path / manifest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / manifest, tmp_path / manifest)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    edited = tmp_path / "sources/runtime/mnemon_source_runtime/mnemon-plugin.toml"
    text = edited.read_text(encoding="utf-8")
    edited.write_text(text.replace("maximum = 16777216", "maximum = 1"), encoding="utf-8")
    assert tool.stale() == ["sources/runtime/mnemon_source_runtime/mnemon-plugin.toml"]
    assert tool.main(["--check"]) == 1
    assert "mnemon-plugin.toml: config_schema is stale" in capsys.readouterr().err
    assert tool.main([]) == 0
    assert edited.read_text(encoding="utf-8") == text
    assert tool.stale() == []


def test_every_generated_key_is_labelled_described_and_names_its_input() -> None:
    # what a form drawn from the manifest alone, without the plugin's code, needs
    inputs = {
        "number", "text", "textarea", "string-list", "source-list", "boolean", "choice", "path",
        "secret", "json",
    }  # fmt: skip
    for manifest in schemas_tool().MODELS:
        schema = read(manifest)["contributes"]["entries"][0]["config_schema"]
        for key, member in schema["properties"].items():
            where = f"{manifest}: {key}"
            assert member.get("title"), where
            assert member.get("description"), where
            assert member.get("x-mnemon-input") in inputs, where
            if member["x-mnemon-input"] == "secret":
                assert "default" not in member, where


def test_discovery_reads_every_generated_schema(tmp_path: Path) -> None:
    discovered = {
        plugin.id: plugin
        for plugin in discover_plugins(project_dir=tmp_path, user_dir=tmp_path / "none")
        if plugin.status == "available"
    }
    for manifest in schemas_tool().MODELS:
        declared = read(manifest)
        plugin = discovered[declared["id"]]
        assert plugin.manifest is not None
        [entry] = plugin.manifest.as_json()["entries"]
        assert entry["config_schema"] == declared["contributes"]["entries"][0]["config_schema"]
        assert entry["config_schema"]["additionalProperties"] is False


def test_the_starter_profile_fits_the_schemas_it_names(tmp_path: Path) -> None:
    profile = tmp_path / "mnemon.toml"
    profile.write_text(starter_profile(), encoding="utf-8")
    schemas: dict[str, Any] = {}
    for manifest in schemas_tool().MODELS:
        declared = read(manifest)
        schema = declared["contributes"]["entries"][0]["config_schema"]
        # an entry names its plugin by id (the starter does) or by import path (`use =`)
        schemas[declared["id"]] = schemas[declared["contributes"]["entries"][0]["plugin"]] = schema
    checked = 0
    for entry in load_profile(profile).entries:
        schema = schemas.get(entry.plugin or entry.use or "")
        if schema is None:
            continue
        jsonschema.Draft202012Validator(schema).validate(thawed(entry.config))
        checked += 1
    assert checked >= 3


def thawed(value: Any) -> Any:
    """A profile's frozen configuration as JSON data (tuples are JSON arrays)."""
    if isinstance(value, Mapping):
        return {key: thawed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thawed(item) for item in value]
    return value


def _range(specifiers: SpecifierSet) -> set[tuple[str, tuple[int, ...]]]:
    def padded(version: str) -> tuple[int, ...]:
        parts = tuple(int(part) for part in version.split("."))
        return parts + (0,) * (3 - len(parts))

    return {(spec.operator, padded(spec.version)) for spec in specifiers}


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda m: m.split("/")[1])
def test_pyproject_manifest_and_descriptor_agree(manifest: str) -> None:
    declared = read(manifest)
    project = tomllib.loads(
        (ROOT / manifest).parents[1].joinpath("pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    assert declared["version"] == project["version"]
    [core] = [
        Requirement(dependency)
        for dependency in project["dependencies"]
        if Requirement(dependency).name == "mnemon-runtime"
    ]
    assert _range(core.specifier) == _range(SpecifierSet(declared["mnemon"].replace(" ", ",")))
    target = declared["contributes"]["entries"][0]["plugin"]
    module, _, attribute = target.partition(":")
    plugin = importlib.import_module(module)
    if attribute:
        plugin = getattr(plugin, attribute)
    descriptor = plugin.memory_plugin
    assert descriptor.package_name == project["name"]
    assert descriptor.label == declared["display_name"]
