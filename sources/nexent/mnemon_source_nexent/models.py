"""Nexent's external-memory models, exceptions and provider protocols, declared afresh.

The shapes are Nexent's own, field for field, so a provider written for Nexent builds and reads
them unchanged: `install_nexent_shim()` makes them importable as `nexent.memory.models`,
`nexent.memory.providers.base` and `nexent.memory.providers.retry` when Nexent itself is not
installed. Like Nexent's, the models are ordinary (mutable) pydantic models.

What a provider returns is read back by attribute (`from_attributes`), so the real Nexent's
classes, these, or any object with the same fields are all accepted.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

__all__ = [
    "BaseMemoryProvider",
    "DegradableProviderError",
    "IngestibleMemoryProvider",
    "MemoryIngestRequest",
    "MemoryIngestResult",
    "MemoryIngestUnit",
    "MemoryLayer",
    "MemorySearchRequest",
    "MemorySearchResult",
    "MemoryType",
    "NonRetryableProviderError",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderErrorSeverity",
    "RetryableProviderError",
    "SearchableMemoryProvider",
    "UnitIngestResult",
    "UnitIngestStatus",
]


class MemoryLayer(StrEnum):
    """The layer a memory lives in."""

    TENANT = "tenant"
    USER = "user"
    AGENT = "agent"


class MemoryType(StrEnum):
    """How long a memory is meant to last."""

    SHORT_TERM = "short_term"
    LONG_TERM = "long_term"


class MemorySearchRequest(BaseModel):
    """One search: the query, whose memory it is for, and how many results are wanted."""

    query: str
    tenant_id: str
    user_id: str
    agent_id: str | None = None
    conversation_id: str | None = None
    layers: list[MemoryLayer] = Field(default_factory=list)
    top_k: int = 5
    limit: int = 5
    threshold: float | None = 0.65
    embedding: list[float] | None = None
    hybrid: bool = False
    weight_accurate: float = 0.3


class MemorySearchResult(BaseModel):
    """One found memory; an external provider sets `source` to its name and `is_external`."""

    memory_id: int | None = None
    external_id: str | None = None
    content: str
    score: float
    layer: MemoryLayer | None = None
    source: str = "internal"
    is_external: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class UnitIngestStatus(StrEnum):
    """What happened to one unit."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DEGRADED = "degraded"


class UnitIngestResult(BaseModel):
    """The outcome of one unit (`unit_id` names the unit, by its `event_id`)."""

    unit_id: str
    status: UnitIngestStatus
    message: str | None = None


class MemoryIngestUnit(BaseModel):
    """One unit handed over for ingestion."""

    event_id: str
    event_type: str
    unit_type: str
    unit_content: str
    unit_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryIngestRequest(BaseModel):
    """Units to ingest for one identity, with a key that makes a retry harmless."""

    tenant_id: str
    user_id: str
    agent_id: str | None = None
    conversation_id: str | None = None
    units: list[MemoryIngestUnit]
    idempotency_key: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryIngestResult(BaseModel):
    """The outcome of one ingestion: overall `status`, counts, and one result per unit."""

    provider: str
    status: str
    accepted_count: int = 0
    rejected_count: int = 0
    unit_results: list[UnitIngestResult] = Field(default_factory=list)
    message: str | None = None


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
    DEGRADABLE = "degradable"
    NON_RETRYABLE = "non_retryable"


class ProviderError(BaseModel):
    """A failure as data: its code, message, severity and, for a throttle, when to retry."""

    code: ProviderErrorCode
    message: str
    severity: ProviderErrorSeverity
    retry_after_seconds: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class RetryableProviderError(Exception):
    """A failure worth retrying later (timeouts, throttling, upstream errors)."""

    def __init__(self, message: str, error: ProviderError) -> None:
        super().__init__(message)
        self.error = error


class DegradableProviderError(Exception):
    """A failure the call survives by dropping `removable_units` (their `event_id`s)."""

    def __init__(
        self, message: str, error: ProviderError, removable_units: list[Any] | None = None
    ) -> None:
        super().__init__(message)
        self.error = error
        self.removable_units = removable_units or []


class NonRetryableProviderError(Exception):
    """A failure that will repeat (bad credentials, refused payloads)."""

    def __init__(self, message: str, error: ProviderError) -> None:
        super().__init__(message)
        self.error = error


@runtime_checkable
class SearchableMemoryProvider(Protocol):
    """A provider that searches: `search(request, limit=5, filters=None)`."""

    @property
    def provider_name(self) -> str:
        """The provider's stable name."""
        ...

    async def search(
        self,
        request: MemorySearchRequest,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[MemorySearchResult]:
        """Up to `limit` memories for the request's identity."""
        ...


@runtime_checkable
class IngestibleMemoryProvider(Protocol):
    """A provider that ingests: `ingest(request)`, one result per unit."""

    @property
    def provider_name(self) -> str:
        """The provider's stable name."""
        ...

    async def ingest(self, request: MemoryIngestRequest) -> MemoryIngestResult:
        """Hand the units over; the result accounts for every one."""
        ...


class BaseMemoryProvider:
    """A convenience base: the provider's name, key, endpoint and timeout, and its headers."""

    def __init__(
        self,
        provider_name: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: int = 30,
    ) -> None:
        self._provider_name = provider_name
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout

    @property
    def provider_name(self) -> str:
        """The provider's stable name."""
        return self._provider_name

    def _build_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def validate_config(self) -> None:
        """Raise `ValueError` when the configuration cannot work."""
        if not self.provider_name:
            raise ValueError("provider_name is required")
