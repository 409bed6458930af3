"""Profiles: a `mnemon.toml` naming entries, their configuration and the Strategy."""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, StringConstraints

from ._errors import DefinitionError
from ._host import MemoryHost, host_settings
from ._json import freeze_json, thaw_json
from ._models import (
    DEFAULT_MAX_INPUT_BYTES,
    ENTRY_ID_PATTERN,
    HostSettings,
    WireModel,
    validate_model,
)

__all__ = ["PROFILE_FILE", "Profile", "ProfileEntry", "load_profile"]

PROFILE_FILE = "mnemon.toml"
_USE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"


class _EntryModel(WireModel):
    id: Annotated[str, Strict(), StringConstraints(pattern=ENTRY_ID_PATTERN)]
    use: Annotated[str, Strict(), StringConstraints(pattern=_USE)]
    enabled: Annotated[bool, Strict()] = True
    config: dict[str, Any] = Field(default_factory=dict)


class _StrategyModel(WireModel):
    use: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)] | None = None
    fallback: Literal["sole-strategy"] | None = None


class _ProfileModel(WireModel):
    data_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] = ".mnemon"
    source_timeout: Annotated[float, Field(gt=0, le=300)] = 10.0
    max_input_bytes: Annotated[int, Strict(), Field(ge=1024, le=64 * 1024 * 1024)] = (
        DEFAULT_MAX_INPUT_BYTES
    )
    strategy: _StrategyModel = _StrategyModel()
    entries: list[_EntryModel] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One entry of a profile: which plugin, under which id, with which configuration."""

    id: str
    use: str
    enabled: bool
    config: Mapping[str, Any]

    def load_plugin(self, profile: Path) -> Any:
        """Import the plugin (only now: a disabled entry is never imported).

        Raises:
            DefinitionError: the import failed or the object has no `apply(ctx)`.
        """
        module_name, _, attribute = self.use.partition(":")
        where = f"{profile.name}: entry {self.id!r} use"
        try:
            plugin: Any = importlib.import_module(module_name)
            if attribute:
                plugin = getattr(plugin, attribute)
        except (ImportError, AttributeError) as exc:
            raise DefinitionError(
                f"{where}: cannot import {self.use!r} ({type(exc).__name__}); is it installed?"
            ) from None
        if not callable(getattr(plugin, "apply", None)):
            raise DefinitionError(f"{where}: {self.use!r} is not a plugin (no apply(ctx))")
        return plugin


@dataclass(frozen=True, slots=True)
class Profile:
    """A loaded profile: host settings, the data directory and the entries, in file order."""

    path: Path
    data_dir: Path
    source_timeout: float
    max_input_bytes: int
    strategy: str | None
    strategy_fallback: Literal["sole-strategy"] | None
    entries: tuple[ProfileEntry, ...]

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

    def host_settings(self) -> HostSettings:
        """The host settings this profile describes (its folder for relative paths).

        Raises:
            DefinitionError: a setting is invalid; the message names it.
        """
        return host_settings(
            None,
            {
                "data_dir": self.data_dir,
                "config_dir": self.path.parent,
                "max_input_bytes": self.max_input_bytes,
                "source_timeout": self.source_timeout,
                "strategy_type_id": self.strategy,
                "strategy_fallback": self.strategy_fallback,
            },
        )

    @asynccontextmanager
    async def open_host(self, **host: Any) -> AsyncIterator[MemoryHost]:
        """A `MemoryHost` with every enabled entry mounted in one atomic change.

        `host` holds `HostSettings` fields that override the profile's.

        Raises:
            DefinitionError: an entry's plugin cannot be imported, or a setting is invalid.
            InstallError: the entries could not be mounted together.
        """
        settings = self.host_settings()
        mounts = []
        for entry in self.entries:
            if entry.enabled:
                plugin = entry.load_plugin(self.path)
                mounts.append((plugin, entry.id, self.entry_config(entry)))
        async with MemoryHost(settings, **host) as memory:
            if mounts:
                await memory.mount_all(mounts)
            yield memory


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


def load_profile(path: str | Path) -> Profile:
    """Read and check a profile file; imports no plugin.

    Raises:
        DefinitionError: the file is missing, is not TOML, or a key is invalid; the message
            names the file (by its name: its folder can carry a secret) and the exact key at
            fault, never the value of a path setting.
    """
    path = Path(path).expanduser().resolve()
    name = path.name
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
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
    model = validate_model(_ProfileModel, raw, subject=name, error=DefinitionError)
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
        entries.append(ProfileEntry(entry.id, entry.use, entry.enabled, config))
    return Profile(
        path=path,
        data_dir=_resolved(path, model.data_dir, "data_dir"),
        source_timeout=model.source_timeout,
        max_input_bytes=model.max_input_bytes,
        strategy=model.strategy.use,
        strategy_fallback=model.strategy.fallback,
        entries=tuple(entries),
    )
