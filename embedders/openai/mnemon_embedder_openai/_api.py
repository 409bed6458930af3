"""The `/v1/embeddings` exchange: one request for a batch of inputs, its answer judged.

What an OpenAI-compatible server says is trusted for nothing but its vectors. An answer is
read no further than `max_response_bytes`, parsed as strict JSON, and its vectors taken by
`index`, each checked for count, dimensions and finiteness. A refusal becomes a `SourceError`
by its HTTP status alone: the server's own message is never read into an error or a log, since
it may repeat the input, the key's prefix, or anything else.
"""

from __future__ import annotations

import math
import re
import struct
import time
from collections.abc import AsyncIterable, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import orjson

from mnemon.sdk import SourceError, run_blocking

__all__ = ["Malformed", "TooLarge", "encode_request", "error_for_status", "parse_answer"]

_FLOAT32_MAX: float = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
#: answers at least this large are parsed in a worker thread: every turn shares the event loop
OFF_LOOP_BYTES = 64 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
_SECONDS = re.compile(r"[0-9]+")


class Malformed(Exception):
    """The answer is not the embeddings the request asked for (never carries its text)."""


class TooLarge(Exception):
    """The answer passed `max_response_bytes`; reading stopped there."""


def encode_request(model: str, texts: Sequence[str], dimensions: int | None) -> bytes:
    """The JSON body asking for the vectors of `texts`, as floats."""
    body: dict[str, Any] = {"model": model, "input": list(texts), "encoding_format": "float"}
    if dimensions is not None:
        body["dimensions"] = dimensions
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError:
        # a lone surrogate cannot be UTF-8: sent as U+FFFD, one code point for one, so the
        # segment's offsets still hold
        body["input"] = [_SURROGATE.sub("\ufffd", text) for text in texts]
        return orjson.dumps(body)


def _retry_after(headers: httpx.Headers) -> float | None:
    """The wait the server asked for: `retry-after-ms` (OpenAI's), else `Retry-After`."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    given = headers.get("retry-after")
    if given is None:
        return None
    given = given.strip()
    if _SECONDS.fullmatch(given):
        seconds = float(given)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(given)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        return None
    return max(0.0, when.timestamp() - time.time())


def error_for_status(status: int, headers: httpx.Headers) -> SourceError:
    """The error a refusal maps to, by its status alone (`origin_code` is `http-<status>`)."""
    origin = f"http-{status}"
    if status == 429:
        return SourceError(
            "rate_limited",
            "the embeddings API asked to slow down (429)",
            retry_after=_retry_after(headers),
            origin_code=origin,
        )
    if status == 401:
        return SourceError(
            "unauthorized",
            "the embeddings API refused the key (401): check the variable api_key_env names",
            origin_code=origin,
        )
    if status == 403:
        return SourceError(
            "forbidden", "the embeddings API forbids this key the model (403)", origin_code=origin
        )
    if status == 408:
        return SourceError(
            "timeout", "the embeddings API timed the request out (408)", origin_code=origin
        )
    if status >= 500:
        return SourceError(
            "provider_error",
            f"the embeddings API failed ({status})",
            retry_after=_retry_after(headers),
            origin_code=origin,
        )
    if 400 <= status < 500:
        # 400, 404 (no such model), 422, 413: the same request would be refused again
        return SourceError(
            "invalid_payload",
            f"the embeddings API refused the request ({status}): check model, dimensions and "
            "send_dimensions",
            origin_code=origin,
        )
    # a redirect (never followed: it would carry the key elsewhere) or another odd status
    return SourceError(
        "invalid_response",
        f"the embeddings API answered with status {status}: check base_url",
        kind="terminal",
        origin_code=origin,
    )


async def read_bounded(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """Read a streamed answer, stopping as soon as it passes `limit` bytes.

    Raises:
        TooLarge: past `limit` bytes.
    """
    raw = bytearray()
    async for chunk in chunks:
        raw += chunk
        if len(raw) > limit:
            raise TooLarge
    return bytes(raw)


def _vector(value: object, dimensions: int) -> tuple[float, ...]:
    if not isinstance(value, list) or len(value) != dimensions:
        raise Malformed
    # bool is an int to Python, never a coordinate; the core's vectors are strict floats
    if not all(type(x) is float or type(x) is int for x in value):
        raise Malformed
    try:
        vector = tuple(map(float, value))
    except OverflowError:  # an integer past any float
        raise Malformed from None
    if not all(-_FLOAT32_MAX <= x <= _FLOAT32_MAX for x in vector):  # NaN fails too
        raise Malformed
    return vector


def _parse(raw: bytes, count: int, dimensions: int) -> list[tuple[float, ...]]:
    try:
        # strict JSON: NaN, Infinity and nesting past 1,024 levels are refused here
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Malformed from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise Malformed
    vectors: list[tuple[float, ...] | None] = [None] * count
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if type(index) is not int or not 0 <= index < count or vectors[index] is not None:
            raise Malformed
        vectors[index] = _vector(item.get("embedding"), dimensions)
    # every index once: count items, none out of range, none twice
    return [vector for vector in vectors if vector is not None]


async def parse_answer(raw: bytes, count: int, dimensions: int) -> list[tuple[float, ...]]:
    """The vectors of an answer to `count` inputs, in the order of the inputs (by `index`).

    Raises:
        Malformed: not strict JSON, or not `count` vectors of `dimensions` finite 32-bit
            floats, each index once.
    """
    if len(raw) < OFF_LOOP_BYTES:
        return _parse(raw, count, dimensions)
    return await run_blocking(_parse, raw, count, dimensions)
