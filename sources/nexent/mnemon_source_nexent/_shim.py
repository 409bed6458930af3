"""Stand-ins for `nexent.memory.models`, `nexent.memory.providers.base` and `...retry`.

Unmodified Nexent providers import their models, protocols and exceptions from Nexent's SDK;
when that SDK is absent, `install_nexent_shim()` registers this package's declarations under
those module names.
"""

from __future__ import annotations

import importlib.util
import sys
import types

from . import models

__all__ = ["install_nexent_shim"]

_MODEL_NAMES = (
    "MemoryIngestRequest",
    "MemoryIngestResult",
    "MemoryIngestUnit",
    "MemoryLayer",
    "MemorySearchRequest",
    "MemorySearchResult",
    "MemoryType",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderErrorSeverity",
    "UnitIngestResult",
    "UnitIngestStatus",
)
_BASE_NAMES = ("BaseMemoryProvider", "IngestibleMemoryProvider", "SearchableMemoryProvider")
_RETRY_NAMES = (
    "DegradableProviderError",
    "NonRetryableProviderError",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderErrorSeverity",
    "RetryableProviderError",
)


def install_nexent_shim() -> bool:
    """Make Nexent's provider modules importable; False when the real Nexent is there.

    The real package always wins: nothing is registered when `nexent` can be imported.
    """
    if "nexent" in sys.modules and not getattr(sys.modules["nexent"], "__mnemon_shim__", False):
        return False
    if "nexent" not in sys.modules and importlib.util.find_spec("nexent") is not None:
        return False
    names = {
        "nexent": None,
        "nexent.memory": None,
        "nexent.memory.providers": None,
        "nexent.memory.models": _MODEL_NAMES,
        "nexent.memory.providers.base": _BASE_NAMES,
        "nexent.memory.providers.retry": _RETRY_NAMES,
    }
    for name, exported in names.items():
        module = sys.modules.get(name) or types.ModuleType(name)
        module.__mnemon_shim__ = True  # type: ignore[attr-defined]
        if exported is None:
            module.__path__ = []  # a package, so its children import
        else:
            for attribute in exported:
                setattr(module, attribute, getattr(models, attribute))
        sys.modules[name] = module
    for name in names:
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
    return True
