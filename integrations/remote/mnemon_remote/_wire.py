"""The wire format of protocol v0: routes, the invocation body and the error envelope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Strict, StringConstraints

from mnemon.sdk import (
    Evidence,
    FactsRequest,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    ProjectionRequest,
    QueryRequest,
    SourceError,
    SourceFacts,
    SourceProvenance,
    ViewContribution,
)

from ._answers import Redactor

__all__ = [
    "CALLS",
    "DISCOVERY",
    "HEALTH",
    "Call",
    "Envelope",
    "Invocation",
    "envelope_for",
    "error_class_contradicts",
    "parse_envelope",
    "source_error_from",
]

DISCOVERY = "/v0/discovery"
HEALTH = "/v0/health"
ErrorClass = Literal["access", "transient", "source"]


@dataclass(frozen=True)
class Call:
    """One contribution call: its path and the models of its request and answer."""

    name: str
    request: type[Any]
    answer: type[Any]

    @property
    def path(self) -> str:
        """The route this call is POSTed to."""
        return f"/v0/contributions/source/{self.name}"


CALLS = {
    call.name: call
    for call in (
        Call("facts", FactsRequest, SourceFacts),
        Call("project", ProjectionRequest, ViewContribution),
        Call("query", QueryRequest, Evidence),
        Call("mutate", MutationRequest, MutationReceipt),
        Call("manage", ManageRequest, ManagementResult),
    )
}

_Text = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=128)]


class Invocation(BaseModel):
    """The body of every contribution call; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    invocation_id: _Text
    instance_key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]
    provenance: SourceProvenance
    request: dict[str, Any]


class Envelope(BaseModel):
    """The error envelope of every non-2xx answer; `retryable` is authoritative."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    code: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
    message: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    retryable: bool
    error_class: ErrorClass | None = None
    retry_after_seconds: float | None = None


def parse_envelope(
    raw: bytes, validator: Draft202012Validator, redactor: Redactor | None = None
) -> Envelope | None:
    """The envelope in `raw`, or None when `raw` is not a valid one (which means unavailability).

    With a `redactor`, the secrets it holds are scrubbed first: an envelope whose code had to
    be scrubbed is no envelope.
    """
    try:
        # NaN and Infinity are not JSON: an envelope carrying one is no envelope
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if redactor and redactor.may_hold(raw):
        value = redactor.redact(value)
    if not isinstance(value, dict) or not validator.is_valid(value):
        return None
    return Envelope.model_validate(value)


def error_class_contradicts(envelope: Envelope) -> bool:
    """Whether the envelope's class contradicts its `retryable` (`wrong_error_class`)."""
    if envelope.error_class is None:
        return False
    return (envelope.error_class == "transient") != envelope.retryable


def envelope_for(error: SourceError) -> tuple[int, Envelope]:
    """The HTTP status and envelope a server answers for a Source's own `SourceError`.

    The message names only the code: a plugin's message may carry what it must not.
    """
    error_class: ErrorClass
    if error.kind == "transient":
        status, error_class, retryable = 503, "transient", True
    elif error.kind == "access":
        status, error_class, retryable = 403, "access", False
    else:
        status, error_class, retryable = 422, "source", False
    code = error.code.replace("-", "_")
    message = f"the Source refused the call ({code})"
    return status, Envelope(
        code=code,
        message=message,
        retryable=retryable,
        error_class=error_class,
        retry_after_seconds=error.retry_after,
    )


def source_error_from(envelope: Envelope, *, write: bool) -> SourceError:
    """The `SourceError` a client raises for a plugin's envelope (its decision, never outage).

    `retryable` decides the class; a non-retryable envelope names `access` or the source. A
    refused write wrote nothing only when the plugin says the refusal is final. The plugin's
    `retry_after_seconds` becomes the error's `retry_after`, and its code the `origin_code`.
    """
    if envelope.retryable:
        kind: Any = "transient"
    elif envelope.error_class == "access":
        kind = "access"
    else:
        kind = "terminal"
    nothing_written = None if not write else not envelope.retryable
    return SourceError(
        envelope.code,
        f"the remote plugin refused the call ({envelope.code})",
        kind=kind,
        nothing_written=nothing_written,
        retry_after=envelope.retry_after_seconds,
        origin_code=envelope.code,
    )
