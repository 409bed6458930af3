"""The PostgreSQL Provider's configuration: validated once, the `dsn` never shown."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg.conninfo
from mnemon_source_spaces import ProviderInit
from pydantic import SecretStr

from mnemon.sdk import DefinitionError
from mnemon.sdk.postgres import check_connection_string

__all__ = ["CONFIGURATION_KEYS", "PostgresSettings"]

CONFIGURATION_KEYS = (
    "dsn",
    "schema",
    "pool_min",
    "pool_max",
    "pool_timeout",
    "text_search_config",
    "statement_timeout",
)
DEFAULT_SCHEMA = "mnemon_spaces"
# a plain identifier: no quoting games, and the same name PostgreSQL shows unquoted
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TEXT_SEARCH_CONFIG = re.compile(r"^(?:[a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}$")
MAX_POOL = 100
MAX_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """Validated configuration; `repr` never shows the connection string or the password."""

    dsn: SecretStr = field(repr=False)
    schema: str = DEFAULT_SCHEMA
    pool_min: int = 1
    pool_max: int = 10
    pool_timeout: float = 5.0
    text_search_config: str = "simple"
    statement_timeout: float = 5.0
    password: SecretStr | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, init: ProviderInit) -> PostgresSettings:
        """Validate `init.configuration` (and take `init.token` as the password, if given).

        Raises:
            DefinitionError: `"<key>: <problem>"` for the first key at fault, never a value.
        """
        config: Mapping[str, Any] = init.configuration
        unknown = sorted(set(config) - set(CONFIGURATION_KEYS))
        if unknown:
            raise DefinitionError(f"{unknown[0]}: unknown key")
        dsn = config.get("dsn")
        if not isinstance(dsn, str):
            raise DefinitionError("dsn: required, a libpq connection string or postgresql:// URI")
        check_connection_string(dsn)
        schema = config.get("schema", DEFAULT_SCHEMA)
        if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
            raise DefinitionError("schema: must match ^[a-z_][a-z0-9_]{0,62}$")
        pool_min = _integer(config, "pool_min", 1, 0)
        pool_max = _integer(config, "pool_max", 10, 1)
        if pool_min > pool_max:
            raise DefinitionError("pool_min: must not exceed pool_max")
        search = config.get("text_search_config", "simple")
        if not isinstance(search, str) or not _TEXT_SEARCH_CONFIG.match(search):
            raise DefinitionError(
                "text_search_config: must name a text search configuration, such as simple"
            )
        return cls(
            dsn=SecretStr(dsn),
            schema=schema,
            pool_min=pool_min,
            pool_max=pool_max,
            pool_timeout=_seconds(config, "pool_timeout", 5.0),
            text_search_config=search,
            statement_timeout=_seconds(config, "statement_timeout", 5.0),
            password=None if init.token is None else SecretStr(init.token),
        )

    def connection_string(self) -> str:
        """The libpq connection string to use (with the token as password when given)."""
        dsn = self.dsn.get_secret_value()
        if self.password is None:
            return dsn
        return psycopg.conninfo.make_conninfo(dsn, password=self.password.get_secret_value())


def _integer(config: Mapping[str, Any], key: str, default: int, low: int) -> int:
    value = config.get(key, default)
    if type(value) is not int or not low <= value <= MAX_POOL:
        raise DefinitionError(f"{key}: must be an integer from {low} to {MAX_POOL}")
    return value


def _seconds(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DefinitionError(f"{key}: must be a number of seconds")
    if not 0.001 <= value <= MAX_SECONDS:
        raise DefinitionError(f"{key}: must be from 0.001 to {MAX_SECONDS:g} seconds")
    return float(value)
