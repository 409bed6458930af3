"""JSON Schema for route, action and management inputs: checked once, compiled once."""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
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
def _validator(canonical: bytes) -> tuple[Any, _Check | None]:
    import orjson

    schema = orjson.loads(canonical)
    return _FrozenArrays(schema), _compiled(schema)


# ---------------------------------------------------------------- the fast path for valid input
#
# Most input is valid, and jsonschema's generic walk costs about 30 µs for a small object (a
# validator evolved per property). A schema made only of the keywords below is also compiled
# to plain Python checks, which answer "valid" in a few µs. They never decide a refusal: any
# value they do not find valid (or a schema with any other keyword) goes to jsonschema, whose
# problems are reported as before. So each check only has to be strict: what it calls valid,
# jsonschema finds valid too (a test compares them on generated values).

_Check = Callable[[Any], bool]

# keywords that assert nothing (jsonschema creates its validators without a format checker)
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)
_COMPILED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _not_number(value: Any) -> bool:
    # what jsonschema does not take for a number (a bool is not one), so a bound holds
    return type(value) is bool or not isinstance(value, numbers.Number)


# each JSON type's strict test, by exact Python type: a subclass (or 1.0 as an integer) is
# left to jsonschema. `dict` and `FrozenDict` are objects; lists and tuples, arrays.
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict, FrozenDict),
    "array": (list, tuple),
}


def _compiled(schema: Any) -> _Check | None:
    """Plain checks for `schema`, or None when it uses a keyword they do not cover."""
    if schema is True or schema == {}:
        return lambda value: True
    if schema is False or not isinstance(schema, dict):
        return None
    if any(key not in _COMPILED and key not in _ANNOTATIONS for key in schema):
        return None
    checks: list[_Check] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not all(isinstance(name, str) and name in _TYPES for name in names):
            return None
        exact = frozenset(kind for name in names for kind in _TYPES[name])
        checks.append(lambda value: type(value) in exact)
    for keyword in ("enum", "const"):
        if keyword not in schema:
            continue
        members = schema[keyword] if keyword == "enum" else [schema[keyword]]
        if not isinstance(members, list) or not all(type(m) is str for m in members):
            return None  # JSON equality of other values (1 and true, 1 and 1.0) is jsonschema's
        checks.append(_one_of(frozenset(members)))
    for made in (_string_checks(schema), _number_checks(schema), _array_checks(schema)):
        if made is None:
            return None
        checks += made
    made_object = _object_checks(schema)
    if made_object is None:
        return None
    checks += made_object
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _one_of(allowed: frozenset[str]) -> _Check:
    return lambda value: type(value) is str and value in allowed


def _string_checks(schema: dict[str, Any]) -> list[_Check] | None:
    checks: list[_Check] = []
    least, most = schema.get("minLength", 0), schema.get("maxLength")
    if type(least) is not int or (most is not None and type(most) is not int):
        return None
    if least or most is not None:
        top = most if most is not None else float("inf")
        checks.append(lambda value: not isinstance(value, str) or least <= len(value) <= top)
    if "pattern" in schema:
        try:
            search = re.compile(schema["pattern"]).search
        except (re.error, TypeError):
            return None
        checks.append(lambda value: not isinstance(value, str) or search(value) is not None)
    return checks


def _number_checks(schema: dict[str, Any]) -> list[_Check] | None:
    checks: list[_Check] = []
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if keyword not in schema:
            continue
        bound = schema[keyword]
        if not _is_number(bound):
            return None
        checks.append(_bound(keyword, bound))
    return checks


def _bound(keyword: str, bound: float) -> _Check:
    holds: Callable[[Any], bool] = {
        "minimum": lambda value: value >= bound,
        "maximum": lambda value: value <= bound,
        "exclusiveMinimum": lambda value: value > bound,
        "exclusiveMaximum": lambda value: value < bound,
    }[keyword]
    # an int or float is compared here; any other number (a Decimal) is left to jsonschema
    return lambda value: _not_number(value) or (_is_number(value) and holds(value))


def _array_checks(schema: dict[str, Any]) -> list[_Check] | None:
    checks: list[_Check] = []
    least, most = schema.get("minItems", 0), schema.get("maxItems")
    if type(least) is not int or (most is not None and type(most) is not int):
        return None
    if least or most is not None:
        top = most if most is not None else float("inf")
        checks.append(
            lambda value: not isinstance(value, list | tuple) or least <= len(value) <= top
        )
    if "items" in schema:
        item = _compiled(schema["items"])
        if item is None:
            return None
        checks.append(lambda value: not isinstance(value, list | tuple) or all(map(item, value)))
    return checks


def _object_checks(schema: dict[str, Any]) -> list[_Check] | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    named: dict[str, _Check] = {}
    for name, sub in properties.items():
        check = _compiled(sub)
        if check is None:
            return None
        named[name] = check
    other = _compiled(extra) if extra is not False else None
    if extra is not False and other is None:
        return None
    if not named and not required and extra is True:
        return []
    needed = tuple(required)

    def check_object(value: Any) -> bool:
        if type(value) is not dict and type(value) is not FrozenDict:
            # not an object: these keywords hold; another dict subclass is left to jsonschema
            return not isinstance(value, dict)
        for name in needed:
            if name not in value:
                return False
        for name, member in value.items():
            check = named.get(name, other)
            if check is None or not check(member):
                return False
        return True

    return [check_object]


# validators by the identity of a frozen schema: a route's or action's schema is one frozen
# object for its generation's life, so every read after the first skips serializing it again.
# A value `freeze_json` froze as a whole cannot change, and each entry holds its schema, so an
# id is never reused while its entry lives; any other schema is looked up by its canonical JSON.
_BY_IDENTITY: dict[int, tuple[FrozenDict, tuple[Any, _Check | None]]] = {}
_MAX_BY_IDENTITY = 512


def _schema_validator(schema: Mapping[str, Any]) -> tuple[Any, _Check | None]:
    """The jsonschema validator of `schema` and its fast check for valid input (if any)."""
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
    validator, valid = _schema_validator(schema)
    if valid is not None and valid(value):
        return []
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
