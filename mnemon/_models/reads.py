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
from .sources import ReadGrant
from .view import ActionOffer, ViewRef, ViewRoute


class QueryRequest(WireModel):
    """What a Source's `query()` receives for one route read."""

    view: ViewRef
    route: ViewRoute
    grant: ReadGrant
    input: JsonObject


class EvidenceItem(WireModel):
    """One result of a route read, with its provenance."""

    id: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
    text: Text
    provenance: JsonObject = FrozenDict()
    metadata: JsonObject = FrozenDict()


class Evidence(WireModel):
    """The bounded result of one route read."""

    view_id: str
    route_id: str
    source_key: InstanceKey
    items: tuple[EvidenceItem, ...] = ()
    truncated: StrictBool = False
    output: JsonValue = None


class MutationRequest(WireModel):
    """What a Source's `mutate()` receives for one authorized write."""

    view: ViewRef
    offer: ActionOffer
    grant: ReadGrant | None
    input: JsonObject
    idempotency_key: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] | None
    ) = None


class MutationReceipt(WireModel):
    """The honest result of one write: how far it got, never more."""

    view_id: str
    offer_id: str
    source_key: InstanceKey
    completion: Completion
    status: ReceiptStatus
    committed_at: str | None = None
    revision: Revision | None = None
    idempotency_key: str | None = None
    detail: JsonObject = FrozenDict()

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
    max_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    max_item_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None


class PolicyRequest(WireModel):
    """What a turn policy's `query()` receives for one route execution."""

    view: ViewRef
    route: ViewRoute
    input: JsonObject


class Authorize(Protocol):
    """The host's decision on one write, asked again on every execution of an offer.

    A plain function or lambda taking the `ActionOffer` fits; it may be async. A falsy answer
    refuses the write (`ActionError` with code `not-authorized`) and nothing is written.
    """

    def __call__(self, offer: ActionOffer, /) -> bool | Awaitable[bool]:
        """Whether `offer` may write now."""
        ...
