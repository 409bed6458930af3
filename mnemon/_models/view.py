"""The View: the frozen result of one composition, with its routes, offers and diagnostics."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict, StringConstraints, model_validator

from .base import Consistency, Description, Id, InstanceKey, JsonObject, SourceCapability, WireModel
from .sources import CompositionRequest, Fragment, Scope
from .strategies import Guidance


class Diagnostic(WireModel):
    """A sanitized, coded note about something that degraded; never raw exception text."""

    code: Id
    message: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=500)]
    key: InstanceKey | None = None


class ViewRoute(WireModel):
    """A route pinned in a View, with its effective ceilings."""

    id: Annotated[str, Strict()]
    source_key: InstanceKey
    route_id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    max_calls: int
    max_results: int
    max_characters: int
    max_item_characters: int = Field(
        default=0,
        description=(
            "The longest text one evidence item may have; a longer item is omitted whole, so "
            "a Source returns an excerpt within it (saying so in the item's provenance). "
            "Never more than max_characters; when not given, it is max_characters."
        ),
    )

    @model_validator(mode="after")
    def _item_ceiling(self) -> ViewRoute:
        if not 0 < self.max_item_characters <= self.max_characters:
            object.__setattr__(self, "max_item_characters", self.max_characters)
        return self


class ActionOffer(WireModel):
    """A write the model may request; each execution is re-authorized by the host."""

    id: Annotated[str, Strict()]
    source_key: InstanceKey
    action_id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    authority: str | None = None


class GrantRecord(WireModel):
    """The digest of one pinned read grant; the grant's value stays host-side."""

    source_key: InstanceKey
    digest: str


class SourceConsistency(WireModel):
    """Which revision of a Source a View pins, and how strongly."""

    source_key: InstanceKey
    consistency: Consistency
    revision: str | None


class ExtensionRecord(WireModel):
    """The digest of one extension contribution the View was composed with."""

    instance_key: InstanceKey
    slot: Id
    digest: str


class View(WireModel):
    """The frozen result of one composition; `id` is `view:<digest>` of its canonical body."""

    id: str
    digest: str
    generation_id: str
    created_at: str
    request: CompositionRequest
    strategy_key: InstanceKey
    strategy_type_id: Id
    explanation: str
    guidance: Guidance | None
    fragments: tuple[Fragment, ...]
    routes: tuple[ViewRoute, ...]
    offers: tuple[ActionOffer, ...]
    grants: tuple[GrantRecord, ...]
    consistency: tuple[SourceConsistency, ...]
    extensions: tuple[ExtensionRecord, ...]
    diagnostics: tuple[Diagnostic, ...]

    def route(self, route_id: str) -> ViewRoute | None:
        """The pinned route with View-wide id `route_id`, if any."""
        return next((route for route in self.routes if route.id == route_id), None)

    def offer(self, offer_id: str) -> ActionOffer | None:
        """The pinned offer with View-wide id `offer_id`, if any."""
        return next((offer for offer in self.offers if offer.id == offer_id), None)


class ViewRef(WireModel):
    """All a Source learns about the View it serves: its id and scope."""

    id: str
    scope: Scope
