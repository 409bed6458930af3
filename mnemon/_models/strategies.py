"""What a Strategy sees and proposes: candidates, extension contributions, the ViewSpec."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict, StringConstraints, model_validator

from .._json import unique
from .base import (
    GUIDANCE_LIMIT,
    MAX_PROJECTION_CHARACTERS,
    Consistency,
    Description,
    Id,
    InstanceKey,
    JsonObject,
    JsonValue,
    PackageName,
    ProjectionMode,
    SourceCapability,
    StrictBool,
    StrictInt,
    WireModel,
)
from .sources import Scope, SourceFacts, ViewBudget


class SourceRoute(WireModel):
    """A route the core derived for one Source (manifest ∩ live facts ∩ ceiling)."""

    source_key: InstanceKey
    id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    max_calls: int
    max_results: int | None
    max_characters: int | None


class SourceAction(WireModel):
    """An action the core derived for one Source (manifest ∩ live facts ∩ ceiling)."""

    source_key: InstanceKey
    id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    authority: str | None


class SourceCandidate(WireModel):
    """One Source as a Strategy sees it: effective facts and derived routes and actions."""

    key: InstanceKey
    package_name: PackageName
    consistency: Consistency
    facts: SourceFacts
    routes: tuple[SourceRoute, ...]
    actions: tuple[SourceAction, ...]


class ExtensionContribution(WireModel):
    """A bounded JSON value an active View extension contributed to one composition."""

    instance_key: InstanceKey
    type_id: Id
    slot: Id
    value: JsonValue


class ProjectionSpec(WireModel):
    """How a selected Source is projected."""

    mode: ProjectionMode
    max_characters: Annotated[StrictInt, Field(ge=0, le=MAX_PROJECTION_CHARACTERS)]


class SourceSelection(WireModel):
    """One Source a Strategy selected, with its projection, routes and actions."""

    source_key: InstanceKey
    required: StrictBool = True
    projection: ProjectionSpec | None = None
    route_ids: tuple[Id, ...] = ()
    action_ids: tuple[Id, ...] = ()


GuidanceText = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=GUIDANCE_LIMIT)]


class Reminders(WireModel):
    """Short reminders shown after memory for reads, writes or both."""

    read: GuidanceText | None = None
    write: GuidanceText | None = None
    both: GuidanceText | None = None


class Guidance(WireModel):
    """Trusted Strategy text, rendered apart from quoted Source data."""

    system: GuidanceText | None = None
    routing: GuidanceText | None = None
    reminders: Reminders | None = None


class ViewSpec(WireModel):
    """A Strategy's proposal for one View, validated by the core against facts and budget."""

    strategy_type_id: Id
    sources: tuple[SourceSelection, ...] = ()
    explanation: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=4_000)]
    guidance: Guidance | None = None


class ComposeRequest(WireModel):
    """The frozen request a Strategy's `compose()` receives."""

    scope: Scope
    scenario: str
    budget: ViewBudget


# ------------------------------------------------------------------------- standard slot values

_SlotKey = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]


class SelectionSlotValue(WireModel):
    """The value of the standard `selection` slot: which Sources the View should use."""

    source_keys: tuple[_SlotKey, ...] = Field(
        max_length=32, description="Exact Source instance keys, highest priority first."
    )
    writable_source_keys: tuple[_SlotKey, ...] = Field(
        default=(), description="The subset of source_keys whose write offers may be shown."
    )

    @model_validator(mode="after")
    def _check(self) -> SelectionSlotValue:
        if not unique(self.source_keys):
            raise ValueError("source_keys: must be unique")
        if not unique(self.writable_source_keys):
            raise ValueError("writable_source_keys: must be unique")
        outside = [key for key in self.writable_source_keys if key not in self.source_keys]
        if outside:
            raise ValueError(f"writable_source_keys: {outside[0]!r} is not in source_keys")
        return self


class ProjectionSlotValue(WireModel):
    """The value of the standard `projection` slot: a cap on the View's projected text."""

    max_projection_characters: Annotated[
        int, Strict(), Field(ge=1, le=MAX_PROJECTION_CHARACTERS)
    ] = Field(description="The most characters of memory text the View may project.")


class CaptureSlotValue(WireModel):
    """The value of the standard `capture` slot: guidance for recording memories."""

    instruction: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=4_000)] = (
        Field(description="What the model is asked to capture, shown as trusted guidance.")
    )
    action_ids: tuple[Id, ...] = Field(
        min_length=1, max_length=32, description="The action ids that record a memory."
    )
    source_keys: tuple[_SlotKey, ...] | None = Field(
        default=None, max_length=32, description="The Sources to capture into (default: any)."
    )
