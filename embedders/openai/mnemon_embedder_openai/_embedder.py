"""The runtime an entry gets: segments locally, embeds over HTTP, in batches, under deadlines.

Nothing happens in the factory but reading the key from its variable. The first call opens a
pooled HTTP client; `dispose()` closes it. Every failure is a `SourceError` with a stable code
and retry class; none carries the key, the server's words, or the text being embedded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TypeVar

import anyio
import httpx

from mnemon.sdk import (
    EmbedQueryRequest,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    SourceError,
    TextPart,
    run_blocking,
)

from ._api import Malformed, TooLarge, encode_request, error_for_status, parse_answer, read_bounded
from ._segments import cut_segments
from ._settings import OpenAISettings

__all__ = ["MAX_SEGMENTS", "OpenAIEmbedder"]

_log = logging.getLogger("mnemon.embedder.openai")
_T = TypeVar("_T")
#: the most segments one text yields (the core's ceiling): 8 million characters at the
#: default `max_input_characters`
MAX_SEGMENTS = 1_024
#: texts at least this long are cut in a worker thread (8 million characters take 0.3 s)
OFF_LOOP_CHARACTERS = 256 * 1024


def _user_agent() -> str:
    try:
        return f"mnemon-embedder-openai/{version('mnemon-embedder-openai')}"
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "mnemon-embedder-openai"


def _cut_parts(parts: Sequence[TextPart], limit: int) -> list[tuple[str, str, int, int]]:
    """Each segment of each part: `(part key, part text, start, end)`."""
    return [
        (part.key, part.text, start, end)
        for part in parts
        for start, end in cut_segments(part.text, limit)
    ]


class OpenAIEmbedder:
    """One space filled by an OpenAI-compatible `/v1/embeddings` API.

    Args:
        settings: the entry's checked configuration.
        api_key: the key sent as `Authorization: Bearer`, or None to send none.
    """

    def __init__(self, settings: OpenAISettings, api_key: str | None) -> None:
        self._settings = settings
        self._dimensions = settings.space.dimensions if settings.send_dimensions else None
        # the key lives here and in the request headers only: never in an error, a log or
        # the repr
        self._headers = {
            "Accept": "application/json",
            # the limit counts bytes as they arrive: no compression, so no decompression bomb
            "Accept-Encoding": "identity",
            "Content-Type": "application/json",
            "User-Agent": _user_agent(),
            **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
        }
        self._http: httpx.AsyncClient | None = None
        self._disposed = False

    def __repr__(self) -> str:
        key = "set" if "Authorization" in self._headers else "none"
        return (
            f"OpenAIEmbedder(space={self._settings.space.key!r}, "
            f"base_url={self._settings.base_url!r}, key={key})"
        )

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        """Cut each part into segments of at most `max_input_characters` and embed each one.

        A part that fits is one segment; a longer one is cut at whitespace into consecutive
        segments that cover it; an empty part has none. Segments go to the API `batch` at a
        time; a request without spaces gets the segments alone, without a request.

        Raises:
            SourceError: `unknown_space` or `text_too_long` (over 1,024 segments), both
                terminal; `timeout`; an API failure (see the package's README).
        """
        self._check_spaces(request.spaces)
        limit = self._settings.max_input_characters
        length = sum(len(part.text) for part in request.parts)
        # every segment holds at most `limit`: a text this long needs too many, uncut
        if length > MAX_SEGMENTS * limit:
            raise self._too_long(limit)
        if length < OFF_LOOP_CHARACTERS:
            cuts = _cut_parts(request.parts, limit)
        else:
            cuts = await run_blocking(_cut_parts, request.parts, limit)
        if len(cuts) > MAX_SEGMENTS:
            raise self._too_long(limit)
        vectors: list[tuple[float, ...]] = [()] * len(cuts)
        if request.spaces:
            texts = [text[start:end] for _, text, start, end in cuts]
            vectors = await self._within(self._settings.timeout_ms, self._embed_all, texts)
        return SegmentAnswer(
            segments=tuple(
                Segment(
                    part_key=key,
                    start=start,
                    end=end,
                    vectors=dict.fromkeys(request.spaces, vector),
                )
                for (key, _, start, end), vector in zip(cuts, vectors, strict=True)
            )
        )

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        """The query's vector: one input (a query past `max_input_characters`, its first segment).

        Raises:
            SourceError: `unknown_space`; `timeout`; an API failure (see the package's README).
        """
        self._check_spaces((request.space,))
        limit = self._settings.max_input_characters
        # the first segment is found within the first limit + 1 code points: no more is cut
        [(_, end), *_] = cut_segments(request.text[: limit + 1], limit)
        [vector] = await self._within(
            self._settings.query_timeout_ms, self._embed, [request.text[:end]]
        )
        return QueryVector(vector=vector)

    async def dispose(self) -> None:
        """Close the pooled connections; later calls are refused (`embedder_disposed`)."""
        self._disposed = True
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def _within(
        self,
        milliseconds: int,
        call: Callable[[list[str]], Awaitable[_T]],
        texts: list[str],
    ) -> _T:
        # the host keeps the same deadline; this one holds when the runtime is called directly
        try:
            with anyio.fail_after(milliseconds / 1000):
                return await call(texts)
        except TimeoutError:
            raise SourceError(
                "timeout", f"the embeddings API did not answer within {milliseconds} ms"
            ) from None

    async def _embed_all(self, texts: list[str]) -> list[tuple[float, ...]]:
        # one batch after another: a document waits, other calls share the pool meanwhile,
        # and a rate limit meets one request, not a burst of them
        batch = self._settings.batch
        vectors: list[tuple[float, ...]] = []
        for first in range(0, len(texts), batch):
            vectors += await self._embed(texts[first : first + batch])
        return vectors

    def _client(self) -> httpx.AsyncClient:
        if self._disposed:
            raise SourceError("embedder_disposed", "this openai-embeddings embedder was disposed")
        if self._http is None:
            self._http = httpx.AsyncClient(
                # the deadline is ours (anyio's scope): the client gets no timeout of its own
                timeout=None,
                # a redirect would carry the key to wherever it points
                follow_redirects=False,
                # an idle connection is closed before the 5 s after which common servers
                # (uvicorn under vLLM, Node.js) close it, so a call never races that close
                limits=httpx.Limits(
                    max_connections=16, max_keepalive_connections=8, keepalive_expiry=4
                ),
            )
        return self._http

    async def _embed(self, texts: list[str]) -> list[tuple[float, ...]]:
        """The vectors of one batch, in the order of `texts`."""
        settings = self._settings
        body = encode_request(settings.model, texts, self._dimensions)
        client = self._client()
        try:
            async with client.stream(
                "POST", settings.embeddings_url, content=body, headers=self._headers
            ) as response:
                if not 200 <= response.status_code < 300:
                    # the body is not read: the server's words never reach an error
                    raise error_for_status(response.status_code, response.headers)
                declared = response.headers.get("content-length", "")
                if declared.isdecimal() and int(declared) > settings.max_response_bytes:
                    raise TooLarge
                raw = await read_bounded(response.aiter_bytes(), settings.max_response_bytes)
        except TooLarge:
            raise SourceError(
                "response_too_large",
                f"the answer exceeded max_response_bytes ({settings.max_response_bytes})",
                kind="terminal",
            ) from None
        except httpx.DecodingError:
            raise SourceError(
                "invalid_response", "the answer could not be decoded", kind="terminal"
            ) from None
        except (httpx.HTTPError, OSError):
            # the exception's text names the URL and the cause, never the key: DEBUG only
            _log.debug("openai-embeddings: the request to the API failed", exc_info=True)
            raise SourceError(
                "unavailable", "the embeddings API could not be reached", kind="transient"
            ) from None
        try:
            return await parse_answer(raw, len(texts), settings.space.dimensions)
        except Malformed:
            raise SourceError(
                "invalid_response",
                f"the answer is not {len(texts)} vectors of {settings.space.dimensions} "
                "finite numbers, one for each index",
                kind="terminal",
            ) from None

    @staticmethod
    def _too_long(limit: int) -> SourceError:
        return SourceError(
            "text_too_long",
            f"the text needs more than {MAX_SEGMENTS} segments of at most {limit} characters, "
            "the most this embedder embeds: split it",
        )

    def _check_spaces(self, spaces: tuple[str, ...]) -> None:
        owned = self._settings.space.id
        for space in spaces:
            if space != owned:
                raise SourceError("unknown_space", f"this embedder owns only the space {owned}")
