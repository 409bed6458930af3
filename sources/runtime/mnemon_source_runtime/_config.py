"""The runtime Source's configuration, checked in the factory so bad values fail at mount."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from mnemon.sdk import (
    ConfigPath,
    Configuration,
    SourceInit,
    read_configuration,
    source_data_directory,
)

__all__ = [
    "DEFAULT_IDEMPOTENCY_RECORDS",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_SCOPE_KEYS",
    "MAX_IDEMPOTENCY_RECORDS",
    "SCOPE_KEYS",
    "RuntimeConfiguration",
    "RuntimeSettings",
    "read_settings",
]

ScopeKey = Literal["tenant_id", "user_id", "agent_id", "session_id", "workspace"]
SCOPE_KEYS: tuple[ScopeKey, ...] = ("tenant_id", "user_id", "agent_id", "session_id", "workspace")
DEFAULT_SCOPE_KEYS: tuple[ScopeKey, ...] = ("user_id",)
DEFAULT_MEMORY_LIMIT_BYTES = 64 * 1024
DEFAULT_LOCK_TIMEOUT = 5.0
DEFAULT_IDEMPOTENCY_RECORDS = 256
DEFAULT_POSTGRES_SCHEMA = "mnemon_runtime"
# about 200 bytes a record: a few megabytes at most beside the capped entries
MAX_IDEMPOTENCY_RECORDS = 10_000


class RuntimeConfiguration(Configuration):
    """What an entry of the runtime Source may configure (unknown keys are refused)."""

    data_dir: ConfigPath | None = Field(default=None, title="Data folder")
    """Base folder: this entry's files go in `<data_dir>/sources/runtime/<entry>/`; default:
    the host's data folder."""
    memory_limit_bytes: Annotated[
        int, Field(strict=True, ge=1024, le=16 * 1024 * 1024, title="Memory limit (bytes)")
    ] = DEFAULT_MEMORY_LIMIT_BYTES
    """The cap on one partition's memory, in bytes (its idempotency records not counted)."""
    scope_keys: Annotated[tuple[ScopeKey, ...], Field(min_length=1)] = DEFAULT_SCOPE_KEYS
    """The scope ids a turn must have; each distinct set of their values is a partition."""
    lock_timeout: Annotated[
        float, Field(strict=True, ge=0.01, le=60.0, title="Lock timeout (seconds)")
    ] = DEFAULT_LOCK_TIMEOUT
    """Seconds a write waits for the store's lock before failing with `timeout`."""
    idempotency_records: Annotated[int, Field(strict=True, ge=1, le=MAX_IDEMPOTENCY_RECORDS)] = (
        DEFAULT_IDEMPOTENCY_RECORDS
    )
    """How many of a partition's latest keyed writes keep their idempotency record."""
    store: Literal["file", "postgres"] = "file"
    """Where partitions live: files in the data folder, or rows in PostgreSQL (shared by
    every host on the same schema)."""
    dsn: SecretStr | None = Field(default=None, repr=False, title="PostgreSQL connection")
    """The PostgreSQL connection string, required with store "postgres"; a secret, never
    shown."""
    schema_name: Annotated[
        str,
        Field(
            alias="schema",
            pattern=r"^[a-z_][a-z0-9_]{0,62}$",
            strict=True,
            title="PostgreSQL schema",
        ),
    ] = DEFAULT_POSTGRES_SCHEMA
    """With store "postgres": the schema holding the tables, created when missing."""

    @model_validator(mode="after")
    def _store_needs_dsn(self) -> RuntimeConfiguration:
        if self.store == "postgres" and self.dsn is None:
            raise ValueError('dsn: required when store is "postgres"')
        if self.store == "file" and self.dsn is not None:
            raise ValueError('dsn: only used when store is "postgres"')
        return self

    @field_validator("scope_keys")
    @classmethod
    def _distinct(cls, value: tuple[ScopeKey, ...]) -> tuple[ScopeKey, ...]:
        if len(set(value)) != len(value):
            raise ValueError("duplicate scope id")
        # the order of the keys does not change the partition
        return tuple(key for key in SCOPE_KEYS if key in value)


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Validated settings of one runtime Source instance."""

    directory: Path
    memory_limit_bytes: int
    scope_keys: tuple[str, ...]
    lock_timeout: float
    idempotency_records: int
    #: the PostgreSQL store's connection string and schema; None keeps files
    dsn: SecretStr | None = field(default=None, repr=False)
    schema: str = DEFAULT_POSTGRES_SCHEMA


def read_settings(init: SourceInit) -> RuntimeSettings:
    """Validate the entry's configuration; touches no file.

    Raises:
        DefinitionError: naming the configuration key at fault.
    """
    config = read_configuration(RuntimeConfiguration, init, subject="runtime")
    data_dir = None if config.data_dir is None else str(config.data_dir)
    return RuntimeSettings(
        directory=source_data_directory(init, data_dir),
        memory_limit_bytes=config.memory_limit_bytes,
        scope_keys=config.scope_keys,
        lock_timeout=config.lock_timeout,
        idempotency_records=config.idempotency_records,
        dsn=config.dsn if config.store == "postgres" else None,
        schema=config.schema_name,
    )
