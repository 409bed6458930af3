"""An httpx transport that keeps every answer's bytes, for the `credentials` check."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

__all__ = ["RecordingTransport"]


class _Tap(httpx.AsyncByteStream):
    """An answer's bytes, kept as the caller reads them (the credentials check reads them)."""

    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink += chunk
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """The network, with every answer's bytes kept as they are read."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.answers: list[bytearray] = []
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        sink = bytearray()
        self.answers.append(sink)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tap(response.stream, sink),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        # two clients share this transport; the second close is a no-op
        if not self._closed:
            self._closed = True
            await self._inner.aclose()
