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
    """The Source that serves the route."""
    id: Id
    """The route's id within its Source."""
    description: Description
    """What the route reads."""
    capability: SourceCapability
    """The capability the route needs."""
    input_schema: JsonObject
    """The JSON Schema of the route's input."""
    max_calls: int
    """How many times one turn may read it."""
    max_results: int | None
    """The most items one read may return, if the manifest says."""
    max_characters: int | None
    """The most characters one read may return, if the manifest says."""


class SourceAction(WireModel):
    """An action the core derived for one Source (manifest ∩ live facts ∩ ceiling)."""

    source_key: InstanceKey
    """The Source that serves the action."""
    id: Id
    """The action's id within its Source."""
    description: Description
    """What the action writes."""
    capability: SourceCapability
    """The capability the action needs."""
    input_schema: JsonObject
    """The JSON Schema of the action's input."""
    authority: str | None
    """The authority a host should ask for, if any."""


class SourceCandidate(WireModel):
    """One Source as a Strategy sees it: effective facts and derived routes and actions."""

    key: InstanceKey
    """The Source's instance key; a ViewSpec selects it by this key."""
    package_name: PackageName
    """The distribution that defines the Source type."""
    consistency: Consistency
    """The Source's consistency, from its manifest."""
    facts: SourceFacts
    """The Source's facts for this composition, narrowed by the host's ceiling."""
    routes: tuple[SourceRoute, ...]
    """The routes the Strategy may select for it."""
    actions: tuple[SourceAction, ...]
    """The actions the Strategy may select for it."""


class ExtensionContribution(WireModel):
    """A bounded JSON value an active View extension contributed to one composition."""

    instance_key: InstanceKey
    """The extension's instance key."""
    type_id: Id
    """The extension's type."""
    slot: Id
    """The slot the value fills (`selection`, `projection`, `capture` or a Strategy's own)."""
    value: JsonValue
    """The bounded JSON the extension contributed."""


class ProjectionSpec(WireModel):
    """How a selected Source is projected."""

    mode: ProjectionMode
    """`eager` (memory text shown) or `routed` (a short cover; reads go through routes)."""
    max_characters: Annotated[StrictInt, Field(ge=0, le=MAX_PROJECTION_CHARACTERS)]
    """The most characters this Source may project."""


class SourceSelection(WireModel):
    """One Source a Strategy selected, with its projection, routes and actions."""

    source_key: InstanceKey
    """The selected Source's instance key."""
    required: StrictBool = True
    """Whether the turn fails when this Source fails; an optional Source is dropped with a
    diagnostic."""
    projection: ProjectionSpec | None = None
    """How the Source is projected, or None for no projection."""
    route_ids: tuple[Id, ...] = ()
    """The Source-local ids of the routes to offer."""
    action_ids: tuple[Id, ...] = ()
    """The Source-local ids of the actions to offer."""
    policy_route_ids: tuple[Id, ...] = ()
    """The Source-local ids of routes pinned for the Strategy's turn policy alone: the policy
    may read them (`RouteReader.sibling`) while it answers a route the model called, but the
    model never sees them and the host cannot execute them directly. Needs a turn policy."""


GuidanceText = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=GUIDANCE_LIMIT)]


class Reminders(WireModel):
    """Short reminders shown after memory for reads, writes or both."""

    read: GuidanceText | None = None
    """A reminder shown when the View offers reads."""
    write: GuidanceText | None = None
    """A reminder shown when the View offers writes."""
    both: GuidanceText | None = None
    """A reminder shown when the View offers reads and writes."""


class Guidance(WireModel):
    """Trusted Strategy text, rendered apart from quoted Source data."""

    system: GuidanceText | None = None
    """Trusted instructions about memory, shown before it."""
    routing: GuidanceText | None = None
    """Trusted instructions on when to use routes."""
    reminders: Reminders | None = None
    """Short reminders shown after memory."""


class ViewSpec(WireModel):
    """A Strategy's proposal for one View, validated by the core against facts and budget."""

    strategy_type_id: Id
    """The proposing Strategy's type id."""
    sources: tuple[SourceSelection, ...] = ()
    """The selected Sources, with their projections, routes and actions."""
    explanation: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=4_000)]
    """Why this selection, in a sentence; shown in reports, not to the model."""
    guidance: Guidance | None = None
    """Trusted guidance for the model, rendered apart from memory text."""


class ComposeRequest(WireModel):
    """The frozen request a Strategy's `compose()` receives."""

    scope: Scope
    """Whose View this is."""
    scenario: str
    """What kind of turn this is."""
    budget: ViewBudget
    """How much the View may hold."""


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
