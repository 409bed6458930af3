"""Raven's `raven-plugin.toml`, read for mnemon's plugin discovery (`mnemon.manifest_readers`).

A module of its own, apart from the Raven adapter's package: discovery imports it to read a
Raven plugin's manifest, and it imports nothing of the adapter, so listing plugins stays light.
It also names Raven's own entry-point group, `raven.plugins`, whose distributions name the
package holding their `raven-plugin.toml`.
"""

from __future__ import annotations

import importlib.util
import tomllib
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Strict, StringConstraints

__all__ = ["RavenManifestReader", "read_raven_manifest"]

# the package that hosts Raven memory backends: found without importing it
HOST_PACKAGE = "mnemon_source_raven"
HOST_DISTRIBUTION = "mnemon-source-raven"

_Id = Annotated[str, StringConstraints(min_length=1, max_length=64, strict=True)]
_Text = Annotated[str, StringConstraints(min_length=1, max_length=400, strict=True)]
_Flag = Annotated[bool, Strict()]


class _Ignoring(BaseModel):
    # Raven's manifest has more keys than mnemon reads; those it does not read are ignored
    model_config = ConfigDict(frozen=True, extra="ignore", strict=False)


class _Backend(_Ignoring):
    name: _Id
    factory: _Text


class _Contributes(_Ignoring):
    # Raven has more contribution kinds; those mnemon does not host are ignored
    memory_backends: tuple[_Backend, ...] = ()


class _Plugin(_Ignoring):
    # Raven's minimal manifest: `id`, `version`, `bundled` and the memory backends
    id: _Id
    version: _Text
    display_name: _Text | None = None
    raven: _Text | None = None
    description: str = ""
    bundled: _Flag = False
    enabled_by_default: _Flag = True
    config_schema: Any = None
    contributes: _Contributes = _Contributes()


class _File(_Ignoring):
    plugin: _Plugin


def _hosted() -> bool:
    """Whether Raven memory backends can be hosted: the adapter's package is installed."""
    try:
        return importlib.util.find_spec(HOST_PACKAGE) is not None
    except (ImportError, ValueError):
        return False


def read_raven_manifest(text: str) -> dict[str, Any]:
    """A `raven-plugin.toml` as mnemon's manifest data: each memory backend an entry.

    Raises:
        tomllib.TOMLDecodeError: the text is not TOML.
        pydantic.ValidationError: the manifest lacks a key Raven requires, or has a wrong type.
    """
    raven = _File.model_validate(tomllib.loads(text)).plugin
    unsupported = not _hosted()
    schema = raven.config_schema if raven.config_schema is not None else {"type": "object"}
    return {
        "format": "raven",
        "id": raven.id,
        "version": raven.version,
        "display_name": raven.display_name or raven.id,
        "description": raven.description,
        "requires": raven.raven,
        "bundled": raven.bundled,
        "enabled_by_default": raven.enabled_by_default,
        "entries": [
            {
                "name": backend.name,
                "plugin": backend.factory,
                "config_schema": schema,
                "unsupported": unsupported,
            }
            for backend in raven.contributes.memory_backends
        ],
        "hosted_by": {
            "plugin": "raven",
            "key": "backend",
            "kind": "memory backend",
            "distribution": HOST_DISTRIBUTION,
        },
    }


class RavenManifestReader:
    """The reader discovery calls for `raven-plugin.toml`, and the groups it scans besides."""

    entry_point_groups = ("raven.plugins",)

    def __call__(self, text: str) -> dict[str, Any]:
        """The manifest's data (see `read_raven_manifest`)."""
        return read_raven_manifest(text)


#: `mnemon.manifest_readers`: `raven-plugin.toml = "mnemon_source_raven_manifest:reader"`
reader = RavenManifestReader()
