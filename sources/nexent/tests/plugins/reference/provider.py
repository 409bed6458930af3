"""A memory provider for Nexent, written from Nexent's external memory provider contract alone.

It talks to a small HTTP memory service, maps its answers to Nexent's models and its failures
to Nexent's exceptions, exactly as the contract's failure table says. Nothing here knows about
the host that runs it.
"""

import httpx
from nexent.memory.models import (
    MemoryIngestRequest,
    MemoryIngestResult,
    MemorySearchRequest,
    MemorySearchResult,
    ProviderError,
    ProviderErrorCode,
    ProviderErrorSeverity,
    UnitIngestResult,
    UnitIngestStatus,
)
from nexent.memory.providers.retry import (
    DegradableProviderError,
    NonRetryableProviderError,
    RetryableProviderError,
)

NAME = "reference"


def _error(code, severity, message, retry_after=None):
    return ProviderError(
        code=code, message=message, severity=severity, retry_after_seconds=retry_after
    )


class ReferenceProvider:
    def __init__(self, config: dict):
        self.endpoint = config["endpoint"]
        self.api_key = config["api_key"]
        self.timeout = float(config.get("timeout_seconds", 30))

    @property
    def provider_name(self) -> str:
        return NAME

    async def _post(self, path, payload):
        headers = {"Authorization": f"Bearer {self.api_key}"}
        retryable = ProviderErrorSeverity.RETRYABLE
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(self.endpoint + path, json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            message = f"timed out calling {self.endpoint}"
            raise RetryableProviderError(
                message, _error(ProviderErrorCode.TIMEOUT, retryable, message)
            ) from exc
        except httpx.TransportError as exc:
            message = f"cannot reach {self.endpoint}"
            raise RetryableProviderError(
                message, _error(ProviderErrorCode.PROVIDER_ERROR, retryable, message)
            ) from exc
        status = response.status_code
        final = ProviderErrorSeverity.NON_RETRYABLE
        if status == 401:
            # a careless message: the host must never show it
            message = f"401 with key {self.api_key}"
            raise NonRetryableProviderError(
                message, _error(ProviderErrorCode.UNAUTHORIZED, final, message)
            )
        if status == 403:
            raise NonRetryableProviderError(
                "403", _error(ProviderErrorCode.FORBIDDEN, final, "forbidden")
            )
        if status == 429:
            wait = response.headers.get("Retry-After")
            raise RetryableProviderError(
                "429",
                _error(
                    ProviderErrorCode.RATE_LIMITED,
                    retryable,
                    "throttled",
                    int(wait) if wait else None,
                ),
            )
        if status == 409:
            removable = [u for u in response.headers.get("X-Removable", "").split(",") if u]
            raise DegradableProviderError(
                "409",
                _error(
                    ProviderErrorCode.UNSUPPORTED_UNIT_TYPE,
                    ProviderErrorSeverity.DEGRADABLE,
                    "unsupported unit type",
                ),
                removable_units=removable,
            )
        if status >= 500:
            raise RetryableProviderError(
                f"{status}", _error(ProviderErrorCode.PROVIDER_ERROR, retryable, f"{status}")
            )
        if status >= 400:
            raise NonRetryableProviderError(
                f"{status}", _error(ProviderErrorCode.UNKNOWN, final, f"{status}")
            )
        return response.json()

    async def search(
        self,
        request: MemorySearchRequest,
        limit: int = 5,
        filters: dict | None = None,
    ) -> list[MemorySearchResult]:
        body = {
            "query": request.query,
            "tenant_id": request.tenant_id,
            "user_id": request.user_id,
            "agent_id": request.agent_id,
            "conversation_id": request.conversation_id,
            "limit": limit,
            "filters": filters or {},
        }
        answer = await self._post("/search", body)
        return [
            MemorySearchResult(
                external_id=hit["id"],
                content=hit["content"],
                score=float(hit["score"]),
                source=NAME,
                is_external=True,
                metadata={"kind": hit.get("kind", "memory")},
            )
            for hit in answer["results"][:limit]
        ]

    async def ingest(self, request: MemoryIngestRequest) -> MemoryIngestResult:
        body = {
            "tenant_id": request.tenant_id,
            "user_id": request.user_id,
            "agent_id": request.agent_id,
            "conversation_id": request.conversation_id,
            "idempotency_key": request.idempotency_key,
            "units": [
                {
                    "event_id": unit.event_id,
                    "unit_type": unit.unit_type,
                    "content": unit.unit_content,
                }
                for unit in request.units
            ],
        }
        answer = await self._post("/ingest", body)
        results = [
            UnitIngestResult(
                unit_id=unit["event_id"],
                status=UnitIngestStatus(unit["status"]),
                message=unit.get("message"),
            )
            for unit in answer["units"]
        ]
        accepted = sum(r.status == UnitIngestStatus.ACCEPTED for r in results)
        rejected = sum(r.status == UnitIngestStatus.REJECTED for r in results)
        if accepted == len(results):
            status = "ok"
        elif accepted:
            status = "partial"
        else:
            status = "error"
        return MemoryIngestResult(
            provider=NAME,
            status=status,
            accepted_count=accepted,
            rejected_count=rejected,
            unit_results=results,
        )
