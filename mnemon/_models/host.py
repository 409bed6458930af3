"""Host settings: one validated object shared by MemoryHost, profiles, the runner and the CLI."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from .base import SOURCE_CAPABILITIES, JsonObject, WireModel

__all__ = [
    "DEFAULT_MAX_CONCURRENT_COMPOSITIONS",
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_INPUT_BYTES",
    "MAX_SOURCE_TIMEOUT",
    "HostSettings",
]

MAX_SOURCE_TIMEOUT = 300.0
MAX_SWITCHES = 64
_SWITCH = re.compile(r"^[a-z][a-z0-9.-]{0,127}$")
MIN_INPUT_BYTES = 1024
MAX_INPUT_BYTES = 64 * 1024 * 1024
# route, action and management inputs larger than this are refused before any other work
DEFAULT_MAX_INPUT_BYTES = 256 * 1024
# enough for a thousand turns at once; beyond it every turn slows until Sources miss deadlines
DEFAULT_MAX_CONCURRENT_COMPOSITIONS = 1024


class HostSettings(WireModel):
    """Everything a host is configured with; `MemoryHost(**fields)` builds one.

    Each error names the setting and its rule, never a path's value.
    """

    source_timeout: float = Field(
        default=10.0,
        description="The per-read deadline for a Source's facts() and project(), in seconds.",
    )
    strategy_type_id: str | None = Field(
        default=None, description="The Strategy to select, by type id or instance key."
    )
    strategy_fallback: Literal["sole-strategy"] | None = Field(
        default=None,
        description="'sole-strategy': use the only installed Strategy when the selected one "
        "is not installed.",
    )
    source_configuration: JsonObject = Field(
        default_factory=dict,
        description="Per instance key, configuration overriding the entry's own.",
    )
    source_capabilities: Mapping[str, frozenset[str]] | None = Field(
        default=None,
        description="Per instance key (or '*'), the capabilities the model may use: a "
        "ceiling narrowing what each Source offers.",
    )
    data_dir: str | None = Field(
        default=None,
        description="The absolute folder Sources keep their data under unless their "
        "configuration names one ($MNEMON_HOME, else ~/.mnemon, when not set).",
    )
    config_dir: str | None = Field(
        default=None,
        description="The absolute folder relative paths in Source configuration are taken "
        "from (a profile passes its own folder).",
    )
    max_input_bytes: int = Field(
        default=DEFAULT_MAX_INPUT_BYTES,
        description="The largest route, action or management input accepted, in bytes of "
        "compact JSON; a larger one is refused (input-too-large) before any other work.",
    )

    max_concurrent_compositions: int = Field(
        default=DEFAULT_MAX_CONCURRENT_COMPOSITIONS,
        description="The most turns the host admits at once, composing or waiting for a "
        "place (while the process is CPU-bound, 64 compose at a time and the rest wait in "
        "order); a turn beyond it is refused at once with CompositionUnavailable "
        "(back-pressure: try again later), never served a View its Sources were too busy to "
        "fill.",
    )
    collector: Literal["python", "serving"] = Field(
        default="python",
        description="'serving', for a process whose main job is serving turns: when the host "
        "is made, one full collection and gc.freeze() leave the objects that exist then out of "
        "every later pass of Python's cyclic garbage collector, and its young-generation "
        "threshold is 20,000 instead of 700 until the host is closed (far less collector time "
        "with many turns in flight). 'python' leaves the collector as it is.",
    )
    switches: Mapping[str, bool] = Field(
        default_factory=dict,
        description="Deployment-wide switches by name (such as 'external-memory.search': "
        "false), handed to every Source as SourceInit.switches; a Source documents the "
        "switches it honours, and the core itself reads none.",
    )

    @field_validator("switches", mode="before")
    @classmethod
    def _switches(cls, value: Any) -> dict[str, bool]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("switches: must map switch names to true or false")
        if len(value) > MAX_SWITCHES:
            raise ValueError(f"switches: at most {MAX_SWITCHES}")
        for name, on in value.items():
            if not isinstance(name, str) or not _SWITCH.fullmatch(name):
                raise ValueError(f"switches: a name must match {_SWITCH.pattern}")
            if not isinstance(on, bool):
                raise ValueError(f"switches[{name!r}]: must be true or false")
        return dict(sorted(value.items()))

    @field_validator("source_timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= MAX_SOURCE_TIMEOUT
        ):
            raise ValueError(
                f"source_timeout: must be a number of seconds in (0, {MAX_SOURCE_TIMEOUT:g}]"
            )
        return float(value)

    @field_validator("strategy_type_id", mode="before")
    @classmethod
    def _selector(cls, value: Any) -> Any:
        # an empty or unbounded selector can match no Strategy: refused, not left unserved
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 400):
            raise ValueError("strategy_type_id: must be a Strategy type id or instance key")
        return value

    @field_validator("strategy_fallback", mode="before")
    @classmethod
    def _fallback(cls, value: Any) -> Any:
        if value not in (None, "sole-strategy"):
            raise ValueError('strategy_fallback: must be None or "sole-strategy"')
        return value

    @field_validator("source_configuration", mode="before")
    @classmethod
    def _no_configuration(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("source_configuration", mode="after")
    @classmethod
    def _configuration(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        for key, item in value.items():
            if not isinstance(item, Mapping):
                raise ValueError(f"source_configuration[{key!r}]: must be a JSON object")
        return value

    @field_validator("source_capabilities", mode="before")
    @classmethod
    def _capabilities(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("source_capabilities: must map instance keys to capabilities")
        ceilings: dict[str, frozenset[str]] = {}
        for key, allowed in value.items():
            listed = [allowed] if isinstance(allowed, str) else list(allowed)
            unknown = sorted(set(listed) - set(SOURCE_CAPABILITIES))
            if unknown:
                raise ValueError(f"source_capabilities[{key!r}]: unknown capability {unknown[0]!r}")
            ceilings[str(key)] = frozenset(listed)
        return ceilings

    @field_validator("data_dir", "config_dir", mode="before")
    @classmethod
    def _folder(cls, value: Any, info: Any) -> str | None:
        if value is None:
            return None
        try:
            folder = Path(value).expanduser()
        except (TypeError, RuntimeError):
            raise ValueError(f"{info.field_name}: must be an absolute path") from None
        if not folder.is_absolute():
            # never the value: a path may carry a token
            raise ValueError(f"{info.field_name}: must be an absolute path")
        return str(folder)

    @field_validator("max_concurrent_compositions", mode="before")
    @classmethod
    def _compositions(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("max_concurrent_compositions: must be an integer of at least 1")
        return value

    @field_validator("max_input_bytes", mode="before")
    @classmethod
    def _input_bytes(cls, value: Any) -> int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not MIN_INPUT_BYTES <= value <= MAX_INPUT_BYTES
        ):
            raise ValueError(
                f"max_input_bytes: must be an integer from {MIN_INPUT_BYTES} to {MAX_INPUT_BYTES}"
            )
        return value
