"""Small helpers for plugin authors: receipts, safe truncation, blocking calls."""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, overload

import anyio

from ._blocking import run_in_thread
from ._errors import DefinitionError, RevisionConflict, SourceError
from ._models import (
    Completion,
    MutationReceipt,
    MutationRequest,
    ReceiptStatus,
    SourceInit,
    validate_model,
)

__all__ = [
    "allocate_characters",
    "create_mutation_receipt",
    "guarded_call",
    "mnemon_home",
    "run_blocking",
    "source_data_directory",
    "truncate_text",
]

_T = TypeVar("_T")
# a failing Source call's own exception, for its author, at DEBUG only
_sources_log = logging.getLogger("mnemon.sources")

_DEFAULT_STATUS: dict[str, ReceiptStatus] = {
    "accepted": "succeeded",
    "candidate": "succeeded",
    "committed": "succeeded",
    "partial": "partial",
    "failed": "failed",
    # the call did not prove anything either way
    "unknown": "failed",
}


def create_mutation_receipt(
    request: MutationRequest,
    *,
    completion: Completion = "unknown",
    status: ReceiptStatus | None = None,
    committed_at: str | None = None,
    revision: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> MutationReceipt:
    """Create a receipt bound to the View, offer and idempotency key of `request`.

    `completion` defaults to `unknown`: a Source states how far a write got, never more.
    `status` defaults to what `completion` implies (`unknown` implies `failed`).

    Raises:
        DefinitionError: the receipt breaks a receipt rule (for example `committed` without
            `committed_at`).
    """
    return validate_model(
        MutationReceipt,
        {
            "view_id": request.view.id,
            "offer_id": request.offer.id,
            "source_key": request.offer.source_key,
            "completion": completion,
            "status": status or _DEFAULT_STATUS.get(completion, completion),
            "committed_at": committed_at,
            "revision": revision,
            "idempotency_key": request.idempotency_key,
            "detail": detail if detail is not None else {},
        },
        subject="receipt",
        error=DefinitionError,
    )


_ZWJ = "\u200d"


def _extends(char: str) -> bool:
    """Whether `char` continues the grapheme before it (marks, joiners, selectors, tones)."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char == _ZWJ
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences
    )


def _hangul(char: str) -> str:
    """The Hangul syllable type of `char`: L, V, T, LV, LVT, or "" (UAX #29)."""
    code = ord(char)
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return ""


_HANGUL_JOINS = {
    ("L", "L"), ("L", "V"), ("L", "LV"), ("L", "LVT"),
    ("LV", "V"), ("LV", "T"), ("V", "V"), ("V", "T"),
    ("LVT", "T"), ("T", "T"),
}  # fmt: skip


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _splits_grapheme(text: str, cut: int) -> bool:
    before, after = text[cut - 1], text[cut]
    if before == "\r" and after == "\n":
        return True
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True
    if _extends(after) or before == _ZWJ:
        return True
    if (_hangul(before), _hangul(after)) in _HANGUL_JOINS:
        return True
    if _regional(before) and _regional(after):
        run = 0
        while cut - 1 - run >= 0 and _regional(text[cut - 1 - run]):
            run += 1
        return run % 2 == 1
    return False


def truncate_text(text: str, limit: int) -> str:
    """Return at most `limit` characters of `text`, cut at a grapheme boundary when possible.

    Never splits a surrogate pair; backs off before combining marks, joiners, variation
    selectors, skin tones, flag pairs and conjoining Hangul jamo. A single grapheme longer
    than `limit` is cut.

    Raises:
        ValueError: `limit` is negative.
    """
    if limit < 0:
        raise ValueError("truncate_text limit must not be negative")
    if len(text) <= limit:
        return text
    cut = limit
    while cut > 0 and _splits_grapheme(text, cut):
        cut -= 1
    if cut == 0 and limit > 0:
        cut = limit
        if "\ud800" <= text[cut - 1] <= "\udbff":
            cut -= 1
    return text[:cut]


async def run_blocking(func: Callable[..., _T], *args: Any) -> _T:
    """Run a blocking call in a worker thread so deadlines and cancellation stay effective.

    On timeout or cancellation the awaiting task stops at once; the thread itself cannot be
    interrupted, so it finishes in the background and its result is discarded (a call whose
    caller stopped waiting before a thread took it is not run at all). On asyncio the calls
    of all turns share one queue and a few threads (at most anyio's default thread limit),
    which cost the event loop less than a trip through anyio's pool each; `func` runs in a
    copy of the caller's context, and must not call back into the event loop
    (`anyio.from_thread`).
    """
    return await run_in_thread(partial(func, *args))


@overload
async def guarded_call(
    function: Callable[..., Coroutine[Any, Any, _T]],
    *args: Any,
    subject: str,
    timeout: float | None = None,  # noqa: ASYNC109
    abandon: threading.Event | None = None,
) -> _T: ...


@overload
async def guarded_call(
    function: Callable[..., _T],
    *args: Any,
    subject: str,
    timeout: float | None = None,  # noqa: ASYNC109
    abandon: threading.Event | None = None,
) -> _T: ...


async def guarded_call(
    function: Callable[..., Any],
    *args: Any,
    subject: str,
    timeout: float | None = None,  # noqa: ASYNC109 - the Source's own limit, mapped to its code
    abandon: threading.Event | None = None,
) -> Any:
    """Run a Source's blocking call in a worker thread, within `timeout`, failing by the taxonomy.

    A coroutine function (a client's `async def` method) is awaited instead, with the same
    limit and mapping. A `SourceError` the call raises passes through as it is, and so does a
    `RevisionConflict` (a fenced management write re-checked under the Source's own lock).
    Otherwise a timeout becomes `timeout`, `PermissionError` becomes `forbidden`, any other
    `OSError` becomes `provider_error` (both retryable ones say nothing about a write, so a
    receipt says `unknown`), and anything else becomes `provider_error` too; the message is
    `subject`'s, never the exception's text, which is logged with its traceback at DEBUG on
    `mnemon.sources` for the Source's author. When the caller stops waiting (timeout or
    cancellation) `abandon` is set, so a call that checks it can stop before it writes.

    Args:
        function: the blocking callable, or a coroutine function.
        *args: its positional arguments.
        subject: what the call does, for messages ("the runtime store write").
        timeout: seconds before the caller stops waiting (None: the caller's own deadline).
        abandon: an event set when the caller stops waiting.

    Raises:
        SourceError: as above.
    """
    finished = False
    try:
        # a bare cancel scope: anyio's fail_after is two generator context managers around one
        with anyio.move_on_after(timeout) if timeout is not None else nullcontext() as scope:
            if inspect.iscoroutinefunction(function):
                result = await function(*args)
            else:
                result = await run_in_thread(partial(function, *args))
        if scope is not None and scope.cancelled_caught:
            raise TimeoutError
        finished = True
        return result
    except (SourceError, RevisionConflict):
        finished = True
        raise
    except TimeoutError:
        raise SourceError("timeout", f"{subject} did not finish in time") from None
    except PermissionError:
        _sources_log.debug("%s was refused", subject, exc_info=True)
        raise SourceError("forbidden", f"{subject} was refused by the operating system") from None
    except Exception:
        _sources_log.debug("%s failed", subject, exc_info=True)
        raise SourceError("provider_error", f"{subject} failed") from None
    finally:
        if not finished and abandon is not None:
            abandon.set()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,160}")
_PREFIX = 80  # with "~" and 64 hex digits, a name stays well under 255 bytes


def mnemon_home() -> Path:
    """Mnemon's home folder: `$MNEMON_HOME`, else `~/.mnemon`.

    Raises:
        DefinitionError: `$MNEMON_HOME` is set to a relative path.
    """
    configured = os.environ.get("MNEMON_HOME")
    if configured:
        home = Path(configured).expanduser()
        if not home.is_absolute():
            raise DefinitionError("MNEMON_HOME must be an absolute path")
        return home
    return Path.home() / ".mnemon"


def source_data_directory(init: SourceInit, data_dir: object = None) -> Path:
    """The folder where one Source instance keeps its data (not created here).

    It is `<base>/sources/<type id>/<instance>`, where the base is `data_dir` (from the
    Source's configuration), else the host's `init.data_dir`, else `mnemon_home()`; two
    instances sharing one base never share files. `data_dir` must be an absolute path.

    Raises:
        DefinitionError: `data_dir` is not an absolute path string.
    """
    if data_dir is None:
        base = Path(init.data_dir) if init.data_dir is not None else mnemon_home()
    elif not isinstance(data_dir, str | os.PathLike) or not str(data_dir):
        raise DefinitionError("configuration.data_dir: must be an absolute path")
    else:
        base = Path(data_dir).expanduser()
        if not base.is_absolute():
            # never the value: a path may carry a token
            raise DefinitionError("configuration.data_dir: must be an absolute path")
    return base / "sources" / init.provenance.type_id / instance_folder_name(init.instance_key)


def instance_folder_name(instance_key: str) -> str:
    """A folder name for one instance key, injective: two keys never share a folder.

    A key made only of letters, digits, `.`, `_` and `-` (short enough) is its own name. Any
    other key becomes a readable prefix, `~` and the SHA-256 of the whole key: no instance
    key contains `~`, so such a name can never equal a kept one, and two hashed names differ
    unless SHA-256 collides.
    """
    instance = instance_key.removeprefix("source:")
    if _SAFE_NAME.fullmatch(instance) and instance not in (".", ".."):
        return instance
    prefix = _UNSAFE.sub("_", instance)[:_PREFIX]
    return f"{prefix}~{hashlib.sha256(instance.encode()).hexdigest()}"


def allocate_characters(total: int, weights: Sequence[int]) -> tuple[int, ...]:
    """Split `total` characters by `weights` so the shares sum to exactly `total`.

    Shares are proportional to the weights, rounded down, and the characters left over go
    one each to the largest remainders (earlier positions first on ties): deterministic,
    independent of anything but its arguments. With no weights there is nothing to share.

    Raises:
        ValueError: `total` is negative, a weight is negative, or all weights are zero.
    """
    if total < 0:
        raise ValueError("allocate_characters: total must not be negative")
    if not weights:
        return ()
    if any(weight < 0 for weight in weights):
        raise ValueError("allocate_characters: weights must not be negative")
    whole = sum(weights)
    if whole == 0:
        raise ValueError("allocate_characters: at least one weight must be positive")
    shares = [total * weight // whole for weight in weights]
    remainders = [total * weight % whole for weight in weights]
    left = total - sum(shares)
    for index in sorted(range(len(weights)), key=lambda i: (-remainders[i], i))[:left]:
        shares[index] += 1
    return tuple(shares)
