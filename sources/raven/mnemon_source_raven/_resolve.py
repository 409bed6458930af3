"""Finding a backend factory: a `module:callable` path, or a name a discovered plugin declares."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

from mnemon import DefinitionError, InstallError, discover_plugins

from ._contract import BackendFactory

__all__ = ["register_memory_backend", "resolve_backend_factory", "resolve_memory_backend"]

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# a `memory_backends` name as a `raven-plugin.toml` writes it
_NAME = re.compile(r"^(?=.{1,64}$)[a-z0-9_-]+(\.[a-z0-9_-]+)*$")


def _everos() -> BackendFactory:
    try:
        module = importlib.import_module("mnemon_source_raven.everos")
    except ModuleNotFoundError as exc:
        if exc.name != "httpx":
            raise
        raise DefinitionError(
            "raven-backend configuration.backend: 'everos' needs httpx: "
            "pip install 'mnemon-source-raven[everos]'"
        ) from None
    factory: BackendFactory = module.make_backend
    return factory


# backend names, each with a loader that imports its factory only when an instance is built:
# the built-in `everos`, and names registered by code
_NAMED: dict[str, Callable[[], BackendFactory]] = {"everos": _everos}


def register_memory_backend(name: str, load: Callable[[], BackendFactory]) -> None:
    """Make `name` usable as `backend`; `load()` imports and returns its factory when needed.

    A registered name wins over a discovered `raven-plugin.toml` declaring the same name.

    Raises:
        DefinitionError: `name` is not a backend name, or is already registered.
    """
    if not _NAME.fullmatch(name):
        raise DefinitionError(f"memory backend name {name!r} must match {_NAME.pattern}")
    if name in _NAMED:
        raise DefinitionError(f"memory backend {name!r} is already registered")
    _NAMED[name] = load


def resolve_memory_backend(name: str, *, project_dir: Path | None = None) -> BackendFactory:
    """The factory of the backend called `name`: built in, registered, or discovered.

    Built-in (`everos`) and registered names come first; otherwise mnemon's plugin discovery
    looks for a `raven-plugin.toml` declaring `name` in its `memory_backends`, in the user's
    plugin folder, the project's (`project_dir/.mnemon/plugins`) and installed distributions,
    and imports that factory (a drop-in folder's code under a private module name).

    Raises:
        DefinitionError: no backend has that name, or its factory failed to load.
    """
    load = _NAMED.get(name)
    if load is None:
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
                    raise DefinitionError(f"raven-backend configuration.backend: {exc}") from None
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
    try:
        return load()
    except DefinitionError:
        raise
    except Exception:
        raise DefinitionError(
            f"raven-backend configuration.backend: the factory of {name!r} could not be loaded"
        ) from None


def resolve_backend_factory(spec: str, *, project_dir: Path | None = None) -> BackendFactory:
    """The factory `spec` names: `package.module:make_backend`, or a backend name.

    A name is resolved by `resolve_memory_backend` (`project_dir` is the profile's folder).

    Raises:
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
        for part in attribute.split("."):
            target = getattr(target, part)
    except Exception:
        raise DefinitionError(
            f"raven-backend configuration.backend: cannot import {spec!r}"
        ) from None
    if not callable(target):
        raise DefinitionError(f"raven-backend configuration.backend: {spec!r} is not callable")
    return target
