"""A plugin's configuration as a pydantic model: one reader, one error form, paths and secrets."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import annotated_types
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import ErrorDetails

from ._docstrings import describe_fields
from ._errors import DefinitionError

__all__ = ["ConfigPath", "Configuration", "read_configuration"]

_Model = TypeVar("_Model", bound="Configuration")


class _Entry(Protocol):
    """What `read_configuration` reads: a `SourceInit` or a `PluginContext`."""

    @property
    def configuration(self) -> Mapping[str, Any]: ...

    @property
    def config_dir(self) -> str | None: ...


class Configuration(BaseModel):
    """Base of a plugin's configuration model: frozen, and unknown keys are refused.

    Declare fields with types and defaults as in any pydantic model: the model is the one
    declaration, and the reader, the form fields (`configuration_fields`) and the JSON Schema
    (`configuration_schema`) all derive from it. A field's label is its `Field(title=...)`,
    else its name in words; its help text is its `Field(description=...)` or the docstring
    written under it. Use `ConfigPath` for paths (relative ones are taken from the profile's
    folder), `pydantic.SecretStr` for credentials (masked in every repr, never quoted in an
    error), strict types (`StrictInt`, `StrictBool`) where the profile must give exactly that
    type, and `Text`, `Textarea`, `StringList` and `SourceKeys` for the form inputs with
    mnemon's limits. A Source reads it with `read_configuration(MyConfiguration, init,
    subject="my-source")`; a Strategy or View extension names it in
    `define_strategy_configuration(..., configuration=MyConfiguration, ...)`.
    """

    # the docstrings under fields describe them before the schema is built (at first use)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        describe_fields(cls)


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


ConfigPath = Annotated[Path, BeforeValidator(_text_path), AfterValidator(_resolve)]
ConfigPath.__doc__ = """A path in a configuration; a relative one is read from the profile's folder.

Its form input is `path`: text a form shows as it is, which the host resolves when it reads
the configuration.
"""


def read_configuration(
    model: type[_Model],
    init: _Entry | Mapping[str, Any],
    *,
    subject: str,
    config_dir: str | os.PathLike[str] | None = None,
) -> _Model:
    """Validate a plugin's configuration as `model`; errors name the key, never its value.

    `init` is what a Source factory receives (`SourceInit`), what a plugin's `apply(ctx)`
    receives (`PluginContext`), or the configuration mapping itself (what an embedder's factory
    receives), with `config_dir` the folder relative paths are taken from (a `SourceInit` or a
    `PluginContext` brings its own; without a folder a relative path is refused). Every error
    reads `<subject> configuration.<key>: <rule>`, in plain words (`must be an integer`, `must
    be between 1 and 10`, `unknown key; did you mean 'limit'?`).

    Raises:
        DefinitionError: the first problems, each naming its key.
    """
    if isinstance(init, Mapping) or not hasattr(init, "configuration"):
        values: object = init
        folder = None if config_dir is None else os.fspath(config_dir)
    else:
        values, folder = init.configuration, init.config_dir
    if not isinstance(values, Mapping):
        raise DefinitionError(f"{subject} configuration: must be a table of keys and values")
    return read_values(model, values, config_dir=folder, subject=subject)


def read_values(
    model: type[_Model], values: Mapping[str, Any], *, config_dir: str | None, subject: str
) -> _Model:
    """`read_configuration` for a bare mapping: what `StrategyConfiguration.validate` uses.

    Raises:
        DefinitionError: the first problems, each naming its key.
    """
    try:
        return model.model_validate(dict(values), context={"config_dir": config_dir})
    except ValidationError as exc:
        raise DefinitionError(_describe(exc, model, subject)) from None


# pydantic names the member of a union a value failed against after the key (`rescan.int`)
_UNION_TAG = re.compile(r"^(?:int|float|str|bool|bytes|list|tuple|dict|set|frozenset)$|[\[(]")
# an author's model-wide rule that names its key first (`dsn: required when ...`)
_NAMED_RULE = re.compile(r"^([a-z][a-z0-9_]*)((?:\[\d+\])*): (.+)$", re.DOTALL)


def _describe(exc: ValidationError, model: type[BaseModel], subject: str) -> str:
    known = {field.alias or name: field for name, field in model.model_fields.items()}
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_input=False):
        path = [
            part
            for index, part in enumerate(error["loc"])
            if index == 0 or isinstance(part, int) or not _UNION_TAG.search(part)
        ]
        rule = rule_of(error, known.get(str(path[0])) if len(path) == 1 else None)
        where = f"{subject} configuration"
        named = None if path else _NAMED_RULE.match(rule)
        if named is not None and named.group(1) in known:
            where += f".{named.group(1)}{named.group(2)}"
            rule = named.group(3)
        for part in path:
            where += f"[{part}]" if isinstance(part, int) else f".{part}"
        if error["type"] == "extra_forbidden" and len(path) == 1:
            close = difflib.get_close_matches(str(path[0]), sorted(known), n=1)
            if close:
                rule += f"; did you mean {close[0]!r}?"
        # a value failing every member of a union is one problem, not one per member
        if not any(seen.startswith(f"{where}: ") for seen in problems):
            problems.append(f"{where}: {rule}")
    return "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")


# pydantic's words name Python classes ("a valid tuple"); these say what to write instead
_PLAIN = {
    "missing": "required",
    "extra_forbidden": "unknown key",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "frozen_set_type": "must be a list",
    "iterable_type": "must be a list",
    "dict_type": "must be a table (an object)",
    "mapping_type": "must be a table (an object)",
    "model_type": "must be a table (an object)",
    "model_attributes_type": "must be a table (an object)",
    "path_type": "must be a path (a non-empty string)",
}


def rule_of(error: ErrorDetails, field: Any) -> str:
    """What a value must be, in plain words, for one pydantic error; never the value itself.

    `field` (a model's `FieldInfo`, or None) lets a bound name both ends of its range.
    """
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return _bounds(field, kind, context)
    if kind == "string_too_short":
        least = context.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must hold at least {least:,} characters"
    if kind == "string_too_long":
        return f"exceeds {context.get('max_length', 0):,} characters"
    if kind == "too_short":
        least = context.get("min_length", 1)
        return f"must hold at least {least} item{'s' if least != 1 else ''}"
    if kind == "too_long":
        return f"must hold at most {context.get('max_length', 0)} items"
    if kind == "string_pattern_mismatch":
        return f"must match the pattern {context.get('pattern', '')}"
    if kind in ("literal_error", "enum"):
        return f"must be {context.get('expected', 'one of the allowed values')}"
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return re.sub(r"^Input should be ", "must be ", message)


def _bounds(field: Any, kind: str, context: Mapping[str, Any]) -> str:
    """`must be between 1 and 10` when the field has both bounds, else the one broken."""
    low = high = None
    for item in getattr(field, "metadata", ()):
        if isinstance(item, annotated_types.Ge | annotated_types.Gt):
            low = item
        elif isinstance(item, annotated_types.Le | annotated_types.Lt):
            high = item
    if isinstance(low, annotated_types.Ge) and isinstance(high, annotated_types.Le):
        return f"must be between {_number(low.ge)} and {_number(high.le)}"
    parts = []
    if low is not None:
        parts.append(
            f"at least {_number(low.ge)}"
            if isinstance(low, annotated_types.Ge)
            else f"above {_number(low.gt)}"
        )
    if high is not None:
        parts.append(
            f"at most {_number(high.le)}"
            if isinstance(high, annotated_types.Le)
            else f"below {_number(high.lt)}"
        )
    if parts:
        return "must be " + " and ".join(parts)
    words = {
        "greater_than": "above",
        "greater_than_equal": "at least",
        "less_than": "below",
        "less_than_equal": "at most",
    }
    bound = next(iter(context.values()), "")
    return f"must be {words[kind]} {_number(bound)}"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
