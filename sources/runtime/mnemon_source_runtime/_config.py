"""The runtime Source's configuration, checked in the factory so bad values fail at mount."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mnemon import DefinitionError, SourceInit, source_data_directory

__all__ = [
    "DEFAULT_IDEMPOTENCY_RECORDS",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_SCOPE_KEYS",
    "MAX_IDEMPOTENCY_RECORDS",
    "SCOPE_KEYS",
    "RuntimeSettings",
    "read_settings",
]

SCOPE_KEYS = ("tenant_id", "user_id", "agent_id", "session_id", "workspace")
DEFAULT_SCOPE_KEYS = ("user_id",)
DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024
MIN_MEMORY_LIMIT_BYTES = 1024
MAX_MEMORY_LIMIT_BYTES = 16 * 1024 * 1024
DEFAULT_LOCK_TIMEOUT = 5.0
MIN_LOCK_TIMEOUT = 0.01
MAX_LOCK_TIMEOUT = 60.0
DEFAULT_IDEMPOTENCY_RECORDS = 256
MIN_IDEMPOTENCY_RECORDS = 1
# about 200 bytes a record: a few megabytes at most beside the capped entries
MAX_IDEMPOTENCY_RECORDS = 10_000
_KNOWN = frozenset(
    {"data_dir", "memory_limit_bytes", "scope_keys", "lock_timeout", "idempotency_records"}
)


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Validated settings of one runtime Source instance."""

    directory: Path
    memory_limit_bytes: int
    scope_keys: tuple[str, ...]
    lock_timeout: float
    idempotency_records: int


def read_settings(init: SourceInit) -> RuntimeSettings:
    """Validate the entry's configuration; touches no file.

    Raises:
        DefinitionError: naming the configuration key at fault.
    """
    config = init.configuration
    unknown = sorted(set(config) - _KNOWN)
    if unknown:
        raise DefinitionError(f"runtime configuration: unknown key {unknown[0]!r}")
    directory = source_data_directory(init, config.get("data_dir"))
    return RuntimeSettings(
        directory=directory,
        memory_limit_bytes=_limit(config.get("memory_limit_bytes", DEFAULT_MEMORY_LIMIT_BYTES)),
        scope_keys=_scope_keys(config.get("scope_keys", DEFAULT_SCOPE_KEYS)),
        lock_timeout=_lock_timeout(config.get("lock_timeout", DEFAULT_LOCK_TIMEOUT)),
        idempotency_records=_idempotency_records(
            config.get("idempotency_records", DEFAULT_IDEMPOTENCY_RECORDS)
        ),
    )


def _limit(value: object) -> int:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not MIN_MEMORY_LIMIT_BYTES <= value <= MAX_MEMORY_LIMIT_BYTES
    ):
        raise DefinitionError(
            "runtime configuration.memory_limit_bytes: must be an integer from "
            f"{MIN_MEMORY_LIMIT_BYTES} to {MAX_MEMORY_LIMIT_BYTES}"
        )
    return value


def _scope_keys(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise DefinitionError(
            "runtime configuration.scope_keys: must be a non-empty list of scope ids"
        )
    for item in value:
        if item not in SCOPE_KEYS:
            raise DefinitionError(
                f"runtime configuration.scope_keys: {item!r} is not one of {', '.join(SCOPE_KEYS)}"
            )
    if len(set(value)) != len(value):
        raise DefinitionError("runtime configuration.scope_keys: duplicate scope id")
    # the order of the keys does not change the partition
    return tuple(key for key in SCOPE_KEYS if key in value)


def _lock_timeout(value: object) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not MIN_LOCK_TIMEOUT <= value <= MAX_LOCK_TIMEOUT
    ):
        raise DefinitionError(
            "runtime configuration.lock_timeout: must be a number of seconds from "
            f"{MIN_LOCK_TIMEOUT} to {MAX_LOCK_TIMEOUT}"
        )
    return float(value)


def _idempotency_records(value: object) -> int:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not MIN_IDEMPOTENCY_RECORDS <= value <= MAX_IDEMPOTENCY_RECORDS
    ):
        raise DefinitionError(
            "runtime configuration.idempotency_records: must be an integer from "
            f"{MIN_IDEMPOTENCY_RECORDS} to {MAX_IDEMPOTENCY_RECORDS}"
        )
    return value
