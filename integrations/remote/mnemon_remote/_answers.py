"""Answers of out-of-process plugins, taken in safely.

Read up to a limit, parsed off the event loop when large, and scrubbed of the secrets the host
gave the plugin before anything else sees them.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import orjson

from mnemon.sdk import MnemonError

__all__ = [
    "OFF_LOOP_BYTES",
    "REDACTED",
    "AnswerTooLarge",
    "InvalidAnswer",
    "Redactor",
    "decode_answer",
    "read_bounded",
]

_T = TypeVar("_T")

#: answers at least this large are parsed and validated in a worker thread: every turn in
#: flight shares the event loop, and a 60 MB answer would hold it for seconds
OFF_LOOP_BYTES = 64 * 1024
#: what stands where a secret's value was
REDACTED = "[redacted]"
#: a value shorter than this would scrub ordinary words out of answers
_SHORTEST_SECRET = 4


class AnswerTooLarge(MnemonError):
    """The answer exceeded the limit while it was read; reading stopped there."""


class InvalidAnswer(MnemonError):
    """The answer is not strict JSON (NaN, Infinity, too deep), or does not fit its model."""


async def read_bounded(chunks: AsyncIterable[bytes], limit: int) -> bytes:
    """Read a streamed answer, stopping as soon as it passes `limit` bytes.

    Raises:
        AnswerTooLarge: past `limit` bytes.
    """
    raw = bytearray()
    async for chunk in chunks:
        raw += chunk
        if len(raw) > limit:
            raise AnswerTooLarge(f"the answer exceeds {limit} bytes")
    return bytes(raw)


class Redactor:
    """Replaces the values of the secrets a plugin was given wherever its answers repeat them.

    A plugin that echoes a secret (in a fact's hint, a fragment, an evidence item, an error)
    must not put it in front of the model, the Wake, logs or tool results: the host holds the
    values, so it scrubs them from the parsed answer before validating it.
    """

    def __init__(self, values: Iterable[str]) -> None:
        kept = {value for value in values if len(value) >= _SHORTEST_SECRET}
        # the longest first: a secret that contains another is replaced whole
        self._values = sorted(kept, key=len, reverse=True)
        self._encoded = [value.encode() for value in self._values]

    def __bool__(self) -> bool:
        return bool(self._values)

    def may_hold(self, raw: bytes) -> bool:
        """Whether the raw answer may hold a secret: literally, or behind a JSON escape."""
        # without a backslash, JSON text holds a string's characters as UTF-8 bytes exactly
        return b"\\" in raw or any(value in raw for value in self._encoded)

    def _text(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def redact(self, value: Any) -> Any:
        """`value` (parsed JSON) with every secret value in its strings and keys replaced."""
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, list):
            return [self.redact(item) for item in value]
        if isinstance(value, dict):
            return {self._text(key): self.redact(item) for key, item in value.items()}
        return value


def _decode(raw: bytes, build: Callable[[Any], _T], redactor: Redactor | None) -> _T:
    try:
        # strict JSON: NaN, Infinity and nesting past 1,024 levels are refused here
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidAnswer("the answer is not JSON") from None
    try:
        if redactor and redactor.may_hold(raw):
            value = redactor.redact(value)
        return build(value)
    except (ValueError, TypeError, RecursionError):
        # pydantic's ValidationError is a ValueError, and its text may quote the answer; an
        # answer nested near the parser's limit is deeper than any result may be
        raise InvalidAnswer("the answer does not fit the result's shape") from None


async def decode_answer(
    raw: bytes, build: Callable[[Any], _T], *, redactor: Redactor | None = None
) -> _T:
    """Parse `raw` as strict JSON, scrub secrets, and `build` the result from it.

    Large answers are decoded in a worker thread, so a plugin's big answer delays only the
    call waiting for it, never the other turns on the event loop.

    Raises:
        InvalidAnswer: the answer is not strict JSON, or `build` refused it.
    """
    if len(raw) < OFF_LOOP_BYTES:
        return _decode(raw, build, redactor)
    # abandoned on cancellation: the call's deadline holds even while the thread still parses
    return await anyio.to_thread.run_sync(_decode, raw, build, redactor, abandon_on_cancel=True)
