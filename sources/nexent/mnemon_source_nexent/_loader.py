"""A Nexent provider directory: each child folder with a `plugin.yaml`, read without importing.

Problems are coded per plugin and never hide the other plugins. The entry module is imported
only when an instance is built, under a module name of its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "ConfigField",
    "PluginProblem",
    "PluginRecord",
    "ProviderDirectory",
    "build_provider",
    "directory_fingerprint",
]

REQUIRED = ("name", "version", "entry_point", "class_name", "implements")
CAPABILITIES = ("searchable", "ingestible")
METHOD_OF = {"searchable": "search", "ingestible": "ingest"}
FIELD_TYPES = ("string", "secret", "number", "boolean", "url")


@dataclass(frozen=True)
class PluginProblem:
    """One coded problem of one plugin folder (`field` names the key when there is one)."""

    folder: str
    code: str
    field: str | None = None


@dataclass(frozen=True)
class ConfigField:
    """One `config_schema` entry."""

    key: str
    type: str = "string"
    label: str = ""
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class PluginRecord:
    """A plugin as its `plugin.yaml` declares it; nothing of its code is loaded."""

    folder: Path
    name: str
    version: str
    entry_point: str
    class_name: str
    implements: tuple[str, ...]
    description: str = ""
    config_schema: tuple[ConfigField, ...] = ()
    fingerprint: str = ""

    @property
    def entry_file(self) -> Path:
        """The entry module's file."""
        return self.folder / self.entry_point


@dataclass
class ProviderDirectory:
    """The plugins of one folder; `refresh()` rescans only when the folder's fingerprint moved."""

    root: Path
    plugins: dict[str, PluginRecord] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)
    fingerprint: str | None = None

    def refresh(self) -> bool:
        """Rescan if any path, size or mtime changed; True when it rescanned (blocking)."""
        current = directory_fingerprint(self.root)
        if current == self.fingerprint:
            return False
        self.plugins, self.problems = _scan(self.root)
        self.fingerprint = current
        return True


def directory_fingerprint(root: Path) -> str:
    """A digest of every path, size and mtime under `root` (blocking)."""
    digest = hashlib.sha256()
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            stat = path.stat()
            digest.update(
                f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


def _scan(root: Path) -> tuple[dict[str, PluginRecord], list[PluginProblem]]:
    plugins: dict[str, PluginRecord] = {}
    problems: list[PluginProblem] = []
    if not root.is_dir():
        return plugins, problems
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        manifest = folder / "plugin.yaml"
        if not manifest.is_file():
            continue
        record, found = _read(folder, manifest)
        problems.extend(found)
        if record is not None:
            if record.name in plugins:
                problems.append(PluginProblem(folder.name, "duplicate_name", "name"))
            else:
                plugins[record.name] = record
    return plugins, problems


def _read(folder: Path, manifest: Path) -> tuple[PluginRecord | None, list[PluginProblem]]:
    name = folder.name
    try:
        data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return None, [PluginProblem(name, "invalid_yaml")]
    if not isinstance(data, dict):
        return None, [PluginProblem(name, "invalid_yaml")]
    problems = [
        PluginProblem(name, "missing_field", key)
        for key in REQUIRED
        if data.get(key) in (None, "", [])
    ]
    implements = data.get("implements")
    if implements is not None and not isinstance(implements, list):
        problems.append(PluginProblem(name, "implements_not_list", "implements"))
    elif isinstance(implements, list):
        problems.extend(
            PluginProblem(name, "unknown_implements", "implements")
            for entry in implements
            if entry not in CAPABILITIES
        )
    entry_point = data.get("entry_point")
    if isinstance(entry_point, str) and entry_point:
        entry = (folder / entry_point).resolve()
        inside = entry.is_relative_to(folder.resolve())
        if not inside or entry.suffix != ".py" or not entry.is_file():
            problems.append(PluginProblem(name, "missing_entry_file", "entry_point"))
    schema, schema_problems = _schema(name, data.get("config_schema"))
    problems.extend(schema_problems)
    if problems:
        return None, problems
    return (
        PluginRecord(
            folder=folder,
            name=str(data["name"]),
            version=str(data["version"]),
            entry_point=str(entry_point),
            class_name=str(data["class_name"]),
            implements=tuple(dict.fromkeys(implements or ())),
            description=str(data.get("description") or ""),
            config_schema=schema,
            fingerprint=directory_fingerprint(folder),
        ),
        [],
    )


def _schema(name: str, raw: object) -> tuple[tuple[ConfigField, ...], list[PluginProblem]]:
    if raw is None:
        return (), []
    if not isinstance(raw, list):
        return (), [PluginProblem(name, "invalid_config_schema", "config_schema")]
    fields: list[ConfigField] = []
    for entry in raw:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("key"), str)
            or entry.get("type", "string") not in FIELD_TYPES
        ):
            return (), [PluginProblem(name, "invalid_config_schema", "config_schema")]
        fields.append(
            ConfigField(
                key=entry["key"],
                type=entry.get("type", "string"),
                label=str(entry.get("label") or ""),
                required=bool(entry.get("required", False)),
                default=entry.get("default"),
            )
        )
    return tuple(fields), []


def build_provider(record: PluginRecord, config: dict[str, Any]) -> tuple[Any, list[str]]:
    """Import the entry module under its own name and make the provider (blocking).

    Returns the instance and the problem codes (`missing_class`, `missing_method`); with a
    problem the instance is None.
    """
    safe = re.sub(r"\W", "_", record.name)
    # the parent is a plain namespace: a plugin's module never shadows an installed package
    sys.modules.setdefault("_mnemon_nexent_plugins", types.ModuleType("_mnemon_nexent_plugins"))
    module_name = f"_mnemon_nexent_plugins.{safe}_{record.fingerprint[:16]}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, record.entry_file)
        if spec is None or spec.loader is None:
            return None, ["missing_entry_file"]
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    provider_class: Any = getattr(module, record.class_name, None)
    if not inspect.isclass(provider_class):
        return None, ["missing_class"]
    missing = [
        METHOD_OF[capability]
        for capability in record.implements
        if not inspect.iscoroutinefunction(getattr(provider_class, METHOD_OF[capability], None))
    ]
    if missing:
        return None, ["missing_method"]
    make: Any = provider_class  # a plugin's class: its constructor takes the configuration
    return make(config), []
