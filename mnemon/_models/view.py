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
    """A stable code, such as `source-facts-timeout` or `missing-scope`."""
    message: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=500)]
    """A sanitized sentence; never raw exception text, memory text or secrets."""
    key: InstanceKey | None = None
    """The instance key concerned, if any."""
    reason: Id | None = None
    """For a Source that is unavailable or degraded, the coded reason it gave
    (`missing-scope`, `damaged-file`, `unauthorized`), if any."""


class ViewRoute(WireModel):
    """A route pinned in a View, with its effective ceilings."""

    id: Annotated[str, Strict()]
    """The View-wide id the model calls, `<source key>/<route id>`."""
    source_key: InstanceKey
    """The Source that serves the route."""
    route_id: Id
    """The route's id within its Source."""
    description: Description
    """What the route reads."""
    capability: SourceCapability
    """The capability the route needs."""
    input_schema: JsonObject
    """The JSON Schema of the route's input."""
    max_calls: int
    """How many times this turn may read it."""
    max_results: int
    """The most items one read returns."""
    max_characters: int
    """The most characters one read returns."""
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
    """The View-wide id the model calls, `<source key>/<action id>`."""
    source_key: InstanceKey
    """The Source that serves the action."""
    action_id: Id
    """The action's id within its Source."""
    description: Description
    """What the action writes."""
    capability: SourceCapability
    """The capability the action needs."""
    input_schema: JsonObject
    """The JSON Schema of the action's input."""
    authority: str | None = None
    """The authority a host should ask for, if any."""


class GrantRecord(WireModel):
    """The digest of one pinned read grant; the grant's value stays host-side."""

    source_key: InstanceKey
    """The Source that issued the grant."""
    digest: str
    """The SHA-256 of the grant's canonical JSON; the value itself stays host-side."""


class SourceConsistency(WireModel):
    """Which revision of a Source a View pins, and how strongly."""

    source_key: InstanceKey
    """The Source."""
    consistency: Consistency
    """How strongly the View pins it."""
    revision: str | None
    """The revision pinned, if the Source reported one."""
    role: Id | None = None
    """The Source's role (from its manifest), so a turn policy knows what each Source is."""


class ExtensionRecord(WireModel):
    """The digest of one extension contribution the View was composed with."""

    instance_key: InstanceKey
    """The extension's instance key."""
    slot: Id
    """The slot it filled."""
    digest: str
    """The SHA-256 of its contribution's canonical JSON."""


class View(WireModel):
    """The frozen result of one composition; `id` is `view:<digest>` of its canonical body."""

    id: str
    """`view:<digest>`: equal inputs give an equal id."""
    digest: str
    """The SHA-256 of the View's canonical body."""
    generation_id: str
    """The generation the View was composed on; its routes and actions run there."""
    created_at: str
    """When the View was composed (ISO 8601)."""
    request: CompositionRequest
    """The request it was composed for."""
    strategy_key: InstanceKey
    """The Strategy instance that composed it."""
    strategy_type_id: Id
    """The Strategy type that composed it."""
    explanation: str
    """The Strategy's explanation of its selection."""
    guidance: Guidance | None
    """The Strategy's trusted guidance, if any."""
    fragments: tuple[Fragment, ...]
    """The projected memory text, Source by Source."""
    routes: tuple[ViewRoute, ...]
    """The reads the model may request."""
    policy_routes: tuple[ViewRoute, ...] = ()
    """Reads pinned for the Strategy's turn policy alone (`RouteReader.sibling`): never shown
    to the model, never executed by the host directly."""
    offers: tuple[ActionOffer, ...]
    """The writes the model may request; each is re-authorized by the host."""
    grants: tuple[GrantRecord, ...]
    """Digests of the pinned read grants."""
    consistency: tuple[SourceConsistency, ...]
    """Each selected Source: its role, and which revision the View pins."""
    extensions: tuple[ExtensionRecord, ...]
    """Digests of the extension contributions it used."""
    diagnostics: tuple[Diagnostic, ...]
    """Coded notes about what degraded, sorted by key and code."""
    tool_ids: tuple[str, ...] = ()
    """Every route and action the generation's Sources declare, offered here or not
    (`route:source:spaces/recall`, `action:source:runtime/add`), sorted: tool names are derived
    from these, so a profile's tool names do not change with the scope."""

    def route(self, route_id: str) -> ViewRoute | None:
        """The pinned route with View-wide id `route_id`, if any."""
        return next((route for route in self.routes if route.id == route_id), None)

    def policy_route(self, route_id: str) -> ViewRoute | None:
        """The route pinned for the turn policy alone with View-wide id `route_id`, if any."""
        return next((route for route in self.policy_routes if route.id == route_id), None)

    def offer(self, offer_id: str) -> ActionOffer | None:
        """The pinned offer with View-wide id `offer_id`, if any."""
        return next((offer for offer in self.offers if offer.id == offer_id), None)


class ViewRef(WireModel):
    """All a Source learns about the View it serves: its id and scope."""

    id: str
    """The View's id."""
    scope: Scope
    """The identity the View is for."""
