"""The management plane: what humans ask of a Source, and its catalog."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, StringConstraints, model_validator

from .._json import FrozenDict
from .base import (
    Description,
    Id,
    InstanceKey,
    JsonObject,
    JsonValue,
    Label,
    PackageName,
    Revision,
    StrictBool,
    StrictInt,
    WireModel,
)
from .manifests import (
    ManagementDescriptor,
    ManagementField,
    ManagementOperation,
    RecordKind,
)
from .sources import Scope


class ManagementRequest(WireModel):
    """A human's management operation on one Source."""

    source_key: InstanceKey
    """The Source to manage."""
    operation: Id
    """The operation's id."""
    input: JsonObject = FrozenDict()
    """The operation's input."""
    scope: Scope = Scope()
    """The identity whose data is managed."""
    confirmed: StrictBool = False
    """Whether a person confirmed the change; a mutation needs it."""
    expected_revision: Revision | None = None
    """The revision the person saw; a mutation is refused when it is no longer current."""


class ManageRequest(WireModel):
    """What a Source's `manage()` receives; a mutation is confirmed and revision-fenced."""

    instance_key: InstanceKey
    """The Source asked."""
    scope: Scope
    """The identity whose data is managed."""
    operation: ManagementOperation
    """The operation to run."""
    input: JsonObject
    """The input, already checked against the operation's schema."""
    expected_revision: Revision | None = None
    """For a mutation, the revision it must still be at (re-check it under your own lock)."""


class ManagementResult(WireModel):
    """The JSON outcome of one management operation."""

    source_key: InstanceKey
    """The Source that answered."""
    operation: Id
    """The operation that ran."""
    output: JsonValue = None
    """The operation's JSON output; never secrets."""
    revision: Revision | None = None
    """The Source's revision after the operation, when known."""


class ManagementEntry(WireModel):
    """One manageable Source in the catalog: its form and operations, never its data."""

    source_key: InstanceKey
    """The manageable Source."""
    type_id: Id
    """Its type."""
    role: Id
    """Its role."""
    package_name: PackageName
    """The distribution that defines it."""
    label: Label
    """Its name in a management interface."""
    description: Description
    """What people can manage there."""
    fields: tuple[ManagementField, ...]
    """Its form's fields."""
    operations: tuple[ManagementOperation, ...]
    """The operations people may run, the record operations included."""
    records: tuple[RecordKind, ...] = ()
    """The kinds of record the Source holds."""
    partition_keys: tuple[Annotated[str, Strict()], ...] = ()
    """The scope ids the Source needs in a scope (its runtime's, else its manifest's): a scope
    lacking one is refused, and a form can ask for them first."""


# ---------------------------------------------------------------------- the records contract


def record_operations(descriptor: ManagementDescriptor) -> tuple[ManagementOperation, ...]:
    """The core-owned record operations a descriptor's record kinds give its Source."""
    return descriptor.record_operations()


def management_operations(descriptor: ManagementDescriptor) -> tuple[ManagementOperation, ...]:
    """Every operation of a Source's management plane: its own, then the record operations."""
    return (*descriptor.operations, *descriptor.record_operations())


class RecordPage(WireModel):
    """What `records-read` answers: one page of records of one kind."""

    records: tuple[JsonObject, ...]
    """The records, each an object with a string `id`, as the kind's schema describes."""
    next_cursor: Annotated[str, StringConstraints(min_length=1, max_length=4_000)] | None = None
    """Where the next page starts; none when this page is the last."""
    groups: tuple[str, ...] | None = None
    """A grouped kind's groups in this scope, on the first page (read without a cursor)."""


class RecordOutcome(WireModel):
    """What happened to one record of a `records-write` batch."""

    index: Annotated[StrictInt, Field(ge=0)]
    """The record's position in the batch."""
    completion: Literal["committed", "accepted", "refused"]
    """`committed` (durable), `accepted` (stored, durability not confirmed) or `refused`."""
    id: Annotated[str, StringConstraints(min_length=1, max_length=1_000)] | None = None
    """The stored record's id, when it has one."""
    replayed: StrictBool = False
    """Whether the record was already there (its idempotency key or content): nothing new."""
    code: Id | None = None
    """Why it was refused (only a refused record has a code)."""
    message: Annotated[str, StringConstraints(max_length=500)] | None = None
    """What is wrong, naming the field and the rule, never the record's content."""

    @model_validator(mode="after")
    def _check_refusal(self) -> RecordOutcome:
        if (self.completion == "refused") != (self.code is not None):
            raise ValueError("code: a refused record has a code, and only a refused one")
        return self


class RecordWriteResult(WireModel):
    """What `records-write` answers: one outcome per record, in the batch's order."""

    results: tuple[RecordOutcome, ...]
    """The outcome of each record."""


class RecordDeleteResult(WireModel):
    """What `records-delete` answers."""

    id: Annotated[str, StringConstraints(min_length=1, max_length=1_000)]
    """The record's id."""
    deleted: StrictBool
    """Whether a record was deleted (false: there was none with that id)."""
    group: Annotated[str, StringConstraints(min_length=1, max_length=1_000)] | None = None
    """The group the record was in, for a grouped kind."""
