"""The management plane: what humans ask of a Source, and its catalog."""

from __future__ import annotations

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
    WireModel,
)
from .manifests import ManagementField, ManagementOperation
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
    """The operations people may run."""
