"""Finding a backend factory: a `module:callable` path, or a name a discovered plugin declares.

A configuration that names nothing usable (a malformed path, an unknown name, a module that
does not exist) is a `DefinitionError`. A factory whose module exists but fails to import (a
dependency missing, an error in its code) is `BackendImportFailed`, a `DefinitionError` the
Source turns into an unavailable backend, as Raven's contract asks, instead of a refused
profile.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemon import discover_plugins
from mnemon.sdk import DefinitionError, InstallError

from ._contract import BackendFactory
from ._noop import substrate_missing

__all__ = [
    "BackendImportFailed",
    "check_backend_config",
    "register_memory_backend",
    "resolve_backend_factory",
    "resolve_memory_backend",
]

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# a `memory_backends` name as a `raven-plugin.toml` writes it
_NAME = re.compile(r"^(?=.{1,64}$)[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
# what the `everos` backend needs beyond this package: its extra
_EVEROS_EXTRA = ("httpx", "sniffio", "httpcore", "h11", "certifi", "idna")


class BackendImportFailed(DefinitionError):
    """The factory's module exists but could not be imported; the backend is unavailable."""


@dataclass(frozen=True)
class _Named:
    load: Callable[[], BackendFactory]
    check: Callable[[Mapping[str, Any]], None] | None = None


def _everos_module() -> Any:
    try:
        return importlib.import_module("mnemon_source_raven.everos")
    except ModuleNotFoundError as exc:
        if exc.name not in _EVEROS_EXTRA:
            raise
        return None


def _everos() -> BackendFactory:
    module = _everos_module()
    if module is None:
        # Raven's rule for a bundled backend whose substrate is missing: a no-op, logged once
        return substrate_missing("everos", "pip install 'mnemon-source-raven[everos]'")
    factory: BackendFactory = module.make_backend
    return factory


def _everos_check(config: Mapping[str, Any]) -> None:
    module = _everos_module()
    if module is not None:  # without its substrate there is nothing to check it against
        module.EverosSettings.read(config)


# backend names, each with a loader that imports its factory only when an instance is built:
# the built-in `everos`, and names registered by code
_NAMED: dict[str, _Named] = {"everos": _Named(_everos, _everos_check)}


def register_memory_backend(
    name: str,
    load: Callable[[], BackendFactory],
    *,
    check: Callable[[Mapping[str, Any]], None] | None = None,
) -> None:
    """Make `name` usable as `backend`; `load()` imports and returns its factory when needed.

    A registered name wins over a discovered `raven-plugin.toml` declaring the same name.
    `check(backend_config)`, when given, runs when an entry is mounted and raises
    `DefinitionError` naming a bad key, so a bad configuration is refused at once instead of
    leaving every identity's backend unavailable.

    Raises:
        DefinitionError: `name` is not a backend name, or is already registered.
    """
    if not _NAME.fullmatch(name):
        raise DefinitionError(f"memory backend name {name!r} must match {_NAME.pattern}")
    if name in _NAMED:
        raise DefinitionError(f"memory backend {name!r} is already registered")
    _NAMED[name] = _Named(load, check)


def check_backend_config(spec: str, config: Mapping[str, Any]) -> None:
    """Run the configuration check a registered backend `spec` has (others have none).

    Raises:
        DefinitionError: the check refused `config`; the message names the key.
    """
    named = _NAMED.get(spec)
    if named is not None and named.check is not None:
        named.check(config)


def resolve_memory_backend(name: str, *, project_dir: Path | None = None) -> BackendFactory:
    """The factory of the backend called `name`: built in, registered, or discovered.

    Built-in (`everos`) and registered names come first; otherwise mnemon's plugin discovery
    looks for a `raven-plugin.toml` declaring `name` in its `memory_backends`, bundled, in the
    user's plugin folder, the project's (`project_dir/.mnemon/plugins`) and installed
    distributions (`mnemon.plugins` and `raven.plugins`), and imports that factory (a drop-in
    folder's code under a private module name).

    Raises:
        BackendImportFailed: the discovered plugin's factory failed to import.
        DefinitionError: no backend has that name, or a registered loader failed.
    """
    named = _NAMED.get(name)
    if named is None:
        return _discovered(name, project_dir)
    try:
        return named.load()
    except DefinitionError:
        raise
    except Exception:
        raise BackendImportFailed(
            f"raven-backend configuration.backend: the factory of {name!r} could not be loaded"
        ) from None


def _discovered(name: str, project_dir: Path | None) -> BackendFactory:
    discovery = discover_plugins(project_dir=project_dir)
    raven = [
        plugin
        for plugin in discovery
        if plugin.manifest is not None
        and plugin.manifest.format == "raven"
        and plugin.status not in ("shadowed", "broken")
    ]
    for plugin in raven:
        if any(entry.name == name for entry in plugin.manifest.entries):  # type: ignore[union-attr]
            try:
                factory: BackendFactory = plugin.load_object(name)
            except InstallError as exc:
                # names the plugin and the exception type, never its text
                raise BackendImportFailed(f"raven-backend configuration.backend: {exc}") from None
            if not callable(factory):
                raise DefinitionError(
                    f"raven-backend configuration.backend: {name!r} of plugin "
                    f"{plugin.id!r} is not callable"
                )
            return factory
    discovered = {e.name for p in raven for e in p.manifest.entries}  # type: ignore[union-attr]
    known = ", ".join(sorted(set(_NAMED) | discovered))
    raise DefinitionError(
        f"raven-backend configuration.backend: no memory backend named {name!r} "
        f"(known: {known}); give a `module:callable` factory instead"
    )


def _missing_itself(failure: ModuleNotFoundError, module_name: str) -> bool:
    """Whether the module the path names (or a package above it) does not exist at all."""
    missing = failure.name or ""
    return module_name == missing or module_name.startswith(missing + ".")


def resolve_backend_factory(spec: str, *, project_dir: Path | None = None) -> BackendFactory:
    """The factory `spec` names: `package.module:make_backend`, or a backend name.

    A name is resolved by `resolve_memory_backend` (`project_dir` is the profile's folder).

    Raises:
        BackendImportFailed: the module exists but failed to import (a dependency missing,
            an exception while it ran); the message names the exception type only.
        DefinitionError: the spec is malformed, its module or attribute is missing, or the
            attribute is not callable. The message names the key, not the module's errors.
    """
    if ":" not in spec and _NAME.fullmatch(spec):
        return resolve_memory_backend(spec, project_dir=project_dir)
    if not _PATH.fullmatch(spec):
        raise DefinitionError(
            "raven-backend configuration.backend: must be `module:callable` or a backend name"
        )
    module_name, _, attribute = spec.partition(":")
    try:
        target: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if _missing_itself(exc, module_name):
            raise DefinitionError(
                f"raven-backend configuration.backend: cannot import {spec!r}: no such module"
            ) from None
        raise BackendImportFailed(
            f"raven-backend configuration.backend: importing {spec!r} failed: it imports "
            f"{exc.name!r}, which is not installed"
        ) from None
    except Exception as exc:
        raise BackendImportFailed(
            f"raven-backend configuration.backend: importing {spec!r} failed ({type(exc).__name__})"
        ) from None
    try:
        for part in attribute.split("."):
            target = getattr(target, part)
    except AttributeError:
        raise DefinitionError(
            f"raven-backend configuration.backend: cannot import {spec!r}: no such attribute"
        ) from None
    if not callable(target):
        raise DefinitionError(f"raven-backend configuration.backend: {spec!r} is not callable")
    return target
