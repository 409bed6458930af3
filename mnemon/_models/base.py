"""The base of every wire model, the shared field types and validation helpers.

JSON-valued fields hold frozen private copies, so a model, once built, cannot be
changed by anyone, including the party that built it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    Strict,
    StringConstraints,
    ValidationError,
)

from .._docstrings import describe_fields
from .._errors import MnemonError
from .._json import freeze_json, thaw_json

ID_PATTERN = r"^[a-z][a-z0-9-]{0,127}$"
CAPABILITY_PATTERN = r"^[a-z][a-z0-9.-]{0,127}$"
ENTRY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,299}$"
PACKAGE_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$"
SCENARIO_PATTERN = r"^[a-z][a-z0-9._-]{0,127}$"

GUIDANCE_LIMIT = 16_384
MAX_PROJECTION_CHARACTERS = 10_000_000

Id = Annotated[str, Strict(), StringConstraints(pattern=ID_PATTERN)]
CapabilityId = Annotated[str, Strict(), StringConstraints(pattern=CAPABILITY_PATTERN)]
EntryId = Annotated[str, Strict(), StringConstraints(pattern=ENTRY_ID_PATTERN)]
InstanceKey = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]
PackageName = Annotated[str, Strict(), StringConstraints(pattern=PACKAGE_PATTERN)]
Label = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
Description = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
Text = Annotated[str, Strict()]
Revision = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
# identity values never carry controls, bidi overrides, invisible or line-breaking characters
SCOPE_VALUE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]+$"
ScopeValue = Annotated[
    str, Strict(), StringConstraints(min_length=1, max_length=300, pattern=SCOPE_VALUE_PATTERN)
]
StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]
SourceCapability = Literal[
    "status",
    "project",
    "recall",
    "search",
    "read",
    "browse",
    "write",
    "archive",
    "graph",
    "related",
    "link",
    "forget",
    "maintain",
    "export",
    "import",
]
SOURCE_CAPABILITIES: tuple[str, ...] = get_args(SourceCapability)
Availability = Literal["ready", "degraded", "unavailable"]
Consistency = Literal["exact-snapshot", "namespace-pinned-live-read"]
ProjectionMode = Literal["eager", "routed"]
Completion = Literal["accepted", "candidate", "committed", "partial", "failed", "unknown"]
ReceiptStatus = Literal["succeeded", "partial", "failed", "cancelled"]


def _json_value(value: object) -> Any:
    return freeze_json(value, what="JSON value")


def _json_object(value: object) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return freeze_json(value, what="JSON value")


KEEP_FROZEN = {"keep_frozen": True}


def _thawed(value: Any, info: SerializationInfo) -> Any:
    # callers get plain, mutable data; the core's own digests skip the copy
    if info.context and info.context.get("keep_frozen"):
        return value
    return thaw_json(value)


JsonValue = Annotated[Any, PlainValidator(_json_value), PlainSerializer(_thawed)]
JsonObject = Annotated[Mapping[str, Any], PlainValidator(_json_object), PlainSerializer(_thawed)]


def _input_schema(value: object) -> Any:
    from .._schema import check_input_schema

    schema = _json_object(value)
    check_input_schema(schema)
    return schema


InputSchema = Annotated[Mapping[str, Any], PlainValidator(_input_schema), PlainSerializer(_thawed)]

_Model = TypeVar("_Model", bound="WireModel")
_NAMED_PROBLEM = re.compile(
    r"^(?P<field>[a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_]+)?): (?P<problem>.+)$"
)


class WireModel(BaseModel):
    """Base of the public wire models: frozen, unknown fields forbidden.

    `model_copy(update=...)` validates the result, so a copy is as trustworthy as the
    original; `model_construct` skips validation and must not be used for data that crosses
    the boundary.
    """

    # a docstring under a field is its description (`Model.model_fields[name].description`),
    # given before the schema is built: at first use, which also spares a command's start the
    # building of every model it never uses
    model_config = ConfigDict(
        frozen=True, extra="forbid", revalidate_instances="never", defer_build=True
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Describe the fields by their docstrings, and list them where `help()` shows them."""
        super().__pydantic_init_subclass__(**kwargs)
        describe_fields(cls)
        described = [
            f"    {name}: {' '.join(info.description.split())}"
            for name, info in cls.model_fields.items()
            if info.description
        ]
        doc = cls.__dict__.get("__doc__")
        if described and doc and "\nAttributes:" not in doc:
            cls.__doc__ = inspect.cleandoc(doc) + "\n\nAttributes:\n" + "\n".join(described)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Return a validated copy with `update` applied (frozen values need no deep copy).

        Raises:
            pydantic.ValidationError: the updated values are invalid.
        """
        if not update:
            return self
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(update)
        return type(self).model_validate(values)


# the core's only way past pydantic's validation (`from_checked`); nothing else sets these
_set = object.__setattr__


def from_checked(model: type[_Model], values: dict[str, Any]) -> _Model:
    """An instance of `model` holding `values`, every field given and already validated.

    What `model_construct` does for a wire model (no private attributes, no extra fields),
    without its per-field default and alias handling: the core builds several such models
    per turn from values it validated itself, never from a plugin's data. `values` becomes
    the instance's own field dictionary.
    """
    instance = model.__new__(model)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance


def describe_validation_error(exc: ValidationError, subject: str) -> str:
    """One line naming the first field at fault, e.g. `manifest.routes[0].max_calls: ...`."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        path = subject
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        message = str(error["msg"])
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        named = None if error["loc"] else _NAMED_PROBLEM.match(message)
        if named is not None:
            # a whole-model rule names its field as "field: problem"
            path += named["field"] if named["field"].startswith("[") else f".{named['field']}"
            message = named["problem"]
        problems.append(f"{path}: {message}")
    return "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")


def validate_model(
    model: type[_Model], value: object, *, subject: str, error: type[MnemonError]
) -> _Model:
    """Validate `value` as `model` (instances pass as they are); `error` names the bad field.

    Raises:
        MnemonError: of class `error`, when `value` does not validate.
    """
    if isinstance(value, model):
        return value  # validated when it was built (or copied)
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise error(describe_validation_error(exc, subject)) from None
