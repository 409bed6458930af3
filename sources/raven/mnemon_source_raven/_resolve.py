"""Finding a backend factory: a `module:callable` path, or a name a discovered plugin declares."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from mnemon import DefinitionError

from ._contract import BackendFactory

__all__ = ["register_memory_backend", "resolve_backend_factory", "resolve_memory_backend"]

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


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

    Manifest discovery registers every `memory_backends` name it reads here.

    Raises:
        DefinitionError: `name` is not a backend name, or is already registered.
    """
    if not _NAME.fullmatch(name):
        raise DefinitionError(f"memory backend name {name!r} must match {_NAME.pattern}")
    if name in _NAMED:
        raise DefinitionError(f"memory backend {name!r} is already registered")
    _NAMED[name] = load


def resolve_memory_backend(name: str) -> BackendFactory:
    """The factory of the backend called `name` in a discovered `raven-plugin.toml`.

    Raises:
        DefinitionError: no discovered plugin declares `name`, or its factory failed to load.
    """
    load = _NAMED.get(name)
    if load is None:
        known = ", ".join(sorted(_NAMED)) or "none are registered"
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


def resolve_backend_factory(spec: str) -> BackendFactory:
    """The factory `spec` names: `package.module:make_backend`, or a registered backend name.

    Raises:
        DefinitionError: the spec is malformed, its module or attribute is missing, or the
            attribute is not callable. The message names the key, not the module's errors.
    """
    if ":" not in spec and _NAME.fullmatch(spec):
        return resolve_memory_backend(spec)
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
