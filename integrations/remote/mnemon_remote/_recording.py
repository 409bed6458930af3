"""What a contract runner keeps of its HTTP exchanges with a plugin, for its later checks.

Replay resends recorded requests, and the credentials check looks for secret values in every
answer. The answer is kept as the caller reads it, so a caller that stops reading at its limit
(`read_bounded`) keeps no more than that in memory either.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx

__all__ = ["Exchange", "RecordingTransport"]


@dataclass
class Exchange:
    """One recorded HTTP exchange with the plugin (`base`: the plugin process it reached)."""

    path: str
    request: bytes
    status: int
    answer: bytes
    duration_ms: int
    base: str = ""


class _Recorded(httpx.AsyncByteStream):
    """An answer's stream, kept as it is read and recorded once when it is closed."""

    def __init__(self, inner: httpx.AsyncByteStream, record: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._record = record
        self._answer = bytearray()
        self._recorded = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._answer += chunk
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if not self._recorded:
                self._recorded = True
                self._record(bytes(self._answer))


class RecordingTransport(httpx.AsyncBaseTransport):
    """Forwards to the network and keeps every exchange, for replay and credential checks.

    Several clients may share it; each closing it closes the pooled connections, which the
    next request opens again.
    """

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        started = time.monotonic()
        response = await self._inner.handle_async_request(request)
        base = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"

        def record(answer: bytes) -> None:
            elapsed = int((time.monotonic() - started) * 1000)
            self.exchanges.append(
                Exchange(request.url.path, body, response.status_code, answer, elapsed, base)
            )

        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Recorded(response.stream, record),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
