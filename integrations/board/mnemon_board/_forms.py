"""Configuration forms drawn from what a plugin declares: its manifest's `config_schema`.

Each property of the JSON Schema becomes one field: its title, description, default and
bounds come from the schema. The input is the one the property's `x-mnemon-input` keyword
names (number, text, textarea, string-list, source-list, boolean), else the one its JSON type
implies; a property no input fits (a table, a list of tables) is edited as JSON. Secrets
(`writeOnly`, `format: password`, or a key named like one) are never shown: their fields
start empty, and leaving one empty keeps the value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema

__all__ = [
    "MASK",
    "REMOVE",
    "FormField",
    "form_fields",
    "masked",
    "parse_field",
    "plain",
    "schema_errors",
]

Kind = Literal[
    "number", "text", "textarea", "string-list", "source-list", "choices", "boolean",
    "select", "secret", "json",
]  # fmt: skip
HINTS = frozenset({"number", "text", "textarea", "string-list", "source-list", "boolean"})
MASK = "••••••"
# configuration keys that hold credentials, whatever their schema says
_SECRET_KEY = re.compile(r"(^|_)(token|secret|password|passwd|dsn|api_key|apikey|credentials?)$")


class _Remove:
    """The field was emptied: its key leaves the configuration (back to its default)."""

    def __repr__(self) -> str:
        return "REMOVE"


REMOVE: Any = _Remove()


@dataclass(frozen=True, slots=True)
class FormField:
    """One field of an entry's form."""

    key: str
    title: str
    description: str | None
    kind: Kind
    required: bool
    has_default: bool
    default: Any
    minimum: float | None
    maximum: float | None
    integer: bool
    max_length: int | None
    max_items: int | None
    options: tuple[str, ...]
    """The choices of a select, or of a list whose items are an enumeration."""
    schema: Mapping[str, Any]

    @property
    def immediate(self) -> bool:
        """Whether a change applies at once (switches and selectors) or waits for Apply."""
        return self.kind in ("boolean", "select")


def _unwrapped(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """The schema without a `null` alternative, and whether null was allowed."""
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, Sequence) and options:
            kept = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            types = {o.get("type") for o in kept if isinstance(o, Mapping)}
            if len(kept) == 1 and isinstance(kept[0], Mapping):
                merged = {k: v for k, v in schema.items() if k != keyword}
                return {**kept[0], **merged}, len(kept) < len(options)
            if types == {"number", "integer"}:
                merged = {k: v for k, v in schema.items() if k != keyword}
                return {**merged, "type": "number"}, len(kept) < len(options)
    return schema, False


def _kind(key: str, schema: Mapping[str, Any]) -> Kind:
    hint = schema.get("x-mnemon-input")
    if schema.get("writeOnly") is True or schema.get("format") == "password":
        return "secret"
    if _SECRET_KEY.search(key) and schema.get("type") == "string":
        return "secret"
    if isinstance(hint, str) and hint in HINTS:
        return hint  # type: ignore[return-value]
    kind = schema.get("type")
    if isinstance(schema.get("enum"), Sequence) and all(
        isinstance(item, str) for item in schema["enum"]
    ):
        return "select"
    if kind == "boolean":
        return "boolean"
    if kind in ("integer", "number"):
        return "number"
    if kind == "string":
        return "text"
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, Mapping) and items.get("type") == "string":
            if isinstance(items.get("enum"), Sequence):
                return "choices"
            return "string-list"
    return "json"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _humanized(key: str) -> str:
    return key.replace("_", " ").capitalize()


def form_fields(schema: Mapping[str, Any]) -> tuple[FormField, ...] | None:
    """The fields of a configuration schema, in its order; None when it declares none.

    A schema without `properties` (`{"type": "object"}`) declares no field: its configuration
    is edited whole, as JSON.
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = set(schema.get("required") or ())
    fields = []
    for key, raw in properties.items():
        if not isinstance(raw, Mapping):
            continue
        prop, _nullable = _unwrapped(raw)
        kind = _kind(key, prop)
        items: Mapping[str, Any] = prop["items"] if isinstance(prop.get("items"), Mapping) else {}
        options: tuple[str, ...] = ()
        if kind == "select":
            options = tuple(str(item) for item in prop["enum"])
        elif kind == "choices":
            options = tuple(str(item) for item in items.get("enum", ()))
        minimum = _number(prop.get("minimum", prop.get("ge")))
        maximum = _number(prop.get("maximum", prop.get("le")))
        if minimum is None and _number(prop.get("exclusiveMinimum")) is not None:
            minimum = _number(prop["exclusiveMinimum"])
        fields.append(
            FormField(
                key=key,
                title=str(prop.get("title") or _humanized(key)),
                description=str(prop["description"]) if prop.get("description") else None,
                kind=kind,
                required=key in required,
                has_default="default" in prop,
                default=prop.get("default"),
                minimum=minimum,
                maximum=maximum,
                integer=prop.get("type") == "integer",
                max_length=prop.get("maxLength")
                if isinstance(prop.get("maxLength"), int)
                else None,
                max_items=prop.get("maxItems") if isinstance(prop.get("maxItems"), int) else None,
                options=options,
                schema=raw,
            )
        )
    return tuple(fields)


def plain(value: Any) -> Any:
    """A configuration value as plain JSON data (dicts and lists, not the host's frozen ones)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def masked(value: Any, key: str = "") -> Any:
    """`value` with every secret-looking key's value replaced by `MASK`, for showing."""
    if isinstance(value, Mapping):
        return {
            k: MASK if _SECRET_KEY.search(str(k)) else masked(v, str(k)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [masked(item, key) for item in value]
    return value


def _unmasked(new: Any, old: Any) -> Any:
    """`new` with each `MASK` put back to the value it hid in `old`.

    Raises:
        ValueError: a `MASK` stands where there was no value to keep.
    """
    if isinstance(new, str) and new == MASK:
        if old is None or isinstance(old, Mapping | list):
            raise ValueError("replace the hidden value ••••••, or remove its key")
        return old
    if isinstance(new, dict):
        previous = old if isinstance(old, Mapping) else {}
        return {k: _unmasked(v, previous.get(k)) for k, v in new.items()}
    if isinstance(new, list):
        previous_items = old if isinstance(old, list) else []
        return [
            _unmasked(v, previous_items[i] if i < len(previous_items) else None)
            for i, v in enumerate(new)
        ]
    return new


def parse_field(field: FormField, raw: Sequence[str], current: Any) -> Any:
    """The value a submitted field sets: a JSON value, `REMOVE`, or `current` (kept).

    `raw` holds the field's submitted strings (a checkbox list gives several).

    Raises:
        ValueError: the text is not a value of the field's kind; the message says what is
            expected and never quotes the text.
    """
    text = raw[-1] if raw else ""
    if field.kind == "boolean":
        if text not in ("true", "false"):
            raise ValueError("must be on or off")
        return text == "true"
    if field.kind in ("choices", "source-list"):
        chosen = [item.strip() for item in raw if item.strip()]
        if field.kind == "choices":
            unknown = [item for item in chosen if item not in field.options]
            if unknown:
                raise ValueError(f"must be among: {', '.join(field.options)}")
        return list(dict.fromkeys(chosen)) or REMOVE
    if field.kind == "secret":
        # an empty secret field keeps the secret: it was never shown, so empty means untouched
        if text:
            return text
        return current if current is not None else REMOVE
    if field.kind == "string-list":
        lines = [line.strip() for line in text.replace("\r\n", "\n").split("\n")]
        return [line for line in lines if line] or REMOVE
    if not text.strip():
        return REMOVE
    if field.kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        if field.integer:
            if not number.is_integer():
                raise ValueError("must be a whole number")
            return int(number)
        return int(number) if number.is_integer() and "." not in text else number
    if field.kind == "select":
        if text not in field.options:
            raise ValueError(f"must be one of: {', '.join(field.options)}")
        return text
    if field.kind == "json":
        try:
            value = json.loads(text)
        except ValueError:
            raise ValueError("must be JSON (a value, a list or a table)") from None
        return _unmasked(value, current)
    return text.replace("\r\n", "\n") if field.kind == "textarea" else text


def _rule(error: jsonschema.ValidationError) -> str:
    """What a schema error asks for, in words, without quoting the value."""
    value = error.validator_value
    rules = {
        "minimum": f"must be at least {value}",
        "maximum": f"must be at most {value}",
        "exclusiveMinimum": f"must be more than {value}",
        "exclusiveMaximum": f"must be less than {value}",
        "minLength": f"must be at least {value} characters long",
        "maxLength": f"must be at most {value} characters long",
        "minItems": f"needs at least {value} items",
        "maxItems": f"takes at most {value} items",
        "uniqueItems": "items must not repeat",
        "pattern": "is not in the expected form",
        "type": f"must be of type {value}",
        "enum": "must be one of: " + ", ".join(str(v) for v in value)
        if isinstance(value, list)
        else "is not one of the choices",
        "const": "is not the expected value",
        "required": "is required",
        "additionalProperties": "is not a known setting",
    }
    return rules.get(str(error.validator), "is not valid")


def schema_errors(schema: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, str]:
    """The configuration's schema errors, by top-level key (`""` for the whole table)."""
    errors: dict[str, str] = {}
    validator = jsonschema.Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)):
        path = list(error.absolute_path)
        key = str(path[0]) if path else ""
        if not path and error.validator == "required" and isinstance(error.validator_value, list):
            missing = [name for name in error.validator_value if name not in config]
            key = str(missing[0]) if missing else ""
        if not path and error.validator == "additionalProperties":
            known = set((schema.get("properties") or {}).keys())
            extra = sorted(set(config) - known)
            key = extra[0] if extra else ""
        where = "".join(f"[{part}]" for part in path[1:])
        errors.setdefault(key, f"{where} {_rule(error)}".strip())
    return errors
