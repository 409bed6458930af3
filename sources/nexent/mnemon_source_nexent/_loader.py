"""A Nexent provider directory: each child folder with a `plugin.yaml`, read without importing.

Problems are coded per plugin and never hide the other plugins. Only what the contract names is
looked at: the directory's direct child folders, each one's `plugin.yaml` and its entry file;
nothing below is walked. The entry module is imported only when an instance is built, under a
module name of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import math
import os
import re
import stat
import sys
import time
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mnemon.sdk import DefinitionError, parse_yaml

__all__ = [
    "ConfigField",
    "PluginProblem",
    "PluginRecord",
    "ProviderDirectory",
    "build_provider",
    "config_problems",
]

MANIFEST = "plugin.yaml"
# a folder added within the clock tick of a listing leaves the mtime as it was: a listing of a
# folder changed this recently is used once, not cached
_SETTLE_NS = 2_000_000_000
REQUIRED = ("name", "version", "entry_point", "class_name", "implements")
CAPABILITIES = ("searchable", "ingestible")
METHOD_OF = {"searchable": "search", "ingestible": "ingest"}
# a field's declared type, by the names a plugin may use for it; a type not listed here is
# accepted and left unchecked (the contract does not close the list)
FIELD_TYPES = {
    "string": "string",
    "text": "string",
    "textarea": "string",
    "secret": "secret",
    "password": "secret",
    "number": "number",
    "integer": "integer",
    "int": "integer",
    "float": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "url": "url",
}
_TRUE_FALSE = {"true": True, "false": False}


@dataclass(frozen=True)
class PluginProblem:
    """One coded problem of one plugin folder (`field` names the key when there is one)."""

    folder: str
    code: str
    field: str | None = None
    #: the `name` its plugin.yaml gives, when it gives one: what a Source's entry names it by
    name: str | None = dataclasses.field(default=None, compare=False)  # `field` is taken above


@dataclass(frozen=True)
class ConfigField:
    """One `config_schema` entry."""

    key: str
    type: str = "string"
    """The declared type, as written."""
    label: str = ""
    required: bool = False
    default: Any = None

    @property
    def kind(self) -> str | None:
        """The type checked (`string`, `secret`, `number`, `integer`, `boolean`, `url`), if any."""
        return FIELD_TYPES.get(self.type)

    @property
    def secret(self) -> bool:
        """Whether the value is a credential: shown to people masked, nowhere else."""
        return self.kind == "secret"


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


@dataclass(frozen=True)
class _Folder:
    """One plugin folder as last read, with the stamps of the two files it was read from."""

    stamps: tuple[str, str]
    """`plugin.yaml`'s and the declared entry file's (`_stamp`)."""
    entry_file: Path | None
    record: PluginRecord | None
    problems: tuple[PluginProblem, ...]


@dataclass
class ProviderDirectory:
    """The plugins of one folder; `refresh()` re-reads only the plugin folders that changed."""

    root: Path
    plugins: dict[str, PluginRecord] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)
    fingerprint: str | None = None
    """A digest of the stamps the last refresh saw; None before the first."""
    _listing: tuple[str, tuple[str, ...]] | None = field(default=None, repr=False)
    _folders: dict[str, _Folder] = field(default_factory=dict, repr=False)

    def refresh(self) -> bool:
        """Re-read what changed; True when a folder came, went or was re-read (blocking).

        An unchanged directory costs a stat of itself and of each plugin's two files, however
        many files lie below: the listing is cached by the directory's own stat, and a plugin
        folder is re-read only when its `plugin.yaml` or its entry file changed. An entry that
        cannot be read (a dangling symlink, a loop, no permission) is skipped or reported as
        that plugin's problem; it never fails the refresh.
        """
        names = self._folder_names()
        changed = self.fingerprint is None or names != tuple(self._folders)
        folders: dict[str, _Folder] = {}
        for name in names:
            folder = self.root / name
            known = self._folders.get(name)
            if known is not None and known.stamps == (
                _stamp(folder / MANIFEST),
                _stamp(known.entry_file),
            ):
                folders[name] = known
            else:
                folders[name] = _read_folder(folder)
                changed = True
        if not changed:
            return False
        self._folders = folders
        self.plugins, self.problems = _collected(folders)
        digest = hashlib.sha256()
        for name, known in folders.items():
            digest.update(os.fsencode(f"{name}\0{known.stamps[0]}\0{known.stamps[1]}\n"))
        self.fingerprint = digest.hexdigest()
        return True

    def _folder_names(self) -> tuple[str, ...]:
        """The root's direct child folders, sorted; listed again only when the root changed."""
        try:
            found = self.root.stat()
        except (OSError, ValueError):
            self._listing = None
            return ()
        stamp = f"{found.st_dev}:{found.st_ino}:{found.st_mtime_ns}"
        if self._listing is not None and self._listing[0] == stamp:
            return self._listing[1]
        names = _child_folders(self.root)
        settled = time.time_ns() - found.st_mtime_ns > _SETTLE_NS
        self._listing = (stamp, names) if settled else None
        return names


def _child_folders(root: Path) -> tuple[str, ...]:
    names = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                try:
                    is_folder = entry.is_dir()  # follows a symlink; a loop raises
                except OSError:
                    continue
                # a name that is not text cannot be named by `plugin.name` nor reported
                if is_folder and entry.name != "__pycache__" and _is_text(entry.name):
                    names.append(entry.name)
    except OSError:
        return ()
    return tuple(sorted(names))


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _stamp(path: Path | None) -> str:
    """Identity, kind, size and modification time of `path`, or why it has none (blocking)."""
    if path is None:
        return "none"
    try:
        found = path.stat()
    except OSError as error:  # missing, dangling symlink, symlink loop, no permission
        return f"error:{error.errno}"
    except ValueError:  # a NUL in the name
        return "invalid"
    kind = stat.S_IFMT(found.st_mode)
    return f"{found.st_dev}:{found.st_ino}:{kind}:{found.st_size}:{found.st_mtime_ns}"


def _read_folder(folder: Path) -> _Folder:
    manifest = folder / MANIFEST
    # stamped before the read: a change while it is read is seen by the next refresh
    manifest_stamp = _stamp(manifest)
    if not manifest.is_file():
        return _Folder((manifest_stamp, _stamp(None)), None, None, ())
    record, problems, entry_file = _read(folder, manifest)
    entry_stamp = _stamp(entry_file)
    if record is not None:
        digest = hashlib.sha256(os.fsencode(f"{manifest_stamp}\0{entry_file}\0{entry_stamp}"))
        record = replace(record, fingerprint=digest.hexdigest())
    return _Folder((manifest_stamp, entry_stamp), entry_file, record, tuple(problems))


def _collected(
    folders: dict[str, _Folder],
) -> tuple[dict[str, PluginRecord], list[PluginProblem]]:
    plugins: dict[str, PluginRecord] = {}
    problems: list[PluginProblem] = []
    for name, known in folders.items():
        problems.extend(known.problems)
        record = known.record
        if record is not None:
            if record.name in plugins:
                problems.append(PluginProblem(name, "duplicate_name", "name"))
            else:
                plugins[record.name] = record
    return plugins, problems


def _read(
    folder: Path, manifest: Path
) -> tuple[PluginRecord | None, list[PluginProblem], Path | None]:
    """The folder's record, or its problems; and the entry file it declares, if any."""
    name = folder.name
    try:
        text = manifest.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, [PluginProblem(name, "invalid_yaml")], None
    except OSError:
        return None, [PluginProblem(name, "unreadable")], None
    try:
        data = parse_yaml(text)
    except DefinitionError:
        # not YAML, or an alias (it could expand exponentially) or nesting past the bound
        return None, [PluginProblem(name, "invalid_yaml")], None
    if not isinstance(data, dict):
        return None, [PluginProblem(name, "invalid_yaml")], None
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
    entry_file = None
    if isinstance(entry_point, str) and entry_point:
        entry_file = folder / entry_point
        try:
            entry = entry_file.resolve()
            inside = entry.is_relative_to(folder.resolve())
            usable = inside and entry.suffix == ".py" and entry.is_file()
        except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name
            usable = False
        if not usable:
            problems.append(PluginProblem(name, "missing_entry_file", "entry_point"))
    schema, schema_problems = _schema(name, data.get("config_schema"))
    problems.extend(schema_problems)
    if problems:
        declared = data.get("name")
        if isinstance(declared, str) and declared:
            problems = [replace(problem, name=declared) for problem in problems]
        return None, problems, entry_file
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
        ),
        [],
        entry_file,
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
            or not entry["key"]
            or not isinstance(entry.get("type", "string"), str)
        ):
            return (), [PluginProblem(name, "invalid_config_schema", "config_schema")]
        fields.append(
            ConfigField(
                key=entry["key"],
                type=str(entry.get("type", "string")),
                label=str(entry.get("label") or ""),
                required=bool(entry.get("required", False)),
                default=entry.get("default"),
            )
        )
    return tuple(fields), []


def config_problems(record: PluginRecord, config: dict[str, Any]) -> list[str]:
    """The schema keys `config` breaks, each as `key: why` (never quoting a value).

    A required key must be there (or have a default); a present value must be of its declared
    type. Values may also be the text form Nexent persists them in (`"5"`, `"true"`).
    """
    problems = []
    for spec in record.config_schema:
        if spec.key not in config or config[spec.key] is None:
            if spec.required and spec.default is None:
                problems.append(f"{spec.key}: required")
            continue
        why = _type_problem(spec, config[spec.key])
        if why is not None:
            problems.append(f"{spec.key}: {why}")
    return problems


def _type_problem(spec: ConfigField, value: Any) -> str | None:
    kind = spec.kind
    if kind in ("string", "secret"):
        return None if isinstance(value, str) else f"must be text ({spec.type})"
    if kind == "url":
        if not isinstance(value, str):
            return "must be a URL"
        parsed = urlsplit(value)
        usable = parsed.scheme in ("http", "https") and bool(parsed.netloc)
        return None if usable else "must be an http(s) URL"
    if kind in ("number", "integer"):
        number: Any = value
        if isinstance(value, str):
            try:
                number = float(value) if kind == "number" else int(value)
            except ValueError:
                return f"must be a {kind}"
        if isinstance(number, bool) or not isinstance(number, int | float):
            return f"must be a {kind}"
        if kind == "integer" and not float(number).is_integer():
            return "must be an integer"
        return None if math.isfinite(number) else f"must be a finite {kind}"
    if kind == "boolean":
        usable = isinstance(value, bool) or str(value).lower() in _TRUE_FALSE
        return None if usable else "must be true or false"
    return None


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
