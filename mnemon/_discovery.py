"""Plugin discovery: `mnemon-plugin.toml` manifests found in four places, read without imports.

Places, highest priority first: bundled (inside the core package, or an installed
distribution whose manifest says `bundled = true`: the first-party plugins), user
(`$MNEMON_HOME/plugins/<dir>/`), project (`.mnemon/plugins/<dir>/` next to the profile) and
installed distributions (entry-point group `mnemon.plugins`). Manifests of other plugin formats
are read too, by the reader an installed distribution registers for their file name
(`mnemon.manifest_readers`), in the same folders and from the entry-point groups the reader
names; their contributions are hosted by a mnemon plugin, which finds them here by name.
Plugin code is imported only by `DiscoveredPlugin.load` (a profile activates the plugin) or
`DiscoveredPlugin.load_object` (a Source names a contribution); discovery imports the readers.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationError
from pydantic import field_validator as _field_validator

from ._definitions import PluginRole
from ._errors import DefinitionError, InstallError
from ._helpers import mnemon_home
from ._json import MAX_JSON_DEPTH, freeze_json
from ._versions import RangeError, parse_range, parse_version

__all__ = [
    "ENTRY_POINT_GROUP",
    "MANIFEST_FILE",
    "READER_GROUP",
    "ContributedEntry",
    "DiscoveredPlugin",
    "Discovery",
    "PluginLabels",
    "PluginManifest",
    "core_version",
    "discover_plugins",
]

ENTRY_POINT_GROUP = "mnemon.plugins"
MANIFEST_FILE = "mnemon-plugin.toml"
# manifest file name -> the reader of that format (a callable: text -> manifest data)
READER_GROUP = "mnemon.manifest_readers"
CORE_DISTRIBUTION = "mnemon-runtime"
BUNDLED_DIR = Path(__file__).resolve().parent / "_bundled"

Origin = Literal["bundled", "user", "project", "entry-point"]
Status = Literal["available", "active", "disabled", "shadowed", "broken", "unsupported"]
Problem = Literal[
    "invalid-toml",
    "invalid-manifest",
    "incompatible-version",
    "duplicate-contribution",
    "unreadable",
]
ORIGINS: tuple[Origin, ...] = ("bundled", "user", "project", "entry-point")

_ID = r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$"
_TARGET = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?$"
_Id = Annotated[str, StringConstraints(pattern=_ID, max_length=64, strict=True)]
_Text = Annotated[str, StringConstraints(min_length=1, max_length=400, strict=True)]
_Target = Annotated[str, StringConstraints(pattern=_TARGET, strict=True)]
_Flag = Annotated[bool, Strict()]
_Format = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,31}$", strict=True)]
# a manifest is a few KB: a bigger file is refused before it is parsed, not after it fills memory
MAX_MANIFEST_CHARACTERS = 1 << 20
# `locale/<language>.json` beside a manifest: its name and description for people, translated
LOCALE_FOLDER = "locale"
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$")
MAX_LOCALE_CHARACTERS = 64 * 1024


def core_version() -> str:
    """The installed core's version (`mnemon.__version__`)."""
    try:
        return importlib.metadata.version(CORE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - an unpacked source tree
        return "0.0.0"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether tables and arrays nest in `value` deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            members = item.values() if isinstance(item, dict) else item
            stack.extend((member, depth + 1) for member in members)
    return False


def _checked_schema(value: Any) -> Any:
    if not isinstance(value, dict):
        raise ValueError("a configuration schema is a table (a JSON Schema object)")
    # check_schema recurses per level: nesting is bounded first (freeze_json's own bound)
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        jsonschema.Draft202012Validator.check_schema(value)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the schema"
        raise ValueError(f"not a valid JSON Schema (at {where})") from None
    # DefinitionError is a ValueError: pydantic reports it as this key's validation error
    return freeze_json(value, what="config_schema", error=DefinitionError)


class HostedContributions(_Model):
    """What an entry hosts of another plugin format: the key of its configuration naming one."""

    format: _Format
    """The manifest format whose contributions it hosts (as its reader names it)."""
    key: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$", strict=True)]
    """The configuration key whose value is a contribution's name (or its factory)."""


class ContributedEntry(_Model):
    """One mountable contribution: its name and the object whose `apply(ctx)` mounts it."""

    name: _Id
    plugin: _Target
    config_schema: Any = Field(default_factory=lambda: freeze_json({"type": "object"}))
    installs: tuple[PluginRole, ...] = ()
    """What mounting it installs, declared so tools can choose without importing it."""
    hosts: HostedContributions | None = None
    """Contributions of another format it runs, so `mnemon plugins` shows their plugin used."""
    unsupported: _Flag = False

    _schema = _field_validator("config_schema", mode="before")(_checked_schema)


class _Contributes(_Model):
    entries: tuple[ContributedEntry, ...] = ()


class _MnemonPlugin(_Model):
    id: _Id
    version: _Text
    display_name: _Text
    description: _Text
    mnemon: _Text
    bundled: _Flag = False
    enabled_by_default: _Flag = True
    contributes: _Contributes = _Contributes()


class _MnemonFile(_Model):
    plugin: _MnemonPlugin


class HostedBy(_Model):
    """Who hosts the contributions of a foreign manifest: a mnemon plugin's entry, by name."""

    plugin: _Id
    """The mnemon plugin whose entry runs them (`raven`)."""
    key: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$", strict=True)]
    """The key of that entry's configuration naming a contribution (`backend`)."""
    kind: _Text
    """What a contribution is, for people (`memory backend`)."""
    distribution: _Text
    """The distribution to install to host them."""


class _ForeignManifest(_Model):
    """What a manifest reader returns: a foreign manifest in mnemon's terms."""

    format: _Format
    id: _Id
    version: _Text
    display_name: _Text
    description: Annotated[str, StringConstraints(max_length=4000, strict=True)] = ""
    requires: _Text | None = None
    bundled: _Flag = False
    enabled_by_default: _Flag = True
    entries: tuple[ContributedEntry, ...] = ()
    hosted_by: HostedBy | None = None

    @_field_validator("format")
    @classmethod
    def _not_mnemon(cls, value: str) -> str:
        if value == "mnemon":
            raise ValueError("'mnemon' is the format of mnemon-plugin.toml, read by the core")
        return value


@dataclass(frozen=True, slots=True)
class PluginManifest:
    """A validated manifest: `mnemon-plugin.toml`, or one of another format read by its reader."""

    id: str
    version: str
    display_name: str
    description: str
    requires: str | None
    """The core versions it works with (`mnemon`), or the range of its own format's host."""
    bundled: bool
    enabled_by_default: bool
    entries: tuple[ContributedEntry, ...]
    format: str
    """`mnemon`, or the foreign format its reader names (`raven`)."""
    hosted_by: HostedBy | None = None
    """For a foreign format: the mnemon plugin that hosts its contributions."""

    def as_json(self) -> dict[str, Any]:
        """The manifest as JSON-safe data (what `mnemon plugins show --json` prints)."""
        return {
            "id": self.id,
            "version": self.version,
            "display_name": self.display_name,
            "description": self.description,
            "format": self.format,
            "requires": {self.format: self.requires},
            "bundled": self.bundled,
            "enabled_by_default": self.enabled_by_default,
            "entries": [
                {
                    "name": entry.name,
                    "plugin": entry.plugin,
                    "config_schema": _thawed(entry.config_schema),
                    "installs": list(entry.installs),
                    "supported": not entry.unsupported,
                }
                for entry in self.entries
            ],
        }


def _thawed(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_thawed(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class PluginLabels:
    """A plugin's name and description for people in one language, from its locale file."""

    language: str
    title: str
    description: str | None


class _LocaleMeta(_Model):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    title: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = None


class _LocaleFile(_Model):
    # the rest of the file is the plugin's own (its strings for its own pages)
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    meta: _LocaleMeta


@dataclass(frozen=True, slots=True)
class DiscoveredPlugin:
    """One manifest found by discovery, with where it was found and what became of it."""

    id: str
    origin: Origin
    location: Path
    """The manifest file."""
    status: Status
    manifest: PluginManifest | None = None
    problem: Problem | None = None
    detail: str | None = None
    """Why it is broken or shadowed, naming keys and plugin ids, never file contents."""
    distribution: str | None = None
    _import_root: Path | None = field(default=None, repr=False, compare=False)

    @property
    def version(self) -> str | None:
        """The manifest's version, or None when the manifest could not be read."""
        return self.manifest.version if self.manifest is not None else None

    def labels(self, language: str) -> PluginLabels | None:
        """The plugin's title and description in `language`, read without importing it.

        From `locale/<language>.json` beside the manifest (`meta.title`, and optionally
        `meta.description`), as a plugin ships it: `en`, `zh`, `pt-BR`. None when the plugin
        ships no such file, or the file is not UTF-8 JSON of that shape (at most 64 KiB): a
        broken translation falls back to the manifest's own words, never breaks a listing.

        Raises:
            DefinitionError: `language` is not a language tag (`en`, `zh`, `zh-Hans`).
        """
        if not isinstance(language, str) or not _LANGUAGE.match(language):
            raise DefinitionError(f"language {language!r}: not a language tag such as 'en'")
        if self.manifest is None or not self.location.is_file():
            return None
        path = self.location.parent / LOCALE_FOLDER / f"{language}.json"
        try:
            with path.open(encoding="utf-8") as file:
                text = file.read(MAX_LOCALE_CHARACTERS + 1)
            if len(text) > MAX_LOCALE_CHARACTERS:
                return None
            meta = _LocaleFile.model_validate(json.loads(text)).meta
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            # ValueError: malformed JSON, or pydantic's ValidationError for the wrong shape
            return None
        return PluginLabels(language, meta.title, meta.description)

    def entry(self, name: str | None = None) -> ContributedEntry:
        """The contribution named `name`, or the only one when `name` is None.

        Raises:
            DefinitionError: no such contribution, or several and `name` is None.
        """
        entries = self.manifest.entries if self.manifest is not None else ()
        if name is None and len(entries) == 1:
            return entries[0]
        for entry in entries:
            if entry.name == name:
                return entry
        names = ", ".join(entry.name for entry in entries) or "none"
        which = f"no contribution {name!r}" if name else "several contributions; name one"
        raise DefinitionError(f"plugin {self.id!r}: {which} (it contributes: {names})")

    def load(self, name: str | None = None) -> Any:
        """Import the contribution's plugin object (the only time plugin code runs).

        Raises:
            InstallError: the plugin is broken, shadowed, unsupported, or its code fails to
                import; the message names the plugin and the exception type, never its text.
            DefinitionError: no such contribution.
        """
        entry = self._usable_entry(name)
        if self.manifest is not None and self.manifest.format != "mnemon":
            host = self.manifest.hosted_by
            what = f"a {self.manifest.format} {host.kind if host else 'contribution'}"
            if host is None:
                raise InstallError(f"plugin {self.id!r}: {entry.name!r} is {what}, not mountable")
            if entry.unsupported:
                raise InstallError(
                    f"plugin {self.id!r}: {entry.name!r} is {what}; hosting it needs "
                    f"{host.distribution} (unsupported)"
                )
            raise InstallError(
                f"plugin {self.id!r}: {entry.name!r} is {what}: mount the {host.plugin} plugin "
                f"with {host.key} = {entry.name!r}"
            )
        plugin = self._imported(entry)
        if not callable(getattr(plugin, "apply", None)):
            raise InstallError(f"plugin {self.id!r}: {entry.plugin!r} has no apply(ctx)")
        return plugin

    def load_object(self, name: str | None = None) -> Any:
        """Import the object a contribution names (a Raven backend's factory), for its host.

        Unlike `load`, the object need not be a mnemon plugin: the Source that hosts this kind
        of contribution calls it (the raven-backend Source, for `memory_backends`).

        Raises:
            InstallError: the plugin is broken or shadowed, or its code fails to import; the
                message names the plugin and the exception type, never its text.
            DefinitionError: no such contribution.
        """
        return self._imported(self._usable_entry(name))

    def _usable_entry(self, name: str | None) -> ContributedEntry:
        if self.status in ("broken", "shadowed"):
            raise InstallError(
                f"plugin {self.id!r} ({self.origin}) is {self.status}: {self.problem or ''}"
                f"{': ' + self.detail if self.detail else ''}"
            )
        return self.entry(name)

    def _imported(self, entry: ContributedEntry) -> Any:
        module_name, _, attribute = entry.plugin.partition(":")
        try:
            module = self._import(module_name)
            return getattr(module, attribute) if attribute else module
        except Exception as exc:
            raise InstallError(
                f"plugin {self.id!r}: importing {entry.plugin!r} failed ({type(exc).__name__})"
            ) from None

    def _import(self, module_name: str) -> ModuleType:
        if self._import_root is None:
            return importlib.import_module(module_name)
        # a drop-in folder: its modules live under a private namespace, sys.path untouched
        digest = hashlib.sha256(str(self._import_root).encode()).hexdigest()[:12]
        namespace = f"_mnemon_plugins_{self.origin}_{digest}"
        top, _, rest = module_name.partition(".")
        qualified = f"{namespace}.{top}"
        if qualified not in sys.modules:
            if namespace not in sys.modules:
                holder = ModuleType(namespace)
                holder.__path__ = []
                sys.modules[namespace] = holder
            package = self._import_root / top / "__init__.py"
            single = self._import_root / f"{top}.py"
            if package.is_file():
                spec = importlib.util.spec_from_file_location(
                    qualified, package, submodule_search_locations=[str(package.parent)]
                )
            elif single.is_file():
                spec = importlib.util.spec_from_file_location(qualified, single)
            else:
                raise ModuleNotFoundError(module_name)
            if spec is None or spec.loader is None:  # pragma: no cover - both paths are files
                raise ModuleNotFoundError(module_name)
            module = importlib.util.module_from_spec(spec)
            sys.modules[qualified] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[qualified]
                raise
        return importlib.import_module(f"{qualified}.{rest}" if rest else qualified)


@dataclass(frozen=True, slots=True)
class Discovery:
    """Every manifest found, sorted by id (the winner of an id first), frozen."""

    plugins: tuple[DiscoveredPlugin, ...]

    def __iter__(self) -> Iterator[DiscoveredPlugin]:
        return iter(self.plugins)

    def ids(self) -> list[str]:
        """The ids a profile can name (winners that are not broken), sorted."""
        return sorted({p.id for p in self.plugins if p.status not in ("shadowed", "broken")})

    def get(self, plugin_id: str) -> DiscoveredPlugin | None:
        """The plugin that wins `plugin_id` (shadowed copies never do), or None."""
        for plugin in self.plugins:
            if plugin.id == plugin_id and plugin.status != "shadowed":
                return plugin
        return None

    def resolve(self, plugin_id: str, *, where: str) -> DiscoveredPlugin:
        """The plugin a profile names, or an error listing the discovered ids.

        Raises:
            DefinitionError: no plugin has this id (with "did you mean …" and the known ids).
        """
        found = self.get(plugin_id)
        if found is not None:
            return found
        known = self.ids()
        close = difflib.get_close_matches(plugin_id, known, n=1)
        guess = f" did you mean {close[0]!r}?" if close else ""
        listed = ", ".join(known) if known else "none (see `mnemon plugins`)"
        raise DefinitionError(
            f"{where}: no plugin {plugin_id!r} is installed;{guess} found: {listed}"
        )

    def with_profile(self, uses: Mapping[str, bool]) -> Discovery:
        """The same plugins, `active` or `disabled` as a profile's entries use them.

        `uses` maps a plugin id to whether an enabled entry uses it.
        """
        plugins = []
        for plugin in self.plugins:
            if plugin.status in ("available", "disabled") and plugin.id in uses:
                plugin = replace(plugin, status="active" if uses[plugin.id] else "disabled")
            plugins.append(plugin)
        return Discovery(tuple(plugins))


class _Readers:
    """The manifest readers installed distributions register, each imported when first needed.

    An entry point of `mnemon.manifest_readers` is named for the manifest file it reads
    (`raven-plugin.toml`) and names a callable: the file's text in, the manifest's data out (the
    fields of `_ForeignManifest`). The callable may carry `entry_point_groups`: the groups whose
    distributions name the package holding such a file, scanned as `mnemon.plugins` is.
    """

    def __init__(self) -> None:
        self._points: dict[str, importlib.metadata.EntryPoint] = {}
        for point in importlib.metadata.entry_points(group=READER_GROUP):
            if point.name != MANIFEST_FILE:  # the core reads its own format
                self._points.setdefault(point.name, point)
        self._loaded: dict[str, Callable[[str], Any] | str] = {}

    def names(self) -> tuple[str, ...]:
        """The manifest file names discovery reads, `mnemon-plugin.toml` first."""
        return (MANIFEST_FILE, *sorted(self._points))

    def reader(self, name: str) -> Callable[[str], Any] | str:
        """The reader of manifest file `name`, or why it cannot be used (naming its entry point)."""
        if name not in self._loaded:
            point = self._points[name]
            where = f"its reader {point.value} ({_dist_name(point)})"
            try:
                value = point.load()
            except Exception as exc:  # one broken reader breaks only the files it reads
                self._loaded[name] = f"{where} failed to import ({type(exc).__name__})"
            else:
                self._loaded[name] = value if callable(value) else f"{where} is not callable"
        return self._loaded[name]

    def groups(self) -> Iterator[tuple[str, str]]:
        """(entry-point group, manifest file name) of the groups the readers name."""
        for name in sorted(self._points):
            reader = self.reader(name)
            groups = getattr(reader, "entry_point_groups", ()) if callable(reader) else ()
            for group in groups if isinstance(groups, tuple | list) else ():
                if isinstance(group, str) and group != ENTRY_POINT_GROUP:
                    yield group, name


def _dist_name(point: importlib.metadata.EntryPoint) -> str:
    return point.dist.name if point.dist is not None else point.name


def _read_manifest(
    path: Path, readers: _Readers
) -> tuple[PluginManifest | None, Problem | None, str | None]:
    """Parse and validate one manifest file; a problem code and detail instead when broken.

    A hostile file (nested past the parser's recursion, too big) is one broken plugin, never
    an exception that stops discovery of the others.
    """
    try:
        return _parsed_manifest(path, readers)
    except RecursionError:
        return None, "invalid-manifest", "nested too deeply to read"
    except MemoryError:
        return None, "invalid-manifest", "too large to read"


def _manifest_text(path: Path) -> str | None:
    """The file's text, or None when it is longer than `MAX_MANIFEST_CHARACTERS`."""
    with path.open(encoding="utf-8") as file:
        text = file.read(MAX_MANIFEST_CHARACTERS + 1)
    return None if len(text) > MAX_MANIFEST_CHARACTERS else text


_Parsed = tuple[PluginManifest | None, Problem | None, str | None]


def _parsed_manifest(path: Path, readers: _Readers) -> _Parsed:
    try:
        text = _manifest_text(path)
        if text is None:
            return None, "invalid-manifest", "larger than 1 MiB of text"
        if path.name != MANIFEST_FILE:
            return _checked(_foreign(path.name, text, readers))
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, "invalid-toml", str(exc)
    except (OSError, UnicodeDecodeError) as exc:
        return None, "unreadable", type(exc).__name__
    try:
        plugin = _MnemonFile.model_validate(raw).plugin
    except ValidationError as exc:
        return None, "invalid-manifest", _invalid(exc)
    manifest = PluginManifest(
        plugin.id, plugin.version, plugin.display_name, plugin.description,
        plugin.mnemon, plugin.bundled, plugin.enabled_by_default,
        plugin.contributes.entries, "mnemon",
    )  # fmt: skip
    return _checked((manifest, None, None))


def _invalid(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    key = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{key}: {message}"


def _foreign(name: str, text: str, readers: _Readers) -> _Parsed:
    """A manifest of another format, read by the reader registered for its file name."""
    reader = readers.reader(name)
    if isinstance(reader, str):
        return None, "unreadable", reader
    try:
        data = reader(text)
    except ValidationError as exc:
        return None, "invalid-manifest", _invalid(exc)
    except (RecursionError, MemoryError):
        raise
    except DefinitionError as exc:  # the reader's own message, naming the key
        return None, "invalid-manifest", str(exc)
    except Exception as exc:
        # its words may quote the file: only the exception's type (TOML says where it is)
        detail = str(exc) if isinstance(exc, tomllib.TOMLDecodeError) else None
        problem: Problem = "invalid-toml" if detail else "invalid-manifest"
        return None, problem, detail or f"its reader failed ({type(exc).__name__})"
    try:
        foreign = _ForeignManifest.model_validate(data)
    except ValidationError as exc:
        return None, "invalid-manifest", _invalid(exc)
    manifest = PluginManifest(
        foreign.id, foreign.version, foreign.display_name, foreign.description,
        foreign.requires, foreign.bundled, foreign.enabled_by_default, foreign.entries,
        foreign.format, foreign.hosted_by,
    )  # fmt: skip
    return manifest, None, None


def _checked(parsed: _Parsed) -> _Parsed:
    """The rules every manifest follows, and those of mnemon's own format."""
    manifest = parsed[0]
    if manifest is None:
        return parsed
    try:
        parse_version(manifest.version)
    except RangeError:
        if manifest.format == "mnemon":  # another format may take any version text
            return None, "invalid-manifest", "plugin.version: not a SemVer 2.0.0 version"
    names = [entry.name for entry in manifest.entries]
    if len(set(names)) != len(names):
        return None, "invalid-manifest", "plugin.contributes: an entry name is given twice"
    if manifest.format == "mnemon" and manifest.requires is not None:
        try:
            wanted = parse_range(manifest.requires)
        except RangeError as exc:
            return None, "invalid-manifest", f"plugin.mnemon: {exc}"
        if not wanted.admits(core_version()):
            return (
                manifest,
                "incompatible-version",
                f"needs mnemon {manifest.requires}, this is {core_version()}",
            )
    return manifest, None, None


def _found(
    path: Path,
    origin: Origin,
    readers: _Readers,
    *,
    import_root: Path | None,
    fallback_id: str,
    dist: str | None,
) -> DiscoveredPlugin:
    manifest, problem, detail = _read_manifest(path, readers)
    if origin == "entry-point" and manifest is not None and manifest.bundled:
        # an installed distribution released with the core (the first-party plugins) ranks
        # as bundled; a drop-in folder's claim is not honoured, so none can shadow it by
        # accident, and a copy it shadows is listed as such
        origin = "bundled"
    status: Status = "broken" if problem else "available"
    if manifest is not None and not problem:
        if manifest.format != "mnemon" and (
            not manifest.entries or any(entry.unsupported for entry in manifest.entries)
        ):
            # nothing here mnemon can host: no contribution, or its host is not installed
            status = "unsupported"
        elif not manifest.enabled_by_default:
            status = "disabled"
    return DiscoveredPlugin(
        id=manifest.id if manifest is not None else fallback_id,
        origin=origin,
        location=path,
        status=status,
        manifest=manifest,
        problem=problem,
        detail=detail,
        distribution=dist,
        _import_root=import_root,
    )


def _manifest_in(folder: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def _folder_plugins(
    root: Path | None, origin: Origin, readers: _Readers
) -> Iterable[DiscoveredPlugin]:
    if root is None or not root.is_dir():
        return
    names = readers.names()
    for folder in sorted(root.iterdir()):
        manifest = _manifest_in(folder, names) if folder.is_dir() else None
        if manifest is not None:
            yield _found(
                manifest, origin, readers, import_root=folder, fallback_id=folder.name, dist=None
            )


def _entry_point_plugins(readers: _Readers) -> Iterable[DiscoveredPlugin]:
    seen: set[tuple[str, str]] = set()
    groups = [(ENTRY_POINT_GROUP, readers.names())]
    groups += [(group, (name,)) for group, name in readers.groups()]
    for group, names in groups:
        for point in importlib.metadata.entry_points(group=group):
            dist = _dist_name(point)
            # mnemon's group names a module (its top-level package holds the manifest); a
            # reader's group names the package holding its manifest file
            value = point.value.partition(":")[0].strip()
            package = value.split(".")[0] if group == ENTRY_POINT_GROUP else value
            if (dist, package) in seen:
                continue
            seen.add((dist, package))
            manifest = _packaged_manifest(point.dist, package, names)
            if manifest is not None:
                yield _found(
                    manifest,
                    "entry-point",
                    readers,
                    import_root=None,
                    fallback_id=point.name,
                    dist=dist,
                )
            else:
                yield DiscoveredPlugin(
                    id=point.name,
                    origin="entry-point",
                    location=Path(dist),
                    status="broken",
                    problem="invalid-manifest",
                    detail=f"distribution {dist!r} ships no {names[0]} in package {package!r}",
                    distribution=dist,
                )


def _packaged_manifest(
    dist: importlib.metadata.Distribution | None, package: str, names: tuple[str, ...]
) -> Path | None:
    """The manifest inside the entry point's package, found without importing it.

    From the distribution's file list; otherwise (an editable install lists no package files)
    from the package's import spec, which runs no code for a top-level package (a dotted one
    imports its parents, as `importlib.resources` would import the package itself).
    """
    parts = tuple(package.split("."))
    files = (dist.files or []) if dist is not None else []
    for name in names:
        for file in files:
            if tuple(file.parts) == (*parts, name):
                return Path(str(file.locate()))
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for name in names:
            if (Path(location) / name).is_file():
                return Path(location) / name
    return None


def _user_dir() -> Path | None:
    try:
        return mnemon_home() / "plugins"
    except DefinitionError:
        return None


def discover_plugins(
    *,
    project_dir: Path | None = None,
    user_dir: Path | None = None,
    bundled_dir: Path | None = None,
    entry_points: bool = True,
) -> Discovery:
    """Find every plugin manifest; import no plugin code.

    Args:
        project_dir: the project's folder (the profile's); `.mnemon/plugins/` in it is read.
        user_dir: the user's drop-in folder (default `$MNEMON_HOME/plugins`).
        bundled_dir: the bundled plugins' folder (default: inside the core package).
        entry_points: whether installed distributions (`mnemon.plugins`, and the groups the
            manifest readers name) are read. The readers themselves are always used.

    Returns:
        Every manifest found, sorted by id; for one id found in several places the highest
        place wins and the others are `shadowed`. An installed distribution whose manifest
        says `bundled = true` ranks as bundled. A broken manifest is listed with its problem
        and hides nothing else.
    """
    readers = _Readers()
    found: list[DiscoveredPlugin] = [
        *_folder_plugins(
            bundled_dir if bundled_dir is not None else BUNDLED_DIR, "bundled", readers
        ),
        *_folder_plugins(user_dir if user_dir is not None else _user_dir(), "user", readers),
        *_folder_plugins(
            project_dir / ".mnemon" / "plugins" if project_dir is not None else None,
            "project",
            readers,
        ),
        *(_entry_point_plugins(readers) if entry_points else ()),
    ]
    # stable: within one id, places keep their priority order
    found.sort(key=lambda plugin: (plugin.id, ORIGINS.index(plugin.origin)))
    winners: dict[str, DiscoveredPlugin] = {}
    result: list[DiscoveredPlugin] = []
    for plugin in found:
        winner = winners.get(plugin.id)
        if winner is None:
            winners[plugin.id] = plugin
        else:
            plugin = replace(
                plugin,
                status="shadowed",
                detail=f"shadowed by the {winner.origin} copy of {winner.id!r}",
            )
        result.append(plugin)
    return Discovery(tuple(_duplicates_marked(result)))


def _contributions(plugin: DiscoveredPlugin) -> tuple[str, ...]:
    """The entry names a winning, valid plugin contributes (none for shadowed or broken ones)."""
    if plugin.manifest is None or plugin.status in ("shadowed", "broken"):
        return ()
    return tuple(entry.name for entry in plugin.manifest.entries)


def _duplicates_marked(plugins: list[DiscoveredPlugin]) -> list[DiscoveredPlugin]:
    """Two plugins contributing one entry name: both broken, each naming the other."""
    owners: dict[str, list[str]] = {}
    for plugin in plugins:
        for name in _contributions(plugin):
            owners.setdefault(name, []).append(plugin.id)
    marked = []
    for plugin in plugins:
        clash = next((name for name in _contributions(plugin) if len(owners[name]) > 1), None)
        if clash is not None:
            plugin = replace(
                plugin,
                status="broken",
                problem="duplicate-contribution",
                detail=f"entry {clash!r} is contributed by "
                + " and ".join(repr(owner) for owner in owners[clash]),
            )
        marked.append(plugin)
    return marked
