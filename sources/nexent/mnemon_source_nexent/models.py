"""Nexent's external-memory wire models and exceptions, declared afresh with pydantic.

Providers written for Nexent build and return these; `install_nexent_shim()` makes them
importable as `nexent.memory.models` and `nexent.memory.providers.retry` when Nexent itself
is not installed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DegradableProviderError",
    "MemoryIngestRequest",
    "MemoryIngestResult",
    "MemoryIngestUnit",
    "MemoryLayer",
    "MemorySearchRequest",
    "MemorySearchResult",
    "NonRetryableProviderError",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderErrorSeverity",
    "RetryableProviderError",
    "UnitIngestResult",
    "UnitIngestStatus",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryLayer(StrEnum):
    """Whose memory a request or result belongs to."""

    TENANT = "tenant"
    USER = "user"
    AGENT = "agent"
    CONVERSATION = "conversation"


class MemorySearchRequest(_Model):
    """One search: the query and the identity it is for."""

    query: str
    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    conversation_id: str | None = None
    top_k: int = Field(default=10, ge=1, le=100)
    layers: tuple[MemoryLayer, ...] = ()


class MemorySearchResult(_Model):
    """One found memory; `score` is on the provider's own scale."""

    external_id: str
    content: str
    score: float = 0.0
    layer: MemoryLayer | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryIngestUnit(_Model):
    """One unit handed over for ingestion."""

    unit_id: str
    content: str
    unit_type: str = "message"
    role: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryIngestRequest(_Model):
    """Units to ingest for one identity, with a key that makes a retry harmless."""

    idempotency_key: str
    units: tuple[MemoryIngestUnit, ...]
    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    conversation_id: str | None = None


class UnitIngestStatus(StrEnum):
    """What happened to one unit."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEGRADED = "degraded"


class ProviderErrorCode(StrEnum):
    """Nexent's failure codes."""

    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    PROVIDER_ERROR = "provider_error"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    UNSUPPORTED_UNIT_TYPE = "unsupported_unit_type"
    PARTIAL_ACCEPTANCE = "partial_acceptance"
    INVALID_PAYLOAD = "invalid_payload"
    SCHEMA_MISMATCH = "schema_mismatch"
    UNKNOWN = "unknown"


class ProviderErrorSeverity(StrEnum):
    """How bad a failure is for the caller."""

    RETRYABLE = "retryable"
    NON_RETRYABLE = "non_retryable"
    DEGRADABLE = "degradable"


class ProviderError(_Model):
    """A failure as data: its code, severity and, for a throttle, when to try again."""

    code: ProviderErrorCode
    severity: ProviderErrorSeverity
    message: str = ""
    retry_after_seconds: float | None = None


class UnitIngestResult(_Model):
    """The outcome of one unit."""

    unit_id: str
    status: UnitIngestStatus
    error: ProviderError | None = None


class MemoryIngestResult(_Model):
    """The outcome of one ingestion: `ok`, `partial` or `error`, and each unit's."""

    status: str = Field(pattern="^(ok|partial|error)$")
    units: tuple[UnitIngestResult, ...] = ()
    error: ProviderError | None = None


class _ProviderException(Exception):
    severity = ProviderErrorSeverity.NON_RETRYABLE

    def __init__(
        self,
        code: ProviderErrorCode | str = ProviderErrorCode.UNKNOWN,
        message: str = "",
        *,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(message or str(code))
        try:
            self.code = ProviderErrorCode(code)
        except ValueError:
            self.code = ProviderErrorCode.UNKNOWN
        self.retry_after_seconds = retry_after_seconds

    def to_error(self) -> ProviderError:
        """This failure as a `ProviderError`."""
        return ProviderError(
            code=self.code,
            severity=self.severity,
            message=str(self),
            retry_after_seconds=self.retry_after_seconds,
        )


class RetryableProviderError(_ProviderException):
    """A failure worth retrying later (timeouts, throttling, upstream errors)."""

    severity = ProviderErrorSeverity.RETRYABLE


class NonRetryableProviderError(_ProviderException):
    """A failure that will repeat (bad credentials, refused payloads)."""

    severity = ProviderErrorSeverity.NON_RETRYABLE


class DegradableProviderError(_ProviderException):
    """Some units cannot be ingested; `removable_units` names them, the rest may go ahead."""

    severity = ProviderErrorSeverity.DEGRADABLE

    def __init__(
        self,
        code: ProviderErrorCode | str = ProviderErrorCode.PARTIAL_ACCEPTANCE,
        message: str = "",
        *,
        removable_units: tuple[str, ...] | list[str] = (),
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(code, message, retry_after_seconds=retry_after_seconds)
        self.removable_units = tuple(removable_units)
