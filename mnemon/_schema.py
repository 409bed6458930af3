"""JSON Schema for route, action and management inputs: checked once, compiled once."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from itertools import islice
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from ._json import FrozenDict, canonical_json, thaw_json
from ._text import visible_text

__all__ = ["MAX_PROBLEMS", "check_input_schema", "describe_schema_error", "input_problems"]

# validation stops here: an input breaking a schema a million times is not checked a million times
MAX_PROBLEMS = 3


def check_input_schema(schema: Mapping[str, Any]) -> None:
    """Check that `schema` is a valid Draft 2020-12 schema for a JSON object input.

    Raises:
        ValueError: naming what is wrong with the schema.
    """
    if schema.get("type") != "object":
        raise ValueError('an input schema must declare "type": "object"')
    try:
        Draft202012Validator.check_schema(thaw_json(schema))
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise ValueError(f"invalid JSON Schema at {where}: {exc.message}") from None


# a frozen JSON value holds its arrays as tuples: they are JSON arrays too, so a value is
# checked as it is, without a thawed copy of it
_FrozenArrays = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "array", lambda checker, instance: isinstance(instance, (list, tuple))
    ),
)


@lru_cache(maxsize=512)
def _validator(canonical: bytes) -> Any:
    import orjson

    return _FrozenArrays(orjson.loads(canonical))


# validators by the identity of a frozen schema: a route's or action's schema is one frozen
# object for its generation's life, so every read after the first skips serializing it again.
# A value `freeze_json` froze as a whole cannot change, and each entry holds its schema, so an
# id is never reused while its entry lives; any other schema is looked up by its canonical JSON.
_BY_IDENTITY: dict[int, tuple[FrozenDict, Any]] = {}
_MAX_BY_IDENTITY = 512


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    if type(schema) is not FrozenDict or not getattr(schema, "_checked", False):
        return _validator(canonical_json(schema))
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator = _validator(canonical_json(schema))
    if len(_BY_IDENTITY) >= _MAX_BY_IDENTITY:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def input_problems(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Describe how `value` breaks `schema`: the first few problems, each naming the property.

    `value` is a JSON value, plain or frozen (objects as dicts, arrays as lists or tuples).
    """
    validator = _schema_validator(schema)
    problems = []
    found = islice(validator.iter_errors(value), MAX_PROBLEMS)
    for error in sorted(found, key=lambda e: list(e.path)):
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        )
        if error.validator == "additionalProperties":
            extras = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            problems.append(f"unsupported property {', '.join(map(repr, extras))}")
        elif error.validator == "required":
            problems.append(f"{where or 'input'}: {error.message}")
        else:
            problems.append(
                f"property '{where.lstrip('.')}': {_short(error)}" if where else _short(error)
            )
    return problems


def _short(error: jsonschema.ValidationError) -> str:
    # the validator's own message quotes the offending value, which may be memory content
    keyword = error.validator
    expected = error.validator_value
    if keyword in (
        "type",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "enum",
        "const",
        "format",
        "multipleOf",
        "exclusiveMinimum",
        "exclusiveMaximum",
    ):
        return f"fails {keyword} {canonical_json(expected).decode()[:80]}"
    return f"fails {keyword}"


#: the most property names one description lists, and the most characters of each
_NAMES_SHOWN = 3
_NAME_CHARACTERS = 64


def _names(names: list[str]) -> str:
    shown = [
        repr(visible_text(name if len(name) <= _NAME_CHARACTERS else name[:_NAME_CHARACTERS] + "…",
                          keep_newlines=False))
        for name in names[:_NAMES_SHOWN]
    ]  # fmt: skip
    more = len(names) - _NAMES_SHOWN
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def describe_schema_error(error: jsonschema.ValidationError) -> str:
    """Say how a JSON value breaks its schema, naming properties, never quoting the value.

    `error` is one error of a `jsonschema` validator; where it is, `error.absolute_path`
    says. The rule is an unexpected or missing property by name (`unexpected property
    'score2'`), the type wanted (`must be string`), or the keyword and its bound (`fails
    maxLength 80`). The value itself is never quoted: it may be memory text or a secret.
    """
    instance = error.instance
    keyword = error.validator
    if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(
        instance, Mapping
    ):
        known = (
            set(error.schema.get("properties", {})) if isinstance(error.schema, Mapping) else set()
        )
        extras = sorted(str(name) for name in set(instance) - known)
        rule = f"unexpected property {_names(extras)}" if extras else f"fails {keyword}"
    elif (
        keyword == "required"
        and isinstance(instance, Mapping)
        and isinstance(error.validator_value, list)
    ):
        missing = [str(name) for name in error.validator_value if name not in instance]
        rule = f"missing property {_names(missing)}"
    elif keyword == "type":
        wanted = error.validator_value
        rule = f"must be {' or '.join(wanted) if isinstance(wanted, list) else wanted}"
    else:
        rule = _short(error)
    return rule
