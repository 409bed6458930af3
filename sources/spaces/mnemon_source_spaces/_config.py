"""The `spaces` Source's configuration, validated in the factory before anything is opened."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, SecretStr, Strict, StringConstraints

from mnemon.sdk import (
    ConfigPath,
    Configuration,
    DefinitionError,
    SourceInit,
    read_configuration,
)

from ._wire import SPACE_PATTERN, json_object

__all__ = [
    "SUBJECT",
    "SpaceLimits",
    "SpaceSettings",
    "SpacesSettings",
    "configuration_error",
    "read_settings",
]

SUBJECT = "spaces"
SCOPE_KEYS = ("tenant_id", "user_id", "agent_id", "session_id", "workspace")
#: scope ids a space may be split by (the tenant splits every space, with no setting)
PARTITION_KEYS = SCOPE_KEYS[1:]
MAX_SPACES = 32
MAX_DESCRIPTION = 500
DEFAULT_TIMEOUT = 8.0
MAX_TIMEOUT = 120.0


def configuration_error(key: str, rule: str) -> DefinitionError:
    """A refusal naming `key` in the form every Source's configuration errors take."""
    return DefinitionError(f"{SUBJECT} configuration.{key}: {rule}")


# pydantic's own words ("Input should be ...") for these would not say what to write instead


def _flag(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _scope_key(value: Any) -> Any:
    if value not in SCOPE_KEYS:
        raise ValueError(f"must be one of {', '.join(SCOPE_KEYS)}")
    return value


def _partition_key(value: Any) -> Any:
    if value == "tenant_id":
        raise ValueError("tenant_id partitions every space whenever the scope has one")
    if value not in PARTITION_KEYS:
        raise ValueError(f"must be one of {', '.join(PARTITION_KEYS)}")
    return value


def _list_of(what: str, *, at_most: int | None = None) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not isinstance(value, list | tuple) or not value:
            raise ValueError(f"must be a non-empty list of {what}")
        if at_most is not None and len(value) > at_most:
            raise ValueError(f"at most {at_most} {what}")
        return value

    return BeforeValidator(check)


def _partition_list(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of scope ids")
    return value


def _description(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DESCRIPTION:
        raise ValueError(f"must be text of 1 to {MAX_DESCRIPTION} characters")
    return value


def _seconds(value: Any) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_TIMEOUT
    ):
        raise ValueError(f"must be a number of seconds in (0, {MAX_TIMEOUT:g}]")
    return value


def _token(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


# a vector space id, as the core's `VectorSpace.id` takes it
SPACE_ID_PATTERN = r"[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*"


def _vectors(value: Any) -> Any:
    if value in ("auto", "off"):
        return value
    if not isinstance(value, str) or len(value) > 64 or not re.fullmatch(SPACE_ID_PATTERN, value):
        raise ValueError('must be "auto", "off" or a vector space id')
    return value


def _provider(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError('must be an object such as {"type": "sqlite"}')
    kind = value.get("type", "sqlite")
    if not isinstance(kind, str) or not kind:
        raise ValueError("type must be a Provider type id")
    try:
        return json_object({**value, "type": kind})
    except ValueError:
        raise ValueError("must hold JSON values only") from None


ScopeKey = Annotated[str, BeforeValidator(_scope_key)]
PartitionKey = Annotated[str, BeforeValidator(_partition_key)]


MAX_MEMORIES_LIMIT = 10_000_000
MAX_AGE_DAYS = 36_500


def _count_limit(value: Any) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_MEMORIES_LIMIT
    ):
        raise ValueError(f"must be a whole number of memories, 1 to {MAX_MEMORIES_LIMIT}")
    return value


def _days(value: Any) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_AGE_DAYS
    ):
        raise ValueError(f"must be a number of days in (0, {MAX_AGE_DAYS}]")
    return value


def _then(value: Any) -> Any:
    if value not in ("archive", "forget"):
        raise ValueError('must be "archive" (into archive_to) or "forget"')
    return value


class SpaceLimits(Configuration):
    """How much one space keeps, and what happens past it (only when maintenance runs)."""

    max_memories: Annotated[int, BeforeValidator(_count_limit)] | None = None
    """The most memories the space keeps; the oldest past it are moved on."""
    max_age_days: Annotated[float, BeforeValidator(_days)] | None = None
    """The oldest a memory may be, in days; older ones are moved on."""
    then: Annotated[str, BeforeValidator(_then)]
    """What happens past a limit: `archive` (into `archive_to`) or `forget`."""
    archive_to: Annotated[str, Strict(), StringConstraints(pattern=SPACE_PATTERN)] | None = None
    """The colder space archived memories go to (with `then = "archive"`)."""


class SpaceSettings(Configuration):
    """One configured space."""

    name: Annotated[str, Strict(), StringConstraints(pattern=SPACE_PATTERN)]
    """The space's name, unique in the entry."""
    writable: Annotated[bool, BeforeValidator(_flag)] = False
    """Whether the model may write there."""
    description: Annotated[str, BeforeValidator(_description)] | None = None
    """What the space holds, shown to the model (at most 500 characters)."""
    partition_by: Annotated[tuple[PartitionKey, ...], BeforeValidator(_partition_list)] = ()
    """Scope ids that split this space further whenever the scope carries them."""
    limits: SpaceLimits | None = None
    """What the space keeps (most memories, oldest age) and what maintenance does past it."""


class SpacesSettings(Configuration):
    """A spaces Source: its Provider, its spaces, and the scope ids every space needs."""

    data_dir: ConfigPath | None = Field(default=None, title="Data folder")
    """Base folder: this entry's data goes in `<data_dir>/sources/spaces/<entry>/`; default:
    the host's data folder."""
    # never in a repr: it may hold a credential
    provider: Annotated[dict[str, Any], BeforeValidator(_provider)] = Field(
        default_factory=lambda: {"type": "sqlite"}, repr=False
    )
    """The Provider: `type` picks it, the other keys are its own configuration."""
    spaces: Annotated[tuple[SpaceSettings, ...], _list_of("spaces", at_most=MAX_SPACES)] = (
        SpaceSettings(name="memories", writable=True),
    )
    """1 to 32 spaces, each a `name`, whether it is `writable`, an optional `description`
    and `partition_by`."""
    scope_keys: Annotated[tuple[ScopeKey, ...], _list_of("scope ids")] = ("user_id",)
    """The scope ids every space needs; a scope lacking one makes the Source unavailable."""
    default_space: str | None = None
    """Where `remember` writes when it names no space; default: the first writable one."""
    # the bounds are for the schema: `_seconds` refuses a value out of them first, in words
    provider_timeout: Annotated[
        float,
        Field(gt=0, le=MAX_TIMEOUT, title="Provider timeout (seconds)"),
        BeforeValidator(_seconds),
    ] = DEFAULT_TIMEOUT
    """Seconds any one Provider call may take before it fails as `timeout`."""
    provider_token: Annotated[SecretStr, BeforeValidator(_token)] | None = None
    """A credential handed to the Provider; a secret, never shown."""
    vectors: Annotated[str, BeforeValidator(_vectors)] = "auto"
    """Recall by meaning: `auto` (the only vector space installed, if there is exactly one),
    `off`, or the id of an installed space."""

    @property
    def provider_type(self) -> str:
        """The configured Provider type id."""
        return str(self.provider["type"])

    @property
    def provider_configuration(self) -> dict[str, Any]:
        """What the Provider's factory receives: the `provider` object without `type`."""
        return {key: value for key, value in self.provider.items() if key != "type"}

    @property
    def write_space(self) -> str | None:
        """Where `remember` writes when no space is named: the default, else the first writable."""
        if self.default_space is not None:
            return self.default_space
        return next((space.name for space in self.spaces if space.writable), None)

    def space(self, name: str) -> SpaceSettings | None:
        """The space called `name`, if configured."""
        return next((space for space in self.spaces if space.name == name), None)


def read_settings(init: SourceInit) -> SpacesSettings:
    """Validate the Source's configuration: each value, then how the values fit together.

    Raises:
        DefinitionError: naming the key at fault (`spaces configuration.<key>: ...`); values
            are never quoted, so a secret cannot leak through the message.
    """
    settings = read_configuration(SpacesSettings, init, subject=SUBJECT)
    for index, key in enumerate(settings.scope_keys):
        if key in settings.scope_keys[:index]:
            raise configuration_error(f"scope_keys[{index}]", "duplicate scope id")
    names: set[str] = set()
    for index, space in enumerate(settings.spaces):
        where = f"spaces[{index}]"
        if space.name in names:
            raise configuration_error(f"{where}.name", f"duplicate space {space.name!r}")
        names.add(space.name)
        for at, key in enumerate(space.partition_by):
            if key in settings.scope_keys:
                raise configuration_error(
                    f"{where}.partition_by[{at}]", "already required by scope_keys"
                )
            if key in space.partition_by[:at]:
                raise configuration_error(f"{where}.partition_by[{at}]", "duplicate scope id")
    for index, space in enumerate(settings.spaces):
        _check_limits(settings, f"spaces[{index}].limits", space)
    if settings.default_space is not None:
        chosen = settings.space(settings.default_space)
        if chosen is None:
            raise configuration_error("default_space", "must name a configured space")
        if not chosen.writable:
            raise configuration_error("default_space", "must name a writable space")
    return settings


def _check_limits(settings: SpacesSettings, where: str, space: SpaceSettings) -> None:
    limits = space.limits
    if limits is None:
        return
    if limits.max_memories is None and limits.max_age_days is None:
        raise configuration_error(where, "name max_memories, max_age_days or both")
    if limits.then == "forget":
        if limits.archive_to is not None:
            raise configuration_error(f"{where}.archive_to", 'only with then = "archive"')
        return
    if limits.archive_to is None:
        raise configuration_error(f"{where}.archive_to", 'required with then = "archive"')
    target = settings.space(limits.archive_to)
    if target is None:
        raise configuration_error(f"{where}.archive_to", "must name a configured space")
    if target.name == space.name:
        raise configuration_error(f"{where}.archive_to", "must name another space")
    if target.partition_by != space.partition_by:
        raise configuration_error(
            f"{where}.archive_to", "must name a space split by the same partition_by"
        )
