"""The `spaces` Source's configuration, validated in the factory before anything is opened."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemon import DefinitionError

from ._wire import SPACE_PATTERN, check_json

__all__ = [
    "ALWAYS_PARTITIONS",
    "SCOPE_KEYS",
    "SpaceSettings",
    "SpacesSettings",
    "parse_configuration",
]

SUBJECT = "spaces configuration"
SCOPE_KEYS = ("tenant_id", "user_id", "agent_id", "session_id", "workspace")
#: scope ids that partition every space whenever the scope carries them, with no setting
ALWAYS_PARTITIONS = ("tenant_id",)
SPACE_KEYS = ("name", "writable", "description", "partition_by")
TOP_LEVEL_KEYS = (
    "data_dir",
    "provider",
    "spaces",
    "scope_keys",
    "default_space",
    "provider_timeout",
    "provider_token",
)
MAX_SPACES = 32
MAX_DESCRIPTION = 500
DEFAULT_TIMEOUT = 8.0
MAX_TIMEOUT = 120.0
DEFAULT_SPACES = ({"name": "memories", "writable": True},)
_SPACE = re.compile(SPACE_PATTERN)


@dataclass(frozen=True, slots=True)
class SpaceSettings:
    """One configured space."""

    name: str
    writable: bool
    description: str | None = None
    #: scope ids that split this space further whenever the scope carries them
    partition_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SpacesSettings:
    """The whole validated configuration; the token never shows in its repr."""

    data_dir: str | None
    provider_type: str
    provider_configuration: Mapping[str, Any] = field(repr=False)
    spaces: tuple[SpaceSettings, ...]
    scope_keys: tuple[str, ...]
    default_space: str | None
    provider_timeout: float
    provider_token: str | None = field(default=None, repr=False)

    def space(self, name: str) -> SpaceSettings | None:
        """The space called `name`, if configured."""
        return next((space for space in self.spaces if space.name == name), None)


def _fail(path: str, problem: str) -> DefinitionError:
    return DefinitionError(f"{SUBJECT}.{path}: {problem}" if path else f"{SUBJECT}: {problem}")


def _partition_by(raw: Any, where: str, scope_keys: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple):
        raise _fail(where, "must be a list of scope ids")
    keys: list[str] = []
    for index, key in enumerate(raw):
        at = f"{where}[{index}]"
        if key in ALWAYS_PARTITIONS:
            raise _fail(at, "tenant_id partitions every space whenever the scope has one")
        if key not in SCOPE_KEYS:
            raise _fail(at, f"must be one of {', '.join(SCOPE_KEYS[1:])}")
        if key in scope_keys:
            raise _fail(at, "already required by scope_keys")
        if key in keys:
            raise _fail(at, "duplicate scope id")
        keys.append(key)
    return tuple(keys)


def _spaces(raw: Any, scope_keys: tuple[str, ...]) -> tuple[SpaceSettings, ...]:
    if not isinstance(raw, list | tuple) or not raw:
        raise _fail("spaces", "must be a non-empty list of spaces")
    if len(raw) > MAX_SPACES:
        raise _fail("spaces", f"at most {MAX_SPACES} spaces")
    spaces: list[SpaceSettings] = []
    for index, item in enumerate(raw):
        where = f"spaces[{index}]"
        if not isinstance(item, Mapping):
            raise _fail(where, "must be an object with name and writable")
        unknown = sorted(set(item) - set(SPACE_KEYS))
        if unknown:
            raise _fail(f"{where}.{unknown[0]}", "unknown key")
        name = item.get("name")
        if not isinstance(name, str) or not _SPACE.match(name):
            raise _fail(f"{where}.name", f"must match {SPACE_PATTERN}")
        if any(space.name == name for space in spaces):
            raise _fail(f"{where}.name", f"duplicate space {name!r}")
        writable = item.get("writable", False)
        if not isinstance(writable, bool):
            raise _fail(f"{where}.writable", "must be true or false")
        description = item.get("description")
        if description is not None and (
            not isinstance(description, str)
            or not description.strip()
            or len(description) > MAX_DESCRIPTION
        ):
            raise _fail(
                f"{where}.description", f"must be text of 1 to {MAX_DESCRIPTION} characters"
            )
        partition_by = _partition_by(
            item.get("partition_by", ()), f"{where}.partition_by", scope_keys
        )
        spaces.append(SpaceSettings(name, writable, description, partition_by))
    return tuple(spaces)


def _scope_keys(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or not raw:
        raise _fail("scope_keys", "must be a non-empty list of scope ids")
    keys: list[str] = []
    for index, key in enumerate(raw):
        if key not in SCOPE_KEYS:
            raise _fail(f"scope_keys[{index}]", f"must be one of {', '.join(SCOPE_KEYS)}")
        if key in keys:
            raise _fail(f"scope_keys[{index}]", "duplicate scope id")
        keys.append(key)
    return tuple(keys)


def _provider(raw: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(raw, Mapping):
        raise _fail("provider", 'must be an object such as {"type": "sqlite"}')
    kind = raw.get("type", "sqlite")
    if not isinstance(kind, str) or not kind:
        raise _fail("provider.type", "must be a Provider type id")
    rest = {key: value for key, value in raw.items() if key != "type"}
    try:
        check_json(rest, "provider")
    except ValueError:
        raise _fail("provider", "must hold JSON values only") from None
    return kind, rest


def parse_configuration(raw: Mapping[str, Any]) -> SpacesSettings:
    """Validate the Source's configuration.

    Raises:
        DefinitionError: naming the first key at fault (`spaces configuration.<key>: ...`);
            values are never quoted, so a secret cannot leak through the message.
    """
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise _fail(unknown[0], "unknown key")
    data_dir = raw.get("data_dir")
    if data_dir is not None and (not isinstance(data_dir, str) or not Path(data_dir).is_absolute()):
        raise _fail("data_dir", "must be an absolute path")
    kind, provider = _provider(raw.get("provider", {"type": "sqlite"}))
    scope_keys = _scope_keys(raw.get("scope_keys", ["user_id"]))
    spaces = _spaces(raw.get("spaces", list(DEFAULT_SPACES)), scope_keys)
    default = raw.get("default_space")
    if default is not None:
        chosen = next((space for space in spaces if space.name == default), None)
        if chosen is None:
            raise _fail("default_space", "must name a configured space")
        if not chosen.writable:
            raise _fail("default_space", "must name a writable space")
    else:
        default = next((space.name for space in spaces if space.writable), None)
    timeout = raw.get("provider_timeout", DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise _fail("provider_timeout", f"must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    token = raw.get("provider_token")
    if token is not None and (not isinstance(token, str) or not token):
        raise _fail("provider_token", "must be a non-empty string")
    return SpacesSettings(
        data_dir=data_dir,
        provider_type=kind,
        provider_configuration=provider,
        spaces=spaces,
        scope_keys=scope_keys,
        default_space=default,
        provider_timeout=float(timeout),
        provider_token=token,
    )
