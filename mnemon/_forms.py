"""Configuration forms: the inputs a model's types give, its form fields and its JSON Schema.

A configuration model is the one declaration. Its JSON Schema (a manifest's `config_schema`)
names each top-level key's input in `x-mnemon-input`, so a tool can draw the form from the
manifest alone, without importing the plugin; `configuration_fields` reads the same schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import annotated_types
from pydantic import (
    AfterValidator,
    BaseModel,
    GetJsonSchemaHandler,
    Strict,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticUndefined, to_jsonable_python

from ._configuration import rule_of
from ._errors import DefinitionError
from ._models import JsonObject, JsonValue, WireModel, validate_model

__all__ = [
    "INPUT_KEYWORD",
    "LIST_ITEM_LIMIT",
    "LIST_LIMIT",
    "TEXT_LIMIT",
    "ConfigurationField",
    "ConfigurationInput",
    "SourceKeys",
    "StringList",
    "Text",
    "Textarea",
    "configuration_fields",
    "configuration_schema",
]

ConfigurationInput = Literal[
    "number",
    "text",
    "textarea",
    "string-list",
    "source-list",
    "boolean",
    "choice",
    "path",
    "secret",
    "json",
]
INPUTS: tuple[str, ...] = get_args(ConfigurationInput)
#: the JSON Schema keyword naming a property's input (an annotation: validators ignore it)
INPUT_KEYWORD = "x-mnemon-input"
TEXT_LIMIT = 4_000
LIST_LIMIT = 32
LIST_ITEM_LIMIT = 500


@dataclass(frozen=True, slots=True)
class _Form:
    """What a type's JSON Schema cannot say by itself: its input, and that items are unique."""

    input: str | None = None
    unique: bool = False

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        value = handler(schema)
        if self.unique:
            value["uniqueItems"] = True
        if self.input is not None:
            value[INPUT_KEYWORD] = self.input
        return value


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(items)) != len(items):
        raise ValueError("items must be unique")
    return items


_Item = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=LIST_ITEM_LIMIT)]

Text = Annotated[str, Strict(), StringConstraints(max_length=TEXT_LIMIT)]
Text.__doc__ = """A line of text of at most 4,000 characters; its form input is `text`."""

Textarea = Annotated[
    str, Strict(), StringConstraints(max_length=TEXT_LIMIT), _Form(input="textarea")
]
Textarea.__doc__ = """Text of at most 4,000 characters shown as several lines (input `textarea`).

A plain `str` is a one-line `text` input; the type cannot tell that the text is long, so this
one says it, in the JSON Schema too (`"x-mnemon-input": "textarea"`).
"""

StringList = Annotated[
    tuple[_Item, ...],
    annotated_types.MaxLen(LIST_LIMIT),
    AfterValidator(_unique),
    _Form(unique=True),
]
StringList.__doc__ = """At most 32 unique, non-empty strings of at most 500 characters each.

Its form input is `string-list`; a profile writes a list, the model holds a tuple.
"""

SourceKeys = Annotated[
    tuple[_Item, ...],
    annotated_types.MaxLen(LIST_LIMIT),
    AfterValidator(_unique),
    _Form(input="source-list", unique=True),
]
SourceKeys.__doc__ = """Source instance keys (`source:spaces`), with the limits of `StringList`.

Its form input is `source-list` (a form may offer the installed Sources to pick from), which
the type alone cannot tell, so the JSON Schema says it (`"x-mnemon-input": "source-list"`).
"""


class ConfigurationField(WireModel):
    """One input of a configuration form, derived from a key of a configuration model.

    `input` is what a form shows: `number` (an integer or a number between `minimum` and
    `maximum`), `text`, `textarea`, `string-list`, `source-list`, `boolean`, `choice` (one of
    `choices`), or a kind a plain form cannot edit as it is: `path` (text the host resolves
    against the profile's folder), `secret` (never shown or filled in with its current value)
    and `json` (anything else: a table, a list of tables, a union; edit it as JSON, checked
    by `json_schema`).
    """

    id: Annotated[str, Strict(), StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    """The configuration key (`source_keys`, `max_projection_characters`)."""
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    """The field's label: the model's `Field(title=...)`, else the key in words."""
    input: ConfigurationInput
    """The kind of input (see the class description)."""
    description: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)] | None
    ) = None
    """Help text: the model's `Field(description=...)` or the docstring under the field."""
    required: Annotated[bool, Strict()] = False
    """Whether a value must be given."""
    default: JsonValue = None
    """The value used when none is given, as JSON (None when there is none)."""
    minimum: int | float | None = None
    """The smallest number allowed (number fields)."""
    maximum: int | float | None = None
    """The largest number allowed (number fields)."""
    exclusive_minimum: int | float | None = None
    """A bound the number must be above, when the model says `gt` rather than `ge`."""
    exclusive_maximum: int | float | None = None
    """A bound the number must be below, when the model says `lt` rather than `le`."""
    choices: tuple[JsonValue, ...] = ()
    """The values allowed (choice fields)."""
    json_schema: JsonObject
    """The key's JSON Schema, as in `configuration_schema`: the whole rule, for any input."""

    @model_validator(mode="after")
    def _check_bounds(self) -> ConfigurationField:
        lower = self.minimum if self.minimum is not None else self.exclusive_minimum
        upper = self.maximum if self.maximum is not None else self.exclusive_maximum
        if self.input == "number":
            if lower is None or upper is None:
                raise ValueError(
                    "a number field declares a lower and an upper bound (Field(ge=..., le=...))"
                )
            if lower > upper:
                raise ValueError("its upper bound is below its lower bound")
        elif lower is not None or upper is not None:
            raise ValueError("only a number field has bounds (ge, gt, le, lt)")
        return self


class _Generator(GenerateJsonSchema):
    """pydantic's JSON Schema, without the titles it makes up from names (set below)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def configuration_schema(
    model: type[BaseModel], *, title: str | None = None, description: str | None = None
) -> dict[str, Any]:
    """The JSON Schema of what `model` accepts: a manifest's `config_schema`.

    Every top-level property carries its `title` (the field's title, else its key in words),
    its `description`, its `default` (left out for secrets) and its bounds, and names its
    form input in `x-mnemon-input` (see `ConfigurationField`). A key that may be null says
    `"type": [..., "null"]`; nulls are left out of defaults and enums (TOML has none). The
    schema's own `title` and `description` are the arguments, else the model's `title`
    setting and docstring.
    """
    raw = model.model_json_schema(schema_generator=_Generator)
    schema: dict[str, Any] = _tidied(raw)
    properties: dict[str, Any] = schema.get("properties", {})
    for name, field in model.model_fields.items():
        key = field.alias or name
        member = dict(properties[key])
        member["title"] = field.title or key.replace("_", " ").capitalize()
        if "description" in member:
            member["description"] = _prose(member["description"])
        if "default" not in member and _has_plain_factory(field):
            made = field.get_default(call_default_factory=True)
            member["default"] = _without_nulls(to_jsonable_python(made))
        kind = member.get(INPUT_KEYWORD) or _input_of(member)
        if kind == "secret":
            member.pop("default", None)
        member[INPUT_KEYWORD] = kind
        properties[key] = dict(sorted(member.items()))
    schema.pop("title", None)
    own_title = title if title is not None else model.model_config.get("title")
    if own_title is not None:
        schema["title"] = own_title
    if description is not None:
        schema["description"] = description
    if "description" in schema:
        schema["description"] = _prose(schema["description"])
    return dict(sorted(schema.items()))


def _prose(text: str) -> str:
    """A docstring as help text: its wrapped lines joined, its paragraphs kept."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def _has_plain_factory(field: Any) -> bool:
    # a factory of the validated data (pydantic 2.10 and later) has no default of its own
    takes_data = getattr(field, "default_factory_takes_validated_data", False)
    return field.default_factory is not None and not takes_data


# the keywords whose value is a map of names to schemas (the names are data, not keywords)
_SCHEMA_MAPS = frozenset({"properties", "$defs", "patternProperties", "dependentSchemas"})
_VALUES = frozenset({"default", "const", "examples", "enum"})
_LOOSE_BOUNDS = {
    "ge": "minimum",
    "gt": "exclusiveMinimum",
    "le": "maximum",
    "lt": "exclusiveMaximum",
}


def _tidied(schema: Any) -> Any:
    """`schema` with nullable members flattened, no nulls in values, no class-name titles."""
    if isinstance(schema, list):
        return [_tidied(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    flattened = _flattened(schema)
    tidied: dict[str, Any] = {}
    for key, value in flattened.items():
        kinds = flattened.get("type")
        numeric = {"integer", "number"} & set(kinds if isinstance(kinds, list) else [kinds])
        if key in _LOOSE_BOUNDS and numeric:
            # pydantic's names for a bound it applies after a validator: JSON Schema's instead
            key = _LOOSE_BOUNDS[key]
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            tidied[key] = {name: _tidied(member) for name, member in value.items()}
        elif key in _VALUES:
            if value is not None:
                tidied[key] = _without_nulls(value)
        elif key == "title" and "properties" in flattened:
            continue  # a model's title is its class name: noise for a person
        else:
            tidied[key] = _tidied(value)
    return dict(sorted(tidied.items()))


def _flattened(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """`anyOf: [X, null]` as X with `type: [t, "null"]`, when X is one plain type."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return schema
    [other] = [option for option in options if option != {"type": "null"}]
    kind = other.get("type")
    if not isinstance(kind, str) or other.keys() & {"$ref", "enum", "const"}:
        return schema
    outer = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**other, **outer, "type": [kind, "null"]}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(item) for item in value if item is not None]
    return value


def _input_of(member: Mapping[str, Any]) -> str:
    """The input a property's schema asks for, when its type did not name one."""
    kind = member.get("type")
    if isinstance(kind, list):
        kinds = [item for item in kind if item != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if "enum" in member or "const" in member:
        return "choice"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "string":
        if member.get("format") == "path":
            return "path"
        if member.get("format") == "password" or member.get("writeOnly"):
            return "secret"
        return "text"
    items = member.get("items")
    if kind == "array" and isinstance(items, Mapping) and items.get("type") == "string":
        return "string-list"
    return "json"


def configuration_fields(model: type[BaseModel]) -> tuple[ConfigurationField, ...]:
    """The form fields of a configuration model, one per key, in the model's order.

    Each field's id, label, description, required flag, default, input and bounds come from
    `configuration_schema(model)`, so a form drawn from a manifest's `config_schema` shows
    the same. A number field needs both bounds, and every default must keep its own field's
    rules.

    Raises:
        DefinitionError: naming the model and key at fault (a number without bounds, a
            default its own rules refuse, a key that is not lowercase `a-z 0-9 _`, an
            unknown `x-mnemon-input`).
    """
    schema = configuration_schema(model)
    required = set(schema.get("required", ()))
    fields = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        subject = f"{model.__name__}.{key}"
        member = schema["properties"][key]
        fields.append(
            validate_model(
                ConfigurationField,
                {
                    "id": key,
                    "label": member["title"],
                    "input": member[INPUT_KEYWORD],
                    "description": member.get("description"),
                    "required": key in required,
                    "default": member.get("default"),
                    "minimum": member.get("minimum"),
                    "maximum": member.get("maximum"),
                    "exclusive_minimum": member.get("exclusiveMinimum"),
                    "exclusive_maximum": member.get("exclusiveMaximum"),
                    "choices": member.get("enum", ()),
                    "json_schema": member,
                },
                subject=subject,
                error=DefinitionError,
            )
        )
        bounded = any(isinstance(item, _BOUNDS) for item in field.metadata)
        if bounded and fields[-1].input != "number":
            # pydantic would only fail when a value arrives, with a TypeError
            raise DefinitionError(f"{subject}: only a number field has bounds (ge, gt, le, lt)")
        if field.default is not PydanticUndefined and field.default is not None:
            _check_default(subject, field)
    return tuple(fields)


_BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)


def _check_default(subject: str, field: Any) -> None:
    """Refuse a default its own field's rules would refuse (pydantic does not check it)."""
    annotation = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    try:
        TypeAdapter(annotation).validate_python(field.default)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        raise DefinitionError(f"{subject}: the default {rule_of(error, field)}") from None
