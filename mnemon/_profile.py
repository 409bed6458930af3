"""Profiles: a `mnemon.toml` naming entries, their configuration and the Strategy."""

from __future__ import annotations

import difflib
import importlib
import re
import tomllib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, Strict, StringConstraints, ValidationError, model_validator

from ._discovery import ContributedEntry, Discovery, discover_plugins
from ._errors import DefinitionError
from ._helpers import mnemon_home
from ._host import MemoryHost
from ._json import MAX_JSON_DEPTH, freeze_json, thaw_json
from ._models import (
    ENTRY_ID_PATTERN,
    HostSettings,
    WireModel,
)

__all__ = [
    "PROFILE_FILE",
    "Profile",
    "ProfileEntry",
    "find_profile",
    "installed_plugins",
    "load_profile",
]

PROFILE_FILE = "mnemon.toml"
_USE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"


class _EntryModel(WireModel):
    id: Annotated[str, Strict(), StringConstraints(pattern=ENTRY_ID_PATTERN)]
    use: Annotated[str, Strict(), StringConstraints(pattern=_USE)] | None = None
    plugin: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=64)] | None = None
    enabled: Annotated[bool, Strict()] = True
    config: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_way_to_name_it(self) -> _EntryModel:
        if (self.use is None) == (self.plugin is None):
            raise ValueError("an entry names its plugin with exactly one of `use` or `plugin`")
        return self


class _StrategyModel(WireModel):
    # checked as the host settings they set (`_STRATEGY_SETTINGS`), with the host's rules
    use: Any = None
    fallback: Any = None


class _ObserverModel(WireModel):
    use: Annotated[str, Strict(), StringConstraints(pattern=_USE)]
    enabled: Annotated[bool, Strict()] = True


class _ProfileModel(WireModel):
    # the profile's own tables; its host settings (`_TOP_LEVEL_SETTINGS`) are set apart first
    strategy: _StrategyModel = _StrategyModel()
    entries: list[_EntryModel] = Field(default_factory=list)
    observers: list[_ObserverModel] = Field(default_factory=list)


# the `HostSettings` fields a profile's top level sets, under the same names and rules;
# `[strategy]` sets two more, and the profile's folder is `config_dir`
_TOP_LEVEL_SETTINGS = (
    "data_dir",
    "source_timeout",
    "max_input_bytes",
    "max_concurrent_compositions",
    "collector",
    "switches",
)
_STRATEGY_SETTINGS = {"use": "strategy_type_id", "fallback": "strategy_fallback"}
_DEFAULT_DATA_DIR = ".mnemon"


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One entry of a profile: which plugin, under which id, with which configuration."""

    id: str
    use: str
    """The import path; empty when the entry names a discovered plugin (`plugin`)."""
    enabled: bool
    config: Mapping[str, Any]
    plugin: str | None = None
    """The id of a discovered plugin (`mnemon plugins` lists them), or None with `use`."""

    def load_plugin(self, profile: Path, discovery: Discovery | None = None) -> Any:
        """Import the plugin (only now: a disabled entry is never imported).

        Args:
            profile: the profile file (its folder holds the project's `.mnemon/plugins`).
            discovery: the discovered plugins, for `plugin = "<id>"` (found again if None).

        Raises:
            DefinitionError: the import failed, the object has no `apply(ctx)`, or no
                discovered plugin has the id (the message lists the ids found).
            InstallError: the discovered plugin is broken or its code fails to import.
        """
        if self.plugin is not None:
            found = (discovery or discover_plugins(project_dir=profile.parent)).resolve(
                self.plugin, where=f"{profile.name}: entry {self.id!r} plugin"
            )
            return found.load()
        module_name, _, attribute = self.use.partition(":")
        where = f"{profile.name}: entry {self.id!r} use"
        try:
            plugin: Any = importlib.import_module(module_name)
            if attribute:
                plugin = getattr(plugin, attribute)
        except (ImportError, AttributeError) as exc:
            raise DefinitionError(
                f"{where}: cannot import {self.use!r} ({type(exc).__name__}); is it installed?"
                f"{_installed_hint(self.use)}"
            ) from None
        if not callable(getattr(plugin, "apply", None)):
            raise DefinitionError(f"{where}: {self.use!r} is not a plugin (no apply(ctx))")
        return plugin


@dataclass(frozen=True, slots=True)
class Profile:
    """A loaded profile: the host settings it describes and its entries, in file order."""

    path: Path
    settings: HostSettings
    """What its top level and `[strategy]` set: `data_dir` resolved from the profile's folder
    (`.mnemon` there by default), `config_dir` that folder, the rest as written or default."""
    entries: tuple[ProfileEntry, ...]
    observers: tuple[str, ...] = ()

    @property
    def data_dir(self) -> Path:
        """The folder Sources keep their data under unless their entry's configuration names one."""
        folder = self.settings.data_dir
        return Path(folder) if folder is not None else mnemon_home()

    def entry_config(self, entry: ProfileEntry) -> dict[str, Any]:
        """The entry's configuration as mounted (a relative `data_dir` from the profile's).

        Raises:
            DefinitionError: the entry's `data_dir` is not a usable path (names the key).
        """
        config: dict[str, Any] = thaw_json(entry.config)
        if isinstance(config.get("data_dir"), str):
            index = self.entries.index(entry) if entry in self.entries else None
            key = f"entries[{index}].config.data_dir" if index is not None else "config.data_dir"
            config["data_dir"] = str(_resolved(self.path, config["data_dir"], key))
        return config

    @asynccontextmanager
    async def open_host(self, **host: Any) -> AsyncIterator[MemoryHost]:
        """A `MemoryHost` with every enabled entry mounted in one atomic change.

        `host` holds `HostSettings` fields that override the profile's.

        Raises:
            DefinitionError: an entry's plugin cannot be imported, or a setting is invalid.
            InstallError: the entries could not be mounted together.
        """
        discovery = discover_plugins(project_dir=self.path.parent)
        mounts = []
        for entry in self.entries:
            if entry.enabled:
                plugin = entry.load_plugin(self.path, discovery)
                mounts.append((plugin, entry.id, self.entry_config(entry)))
        observers = [self._observer(use) for use in self.observers]
        async with MemoryHost(self.settings, observers=observers, **host) as memory:
            if mounts:
                await memory.mount_all(mounts)
            yield memory

    def _observer(self, use: str) -> object:
        # `module:attr` names an observer object, or a class made with no arguments
        module_name, _, attribute = use.partition(":")
        where = f"{self.path.name}: observers use {use!r}"
        try:
            found: Any = importlib.import_module(module_name)
            if attribute:
                found = getattr(found, attribute)
        except (ImportError, AttributeError) as exc:
            raise DefinitionError(
                f"{where}: cannot import it ({type(exc).__name__}); is it installed?"
            ) from None
        return found() if isinstance(found, type) else found

    def plugin_uses(self, discovery: Discovery) -> dict[str, bool]:
        """Which discovered plugins this profile uses: plugin id -> used by an enabled entry."""
        uses: dict[str, bool] = {}
        for entry in self.entries:
            for plugin in discovery:
                contributed = plugin.manifest.entries if plugin.manifest else ()
                if entry.plugin == plugin.id or entry.use in {e.plugin for e in contributed}:
                    uses[plugin.id] = uses.get(plugin.id, False) or entry.enabled
                    if plugin.status != "shadowed":
                        for hosted in _hosted_plugins(entry, contributed, discovery):
                            uses[hosted] = uses.get(hosted, False) or entry.enabled
        return uses


def _hosted_plugins(
    entry: ProfileEntry, contributed: tuple[ContributedEntry, ...], discovery: Discovery
) -> list[str]:
    """Plugins of another format whose contribution the entry's configuration names.

    A plugin entry that hosts them (`hosts = { format, key }` in its manifest) picks one by
    name in `config[key]`, such as a Raven memory backend named by `backend`.
    """
    found = []
    for hosting in contributed:
        hosts = hosting.hosts
        if hosts is None or (entry.plugin is None and entry.use != hosting.plugin):
            continue
        name = entry.config.get(hosts.key)
        for plugin in discovery:
            manifest = plugin.manifest
            if (
                isinstance(name, str)
                and manifest is not None
                and manifest.format == hosts.format
                and plugin.status not in ("shadowed", "broken")
                and any(c.name == name for c in manifest.entries)
            ):
                found.append(plugin.id)
    return found


def _resolved(profile: Path, value: str, key: str) -> Path:
    """`value` as a path; a relative one is taken from the profile's folder.

    Raises:
        DefinitionError: naming `key`, never the value (a path can carry a secret).
    """
    where = f"{profile.name}: {key}"
    if "\x00" in value:
        raise DefinitionError(f"{where}: a path cannot contain a NUL character")
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        raise DefinitionError(f"{where}: cannot expand '~' (no such user or home)") from None
    try:
        return path if path.is_absolute() else (profile.parent / path).resolve()
    except (RuntimeError, OSError):
        raise DefinitionError(f"{where}: cannot be resolved (a symbolic link loop?)") from None


def installed_plugins() -> dict[str, str]:
    """The plugins installed in this environment: entry-point name -> import path.

    A plugin distribution registers itself in the `mnemon.plugins` entry-point group; its
    import path is what a profile's `use` names.
    """
    return {point.name: point.value for point in entry_points(group="mnemon.plugins")}


def _installed_hint(use: str) -> str:
    plugins = sorted(set(installed_plugins().values()))
    if not plugins:
        return " (no mnemon plugin is installed)"
    close = difflib.get_close_matches(use, plugins, n=1)
    guess = f" did you mean {close[0]!r}?" if close else ""
    return f"{guess} installed plugins: {', '.join(plugins)}"


def find_profile(start: Path) -> Path | None:
    """The nearest `mnemon.toml` in `start` or one of its parent folders, like git's `.git`.

    Returns:
        Its path, or None when no folder up to the root holds one.
    """
    folder = Path(start).absolute()
    for candidate in (folder, *folder.parents):
        path = candidate / PROFILE_FILE
        if path.is_file():
            return path
    return None


_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]")
_KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "": (*_TOP_LEVEL_SETTINGS, *_ProfileModel.model_fields),
    "strategy": tuple(_StrategyModel.model_fields),
    "entries": tuple(_EntryModel.model_fields),
}


def _key_line(text: str, location: tuple[int | str, ...]) -> int | None:
    """The line (1-based) where the key at `location` is written, when it can be found."""
    table = ""
    index = -1
    entry = -1
    wanted_table = "entries" if location[:1] == ("entries",) else ""
    key = location[-1] if location else None
    if location[:1] == ("strategy",):
        wanted_table, key = "strategy", location[1] if len(location) > 1 else None
    elif wanted_table == "entries":
        entry = location[1] if len(location) > 1 and isinstance(location[1], int) else -1
        key = location[2] if len(location) > 2 else None
    header_line = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            table = header[2]
            if header[1] and table == "entries":
                index += 1
                if index == entry:
                    header_line = number
            elif table == wanted_table and wanted_table:
                header_line = number
            continue
        in_place = table == wanted_table and (wanted_table != "entries" or index == entry)
        if in_place and isinstance(key, str) and re.match(rf'^\s*"?{re.escape(key)}"?\s*=', line):
            return number
    return header_line


def _profile_error(name: str, text: str, exc: ValidationError) -> DefinitionError:
    """One line naming the key at fault, its line, and the key meant when it is misspelt."""
    error = exc.errors(include_url=False, include_input=False)[0]
    location = tuple(error["loc"])
    path = name
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden" and location and isinstance(location[-1], str):
        table = "" if len(location) == 1 else str(location[0])
        known = _KNOWN_KEYS.get(table, ())
        close = difflib.get_close_matches(location[-1], known, n=1)
        message = f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"
        if not close and known:
            message += f" (the keys here are {', '.join(known)})"
    line = _key_line(text, location)
    where = f" (line {line})" if line is not None else ""
    more = len(exc.errors()) - 1
    extra = f"; and {more} more problem(s)" if more else ""
    return DefinitionError(f"{path}: {message}{where}{extra}")


def load_profile(path: str | Path) -> Profile:
    """Read and check a profile file; imports no plugin.

    Raises:
        DefinitionError: the file is missing, is not TOML, nests too deeply, or a key is
            invalid; the message names the file (by its name: its folder can carry a secret)
            and the exact key at fault, never the value of a path setting.
    """
    path = Path(path).expanduser().resolve()
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except FileNotFoundError:
        raise DefinitionError(f"{name}: no profile here (create one with `mnemon init`)") from None
    except IsADirectoryError:
        raise DefinitionError(f"{name}: is a folder, not a profile file") from None
    except PermissionError:
        raise DefinitionError(f"{name}: the profile cannot be read (permission denied)") from None
    except UnicodeDecodeError:
        raise DefinitionError(f"{name}: a profile must be UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError(f"{name}: invalid TOML: {exc}") from None
    except RecursionError:
        # tomllib recurses once per nested array or inline table; deeper than any value a
        # profile may hold, the file is refused by that rule, not by the interpreter's limit
        raise DefinitionError(
            f"{name}: arrays or tables nest too deeply (a profile value may nest at most "
            f"{MAX_JSON_DEPTH} levels)"
        ) from None
    settings = {key: raw.pop(key) for key in _TOP_LEVEL_SETTINGS if key in raw}
    try:
        model = _ProfileModel.model_validate(raw)
    except ValidationError as exc:
        raise _profile_error(name, text, exc) from None
    seen: set[str] = set()
    entries = []
    for index, entry in enumerate(model.entries):
        if entry.id in seen:
            raise DefinitionError(f"{name}.entries[{index}].id: duplicate entry id {entry.id!r}")
        seen.add(entry.id)
        config = freeze_json(
            entry.config, what=f"{name}.entries[{index}].config", error=DefinitionError
        )
        if isinstance(entry.config.get("data_dir"), str):
            # checked now, so a bad path fails the load rather than the first mount
            _resolved(path, entry.config["data_dir"], f"entries[{index}].config.data_dir")
        entries.append(
            ProfileEntry(entry.id, entry.use or "", entry.enabled, config, plugin=entry.plugin)
        )
    return Profile(
        path=path,
        settings=_host_settings(path, text, settings, model.strategy),
        entries=tuple(entries),
        observers=tuple(item.use for item in model.observers if item.enabled),
    )


def _host_settings(
    path: Path, text: str, top_level: dict[str, Any], strategy: _StrategyModel
) -> HostSettings:
    """The `HostSettings` a profile describes, checked by the settings' own rules.

    Raises:
        DefinitionError: naming the profile key at fault and its line, never a path's value.
    """
    name = path.name
    data_dir = top_level.pop("data_dir", _DEFAULT_DATA_DIR)
    if not isinstance(data_dir, str) or not data_dir:
        line = _key_line(text, ("data_dir",))
        where = f" (line {line})" if line is not None else ""
        raise DefinitionError(f"{name}.data_dir: must be a folder's path{where}")
    values = {
        **top_level,
        "data_dir": str(_resolved(path, data_dir, "data_dir")),
        "config_dir": str(path.parent),
    }
    for key, field in _STRATEGY_SETTINGS.items():
        if getattr(strategy, key) is not None:
            values[field] = getattr(strategy, key)
    try:
        return HostSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        location = next(
            (("strategy", key) for key, named in _STRATEGY_SETTINGS.items() if named == field),
            (field, *error["loc"][1:]),
        )
        key = ".".join(str(part) for part in location)
        message = str(error["msg"]).removeprefix("Value error, ")
        # the settings' own messages open with the setting's name: the profile's key instead
        message = message.removeprefix(field) if message.startswith(field) else f": {message}"
        line = _key_line(text, location)
        where = f" (line {line})" if line is not None else ""
        raise DefinitionError(f"{name}.{key}{message}{where}") from None
