"""Stand-ins for the `raven` modules a backend imports, registered only when Raven is absent.

A backend written for Raven imports `Memory` from `raven.memory_engine` (or
`raven.memory_engine.backend`, beside `MemoryBackend`) and `PluginContext` from `raven.plugin`
(or `raven.plugins`). `install_raven_shim()` registers this package's declarations under those
names, so such a backend runs unchanged without Raven installed.
"""

from __future__ import annotations

import importlib.util
import sys
import types

from ._contract import BackendContext, BackendServices, Memory, MemoryBackend

__all__ = ["install_raven_shim"]

_MODULES: dict[str, dict[str, object] | None] = {
    "raven": None,
    "raven.memory_engine": {"Memory": Memory, "MemoryBackend": MemoryBackend},
    "raven.memory_engine.backend": {"Memory": Memory, "MemoryBackend": MemoryBackend},
    "raven.plugin": {"PluginContext": BackendContext, "ServiceLocator": BackendServices},
    "raven.plugins": {"PluginContext": BackendContext, "ServiceLocator": BackendServices},
}


def _raven_installed() -> bool:
    present = sys.modules.get("raven")
    if present is not None:
        return not getattr(present, "__mnemon_shim__", False)
    try:
        return importlib.util.find_spec("raven") is not None
    except (ImportError, ValueError):  # `raven` set to None in sys.modules: treated as absent
        return False


def install_raven_shim() -> bool:
    """Make Raven's backend-facing modules importable; False when the real `raven` is there.

    The real package always wins: nothing is registered when `raven` can be imported (even a
    different project of that name, which then hides these modules). Calling it again is
    harmless.
    """
    if _raven_installed():
        return False
    for name, exported in _MODULES.items():
        module = sys.modules.get(name) or types.ModuleType(name)
        module.__mnemon_shim__ = True  # type: ignore[attr-defined]
        module.__path__ = []  # a package: a child it lacks fails as a missing module
        for attribute, value in (exported or {}).items():
            setattr(module, attribute, value)
        sys.modules[name] = module
    for name in _MODULES:
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
    return True
