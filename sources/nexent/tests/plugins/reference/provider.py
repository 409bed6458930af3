"""A Nexent-style provider: plain `search`/`ingest` coroutines raising Nexent's exceptions."""

import httpx
from nexent.memory.models import (
    MemoryIngestResult,
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


class ReferenceProvider:
    def __init__(self, config):
        self.endpoint = config["endpoint"]
        self.api_key = config["api_key"]
        self.timeout = float(config.get("request_timeout", 5))

    async def _post(self, path, payload):
        headers = {"Authorization": f"Bearer {self.api_key}"}
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(self.endpoint + path, json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            raise RetryableProviderError(ProviderErrorCode.TIMEOUT, str(exc)) from exc
        except httpx.TransportError as exc:
            raise RetryableProviderError(ProviderErrorCode.PROVIDER_ERROR, str(exc)) from exc
        status = response.status_code
        if status == 401:
            raise NonRetryableProviderError(ProviderErrorCode.UNAUTHORIZED, f"401 {self.api_key}")
        if status == 403:
            raise NonRetryableProviderError(ProviderErrorCode.FORBIDDEN, "403")
        if status == 429:
            wait = response.headers.get("Retry-After")
            raise RetryableProviderError(
                ProviderErrorCode.RATE_LIMITED,
                "429",
                retry_after_seconds=float(wait) if wait else None,
            )
        if status == 409:
            body = response.headers.get("X-Removable", "")
            raise DegradableProviderError(
                ProviderErrorCode.UNSUPPORTED_UNIT_TYPE, "409", removable_units=body.split(",")
            )
        if status >= 500:
            raise RetryableProviderError(ProviderErrorCode.PROVIDER_ERROR, f"{status}")
        if status >= 400:
            raise NonRetryableProviderError(ProviderErrorCode.UNKNOWN, f"{status}")
        return response.json()

    async def search(self, request):
        body = await self._post("/search", request.model_dump(mode="json"))
        return [
            MemorySearchResult(external_id=hit["id"], content=hit["content"], score=hit["score"])
            for hit in body["results"]
        ]

    async def ingest(self, request):
        body = await self._post("/ingest", request.model_dump(mode="json"))
        units = tuple(
            UnitIngestResult(
                unit_id=unit["unit_id"],
                status=UnitIngestStatus(unit["status"]),
                error=None
                if unit["status"] == "accepted"
                else ProviderError(
                    code=ProviderErrorCode.UNSUPPORTED_UNIT_TYPE,
                    severity=ProviderErrorSeverity.NON_RETRYABLE,
                ),
            )
            for unit in body["units"]
        )
        accepted = [u for u in units if u.status == UnitIngestStatus.ACCEPTED]
        status = "ok" if len(accepted) == len(units) else ("partial" if accepted else "error")
        return MemoryIngestResult(status=status, units=units)
