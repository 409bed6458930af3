"""Reads and writes on a pinned View: queries and evidence, mutations and receipts."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Annotated, Protocol

from pydantic import Field, Strict, StringConstraints, field_validator, model_validator

from .._json import FrozenDict
from .base import (
    Completion,
    InstanceKey,
    JsonObject,
    JsonValue,
    ReceiptStatus,
    Revision,
    StrictBool,
    StrictInt,
    Text,
    WireModel,
)
from .embedding import VectorSpace
from .sources import ReadGrant
from .view import ActionOffer, ViewRef, ViewRoute


class QueryRequest(WireModel):
    """What a Source's `query()` receives for one route read."""

    view: ViewRef
    """The View the read belongs to: its id and scope."""
    route: ViewRoute
    """The pinned route, with its effective ceilings."""
    grant: ReadGrant
    """This Source's own read grant from the View."""
    input: JsonObject
    """The input, already checked against the route's schema."""


class EvidenceItem(WireModel):
    """One result of a route read, with its provenance."""

    id: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
    """The item's id within the read (not a storage path)."""
    text: Text
    """The item's text, whole: an item that does not fit is omitted, never cut by the core."""
    provenance: JsonObject = FrozenDict()
    """Where the item comes from (revision, space, excerpt bounds), as JSON."""
    metadata: JsonObject = FrozenDict()
    """Other JSON about the item (tags, scores)."""


class Evidence(WireModel):
    """The bounded result of one route read."""

    view_id: str
    """The View the read belongs to."""
    route_id: str
    """The route that was read."""
    source_key: InstanceKey
    """The Source that answered."""
    items: tuple[EvidenceItem, ...] = ()
    """The results, within the route's ceilings."""
    truncated: StrictBool = False
    """Whether more matched than the ceilings let through."""
    output: JsonValue = None
    """JSON a turn policy may set in place of, or beside, the items."""


class MutationRequest(WireModel):
    """What a Source's `mutate()` receives for one authorized write."""

    view: ViewRef
    """The View the write belongs to: its id and scope."""
    offer: ActionOffer
    """The offer being executed."""
    grant: ReadGrant | None
    """This Source's own read grant, or None; a grant is not write authority."""
    input: JsonObject
    """The input, already checked against the action's schema."""
    idempotency_key: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] | None
    ) = None
    """The caller's key; a Source that deduplicates writes the same key only once."""


class MutationReceipt(WireModel):
    """The honest result of one write: how far it got, never more."""

    view_id: str
    """The View the write belongs to."""
    offer_id: str
    """The offer that was executed."""
    source_key: InstanceKey
    """The Source that wrote."""
    completion: Completion
    """How far the write got: accepted, candidate, committed, partial, failed or unknown."""
    status: ReceiptStatus
    """The outcome: succeeded, partial, failed or cancelled."""
    committed_at: str | None = None
    """When the write became durable (ISO 8601 with a time zone); only on a committed receipt."""
    revision: Revision | None = None
    """The Source's revision after the write, when known."""
    idempotency_key: str | None = None
    """The idempotency key the write carried."""
    detail: JsonObject = FrozenDict()
    """JSON the Source adds (the new item's id, a refusal code); never secrets."""

    @field_validator("committed_at")
    @classmethod
    def _check_timestamp(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("committed_at must be an ISO 8601 timestamp") from None
        if moment.tzinfo is None:
            raise ValueError("committed_at must carry a time zone")
        return value

    @model_validator(mode="after")
    def _check_honesty(self) -> MutationReceipt:
        if self.completion == "committed":
            if self.status != "succeeded":
                raise ValueError("status: a committed receipt must have status 'succeeded'")
            if self.committed_at is None:
                raise ValueError("committed_at: a committed receipt must carry committed_at")
        elif self.committed_at is not None:
            raise ValueError("committed_at: only a committed receipt may carry committed_at")
        if self.status == "succeeded" and self.completion not in (
            "accepted",
            "candidate",
            "committed",
        ):
            raise ValueError(f"status: 'succeeded' contradicts completion {self.completion!r}")
        if self.completion == "failed" and self.status not in ("failed", "cancelled"):
            raise ValueError(f"status: {self.status!r} contradicts completion 'failed'")
        if self.completion == "partial" and self.status != "partial":
            raise ValueError(f"status: {self.status!r} contradicts completion 'partial'")
        return self


class EvidenceLimits(WireModel):
    """Ceilings for one route read; they can only narrow what the View pinned."""

    max_results: Annotated[StrictInt, Field(ge=1, le=1_000)] | None = None
    """Fewer items than the View pinned, for this read only."""
    max_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    """Fewer characters than the View pinned, for this read only."""
    max_item_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    """A shorter longest item than the View pinned, for this read only."""


class PolicyRequest(WireModel):
    """What a turn policy's `query()` receives for one route execution."""

    view: ViewRef
    """The View the read belongs to: its id and scope."""
    route: ViewRoute
    """The pinned route being executed."""
    input: JsonObject
    """The input the model gave."""
    vector_spaces: tuple[VectorSpace, ...] = ()
    """The vector spaces of the embedders installed in the host (the View's generation),
    sorted by id; empty when none is. A policy may name them to a ranker that asks for
    candidates by meaning; it still reads only through the route (its `mode` input, when the
    route declares one), never through an embedder."""


class Authorize(Protocol):
    """The host's decision on one write, asked again on every execution of an offer.

    A plain function or lambda taking the `ActionOffer` fits; it may be async. A falsy answer
    refuses the write (`ActionError` with code `not-authorized`) and nothing is written.
    """

    def __call__(self, offer: ActionOffer, /) -> bool | Awaitable[bool]:
        """Whether `offer` may write now."""
        ...
