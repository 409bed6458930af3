"""The Provider conformance suite for `spaces` Providers, as part of the testing kit.

It lives beside the Provider SDK in `mnemon-source-spaces` (whose types it checks) and is
re-exported here so every conformance suite is found in one place::

    from mnemon_testing.providers import ProviderConformance

Importing this module needs `mnemon-source-spaces` installed.
"""

from __future__ import annotations

try:
    from mnemon_source_spaces.testing import ProviderConformance, SeedMemory
except ImportError as exc:  # pragma: no cover - only without the spaces distribution
    raise ImportError(
        "the Provider suite needs the spaces Source: pip install mnemon-source-spaces"
    ) from exc

__all__ = ["ProviderConformance", "SeedMemory"]
