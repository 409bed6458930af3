"""A Source's configuration as a pydantic model: one error form, relative paths, secrets masked."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    ValidationInfo,
)

from ._errors import DefinitionError
from ._models import SourceInit

__all__ = ["ConfigPath", "SourceConfiguration", "read_configuration"]

_Configuration = TypeVar("_Configuration", bound="SourceConfiguration")


class SourceConfiguration(BaseModel):
    """Base of a Source's configuration model: frozen, and unknown keys are refused.

    Declare fields with types and defaults as in any pydantic model; use `ConfigPath` for
    paths (relative ones are taken from the profile's folder) and `pydantic.SecretStr` for
    credentials (masked in every repr and never quoted in an error). Read it with
    `read_configuration(MyConfiguration, init, subject="my-source")` in a Source's factory;
    an embedder's factory, a Strategy's `apply` or any plugin's `apply` reads the configuration
    mapping it was given the same way.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")


def _resolve(path: Path, info: ValidationInfo) -> Path:
    context = info.context or {}
    expanded = path.expanduser()
    if expanded.is_absolute():
        return expanded
    base = context.get("config_dir")
    if base is None:
        raise ValueError("must be an absolute path (this host has no configuration folder)")
    return Path(os.path.normpath(Path(base) / expanded))


def _text_path(value: object) -> object:
    # pydantic's own message would name a Python class; say what the key needs instead
    if isinstance(value, str | os.PathLike) and str(value):
        return value
    raise ValueError("must be a path (a non-empty string)")


#: A path in a Source's configuration; a relative one is taken from the profile's folder.
ConfigPath = Annotated[Path, BeforeValidator(_text_path), AfterValidator(_resolve)]


def read_configuration(
    model: type[_Configuration],
    init: SourceInit | Mapping[str, Any],
    *,
    subject: str,
    config_dir: str | os.PathLike[str] | None = None,
) -> _Configuration:
    """Validate a configuration as `model`; errors name the key, never its value.

    `init` is a Source's `SourceInit` (its `configuration` is read, and relative `ConfigPath`
    values are taken from its `config_dir`), or the configuration itself: what an embedder's
    factory receives, or `ctx.configuration` in a plugin's `apply`, with `config_dir` the folder
    relative paths are taken from (`ctx.config_dir`; a `SourceInit` brings its own). Without a
    folder, a relative path is refused. Every error reads `<subject> configuration.<key>:
    <rule>`; an unknown key suggests the closest known one.

    Raises:
        DefinitionError: the first problems, each naming its key.
    """
    if isinstance(init, SourceInit):
        configuration: object = init.configuration
        config_dir = init.config_dir
    else:
        configuration = init
    if not isinstance(configuration, Mapping):
        raise DefinitionError(f"{subject} configuration: must be a table of keys and values")
    folder = None if config_dir is None else os.fspath(config_dir)
    try:
        return model.model_validate(dict(configuration), context={"config_dir": folder})
    except ValidationError as exc:
        raise DefinitionError(_describe(exc, model, subject)) from None


def _describe(exc: ValidationError, model: type[BaseModel], subject: str) -> str:
    known = sorted(field.alias or name for name, field in model.model_fields.items())
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = f"{subject} configuration"
        for part in error["loc"]:
            where += f"[{part}]" if isinstance(part, int) else f".{part}"
        if error["type"] == "extra_forbidden":
            problem = "unknown key"
            if len(error["loc"]) == 1:
                close = difflib.get_close_matches(str(error["loc"][0]), known, n=1)
                if close:
                    problem += f"; did you mean {close[0]!r}?"
        else:
            problem = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {problem}")
    return "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
