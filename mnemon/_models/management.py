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
    operation: Id
    input: JsonObject = FrozenDict()
    scope: Scope = Scope()
    confirmed: StrictBool = False
    expected_revision: Revision | None = None


class ManageRequest(WireModel):
    """What a Source's `manage()` receives; a mutation is confirmed and revision-fenced."""

    instance_key: InstanceKey
    scope: Scope
    operation: ManagementOperation
    input: JsonObject
    expected_revision: Revision | None = None


class ManagementResult(WireModel):
    """The JSON outcome of one management operation."""

    source_key: InstanceKey
    operation: Id
    output: JsonValue = None
    revision: Revision | None = None


class ManagementEntry(WireModel):
    """One manageable Source in the catalog: its form and operations, never its data."""

    source_key: InstanceKey
    type_id: Id
    role: Id
    package_name: PackageName
    label: Label
    description: Description
    fields: tuple[ManagementField, ...]
    operations: tuple[ManagementOperation, ...]
