"""What plugins declare: Source and Strategy manifests, routes, actions, management forms."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, field_validator, model_validator

from .._json import unique
from .base import (
    ID_PATTERN,
    Consistency,
    Description,
    Id,
    InputSchema,
    Label,
    PackageName,
    SourceCapability,
    StrictBool,
    StrictInt,
    WireModel,
)
from .sources import partition_keys_problem


class RouteDescriptor(WireModel):
    """A read a Source offers: its input schema and its ceilings."""

    id: Id
    """The route's id, unique within the Source (`search`, `recall`)."""
    description: Description
    """What the route reads, for the model: it is shown in the Wake."""
    capability: SourceCapability
    """The capability the route needs; it must be among the manifest's."""
    input_schema: InputSchema
    """The JSON Schema of the route's input, checked before the Source is called."""
    max_calls: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    """How many times one turn may read the route (1 to 100)."""
    max_results: Annotated[StrictInt, Field(ge=1, le=1_000)] | None = None
    """The most items one read may return; the View's budget may narrow it."""
    max_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    """The most characters one read may return; the View's budget may narrow it."""

    @model_validator(mode="after")
    def _check_limit(self) -> RouteDescriptor:
        # a `limit` input is how many results a caller asks for: the model and the command
        # line read its maximum, so it may not promise more than the route ever returns
        limit = self.input_schema.get("properties", {}).get("limit")
        maximum = limit.get("maximum") if isinstance(limit, Mapping) else None
        if self.max_results is not None and isinstance(maximum, int) and maximum > self.max_results:
            raise ValueError(
                f"input_schema: limit allows up to {maximum} but max_results is "
                f"{self.max_results}; state one number (the limit's maximum at most max_results)"
            )
        return self


class ActionDescriptor(WireModel):
    """A write a Source offers; every execution is re-authorized by the host."""

    id: Id
    """The action's id, unique within the Source (`remember`, `add`)."""
    description: Description
    """What the action writes, for the model: it is shown in the Wake."""
    capability: SourceCapability
    """The capability the action needs; it must be among the manifest's."""
    input_schema: InputSchema
    """The JSON Schema of the action's input, checked before the Source is called."""
    authority: Id | None = None
    """An optional id naming the authority a host should ask for before authorizing."""


class ManagementField(WireModel):
    """One input of a Source's management form."""

    id: Id
    """The field's id."""
    label: Label
    """The field's label in a form."""
    input: Literal["text", "number", "boolean", "url", "secret", "select"]
    """The kind of input: text, number, boolean, url, secret or select."""
    description: Description | None = None
    """Help text for the field."""
    required: StrictBool = False
    """Whether the field must be filled in."""
    options: tuple[Label, ...] = ()
    """The choices of a `select` field (only a select has options)."""

    @model_validator(mode="after")
    def _check_options(self) -> ManagementField:
        if self.input == "select" and not self.options:
            raise ValueError("options: a select needs options")
        if self.input != "select" and self.options:
            raise ValueError("options: only a select has options")
        return self


class ManagementOperation(WireModel):
    """One operation of a Source's management plane."""

    id: Id
    """The operation's id, unique within the Source (`list`, `add`)."""
    kind: Literal["read", "mutate"]
    """`read` (no change) or `mutate` (needs confirmation and the current revision)."""
    description: Description
    """What the operation does, for people."""
    input_schema: InputSchema
    """The JSON Schema of the operation's input."""


# the operations the core owns on every Source that declares records: a Source answers them
# but never declares them itself (their shapes are in `management`)
RECORD_OPERATIONS = ("records-read", "records-write", "records-delete")
# the write-scope preflight: a Source that sets `write_scope` answers it (shape in `maintenance`)
WRITE_SCOPE_OPERATION = "write-scope"


class RecordKind(WireModel):
    """A kind of record a Source holds, that people can list, export, import or delete.

    The core derives the `records-read`, `records-write` and `records-delete` operations from
    the kinds a Source declares, with input and output shapes the core owns.
    """

    id: Id
    """The kind's name (`memory`, `fact`, `task`); an export names it on every record."""
    label: Label
    """What one record is, for people (`Long-term memory`)."""
    description: Description | None = None
    """What these records are."""
    record_schema: InputSchema
    """The JSON Schema of one record (an object); a record written is checked against it."""
    readable: StrictBool = False
    """Whether `records-read` lists these records (each needs a string `id`)."""
    writable: StrictBool = False
    """Whether `records-write` takes these records (idempotent, in batches)."""
    deletable: StrictBool = False
    """Whether `records-delete` deletes one of these records by its `id`."""
    label_field: str | None = None
    """The record field shown as its one-line label (`text`, `title`)."""
    group_field: str | None = None
    """The string field that groups records (a space, a folder): reads can name one group."""
    key_fields: tuple[str, ...] = ()
    """The fields that make two records the same: an import skips a record already there."""
    newest_first: StrictBool = False
    """Whether reads list the newest record first (an import then writes oldest first)."""

    @model_validator(mode="after")
    def _check_record(self) -> RecordKind:
        if self.id == "end":
            raise ValueError("id: 'end' names the last line of an export, not a record kind")
        if not (self.readable or self.writable or self.deletable):
            raise ValueError("a record kind must be readable, writable or deletable")
        properties = self.record_schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise ValueError("record_schema: properties must be an object")
        if (self.readable or self.deletable) and "id" not in properties:
            raise ValueError("record_schema: a readable or deletable kind's records have an id")
        named = [("label_field", self.label_field), ("group_field", self.group_field)]
        named += [("key_fields", field) for field in self.key_fields]
        for where, field in named:
            if field is not None and field not in properties:
                raise ValueError(f"{where}: {field!r} is not a property of record_schema")
        if self.writable and not self.key_fields:
            raise ValueError("key_fields: a writable kind names the fields that make it unique")
        if not unique(self.key_fields):
            raise ValueError("key_fields: duplicate field")
        return self


MAX_RECORD_PAGE = 1_000
"""The most records one `records-read` page or one `records-write` batch holds."""
MAX_IDEMPOTENCY_KEY = 200
_TEXT_ID = {"type": "string", "minLength": 1, "maxLength": 1_000}


def _kind_enum(kinds: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": kinds}


def _records_read(kinds: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "kind": _kind_enum(kinds),
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECORD_PAGE},
            "cursor": {"type": "string", "minLength": 1, "maxLength": 4_000},
            "group": _TEXT_ID,
        },
        "required": ["kind", "limit"],
        "additionalProperties": False,
    }


def _records_write(kinds: list[str]) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "record": {"type": "object"},
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_IDEMPOTENCY_KEY,
            },
        },
        "required": ["record", "idempotency_key"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "kind": _kind_enum(kinds),
            "records": {
                "type": "array",
                "items": item,
                "minItems": 1,
                "maxItems": MAX_RECORD_PAGE,
            },
        },
        "required": ["kind", "records"],
        "additionalProperties": False,
    }


def _records_delete(kinds: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"kind": _kind_enum(kinds), "id": _TEXT_ID, "group": _TEXT_ID},
        "required": ["kind", "id"],
        "additionalProperties": False,
    }


def _write_scope_input() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "write_scope": {
                "type": "object",
                "properties": {
                    "view_id": {"type": "string", "minLength": 1, "maxLength": 400},
                    "grant": {},
                },
                "required": ["view_id", "grant"],
                "additionalProperties": False,
            }
        },
        "required": ["write_scope"],
        "additionalProperties": False,
    }


class ManagementDescriptor(WireModel):
    """How humans manage a Source: a label, a form of fields, operations and record kinds."""

    label: Label
    """The Source's name in a management interface."""
    description: Description
    """What people can manage here."""
    fields: tuple[ManagementField, ...] = ()
    """The form's fields."""
    operations: tuple[ManagementOperation, ...] = ()
    """The operations people may run (the record operations are the core's: not listed)."""
    records: tuple[RecordKind, ...] = ()
    """The kinds of record the Source holds, and what people may do with each."""
    write_scope: StrictBool = False
    """Whether the Source answers the core's `write-scope` preflight: which groups of its
    writable record kinds a View may write (host maintenance archives only there)."""

    @model_validator(mode="after")
    def _check_unique(self) -> ManagementDescriptor:
        if not unique(field.id for field in self.fields):
            raise ValueError("fields: duplicate field id")
        if not unique(op.id for op in self.operations):
            raise ValueError("operations: duplicate operation id")
        reserved = next((op.id for op in self.operations if op.id in RECORD_OPERATIONS), None)
        if reserved is not None:
            raise ValueError(
                f"operations: {reserved!r} is the core's record operation; declare records instead"
            )
        if any(op.id == WRITE_SCOPE_OPERATION for op in self.operations):
            raise ValueError(
                f"operations: {WRITE_SCOPE_OPERATION!r} is the core's preflight; "
                "set write_scope instead"
            )
        if self.write_scope and not any(kind.writable for kind in self.records):
            raise ValueError("write_scope: needs a writable record kind")
        if not unique(kind.id for kind in self.records):
            raise ValueError("records: duplicate record kind")
        return self

    def record_operations(self) -> tuple[ManagementOperation, ...]:
        """The core-owned record operations this descriptor's record kinds give its Source.

        Made once per descriptor (it is frozen): each operation validates its input schema
        when made, a few milliseconds, and a management call would otherwise pay it each time.
        The same operations also keep their schemas' identities, which the input check's
        validator cache is keyed by.
        """
        known = _RECORD_OPERATIONS.get(id(self))
        if known is not None and known[0] is self:
            return known[1]
        made = self._make_record_operations()
        if len(_RECORD_OPERATIONS) >= _MAX_RECORD_OPERATIONS:
            _RECORD_OPERATIONS.clear()
        # the entry holds its descriptor, so its id is not reused while the entry lives
        _RECORD_OPERATIONS[id(self)] = (self, made)
        return made

    def _make_record_operations(self) -> tuple[ManagementOperation, ...]:
        made = []
        for operation, flag, shape, description in (
            ("records-read", "readable", _records_read, "List records of one kind, by page."),
            (
                "records-write",
                "writable",
                _records_write,
                "Write a batch of records, idempotently.",
            ),
            ("records-delete", "deletable", _records_delete, "Delete one record by its id."),
        ):
            named = [kind.id for kind in self.records if getattr(kind, flag)]
            if named:
                made.append(
                    ManagementOperation(
                        id=operation,
                        kind="read" if operation == "records-read" else "mutate",
                        description=description,
                        input_schema=shape(named),
                    )
                )
        if self.write_scope:
            made.append(
                ManagementOperation(
                    id=WRITE_SCOPE_OPERATION,
                    kind="read",
                    description="Where a View may write records (the maintenance preflight).",
                    input_schema=_write_scope_input(),
                )
            )
        return tuple(made)


_RECORD_OPERATIONS: dict[int, tuple[ManagementDescriptor, tuple[ManagementOperation, ...]]] = {}
_MAX_RECORD_OPERATIONS = 256


class SourceManifest(WireModel):
    """What a Source type is and may do; facts at run time must agree with it."""

    type_id: Id
    """The Source type's id (`documents`, `notes`)."""
    package_name: PackageName
    """The distribution that defines the type."""
    role: Id
    """What the Source is to a Strategy: `working-context`, `narrative`, `durable-evidence`, `notes`
    or your own id."""
    capabilities: tuple[SourceCapability, ...] = Field(min_length=1)
    """Everything the Source may ever do; live facts report a subset."""
    consistency: Consistency
    """`exact-snapshot` (a grant pins the data) or `namespace-pinned-live-read` (a grant pins
    namespaces; reads are live)."""
    routes: tuple[RouteDescriptor, ...] = ()
    """The reads the Source offers the model."""
    actions: tuple[ActionDescriptor, ...] = ()
    """The writes the Source offers the model."""
    management: ManagementDescriptor | None = None
    """How people manage the Source, or None."""
    partition_keys: tuple[Annotated[str, Strict()], ...] = ()
    """The scope ids the Source needs to find its data (names of `Scope`'s fields, such as
    `user_id` or `workspace`): a scope lacking one finds it `unavailable` (`missing-scope`), and
    tools say which identity to add (the CLI's `--workspace`). Empty, the default, declares none.
    A Source whose configuration changes them says so in its runtime's `partition_keys`."""

    @model_validator(mode="after")
    def _check_consistency(self) -> SourceManifest:
        problem = partition_keys_problem(self.partition_keys)
        if problem is not None:
            raise ValueError(f"partition_keys{problem}")
        if not unique(self.capabilities):
            raise ValueError("capabilities: duplicate capability")
        if not unique(route.id for route in self.routes):
            raise ValueError("routes: duplicate route id")
        if not unique(action.id for action in self.actions):
            raise ValueError("actions: duplicate action id")
        shared = {route.id for route in self.routes} & {action.id for action in self.actions}
        if shared:
            raise ValueError(f"actions: id {sorted(shared)[0]!r} also names a route")
        needed = [("routes", i, r.capability) for i, r in enumerate(self.routes)]
        needed += [("actions", i, a.capability) for i, a in enumerate(self.actions)]
        for kind, index, capability in needed:
            if capability not in self.capabilities:
                raise ValueError(
                    f"{kind}[{index}].capability: {capability!r} is not among the manifest's "
                    "capabilities"
                )
        return self


class StrategyManifest(WireModel):
    """What a Strategy type supports and its maxima."""

    type_id: Id
    """The Strategy type's id (`layered`, `general`)."""
    package_name: PackageName
    """The distribution that defines the type."""
    supported_source_roles: tuple[Annotated[str, Strict()], ...] = Field(min_length=1)
    """The Source roles the Strategy may select, or exactly `["*"]` for any."""
    max_sources: Annotated[StrictInt, Field(ge=1, le=1_000)]
    """The most Sources one View may select (1 to 1,000)."""
    max_routes: Annotated[StrictInt, Field(ge=1, le=1_000)]
    """The most routes one View may offer (1 to 1,000)."""
    max_actions: Annotated[StrictInt, Field(ge=1, le=1_000)]
    """The most actions one View may offer (1 to 1,000)."""
    extension_slots: tuple[Id, ...] = ()
    """The View extension slots the Strategy reads (`selection`, `projection`, `capture` or its
    own)."""

    @field_validator("supported_source_roles")
    @classmethod
    def _check_roles(cls, roles: tuple[str, ...]) -> tuple[str, ...]:
        if "*" in roles:
            if roles != ("*",):
                raise ValueError('"*" must be the only supported role')
            return roles
        for role in roles:
            if not re.match(ID_PATTERN, role):
                raise ValueError(f"role {role!r} must match {ID_PATTERN}")
        if not unique(roles):
            raise ValueError("duplicate role")
        return roles

    @field_validator("extension_slots")
    @classmethod
    def _check_slots(cls, slots: tuple[str, ...]) -> tuple[str, ...]:
        if not unique(slots):
            raise ValueError("duplicate slot")
        return slots

    def supports_role(self, role: str) -> bool:
        """Whether a Source of `role` may be selected by this Strategy."""
        return self.supported_source_roles == ("*",) or role in self.supported_source_roles
