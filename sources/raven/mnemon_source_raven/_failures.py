"""Raven's side of the failure table: a backend's exception as a `SourceError`, and back.

A Raven backend has no error codes: anything it raises is `provider_error` of the `transient`
class, and since the call may or may not have reached the store, a write's receipt says
`unknown`. The exception's class name is kept as `origin_code` (never its text). A backend
that raises `mnemon.SourceError` itself (the `everos` backend does) keeps its own code, class,
retry-after and origin code.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mnemon.sdk import SourceError

__all__ = ["backend_call", "raven_exception_name", "source_error"]

_T = TypeVar("_T")
_ORIGIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_log = logging.getLogger("mnemon.sources.raven")


def source_error(failure: BaseException, subject: str) -> SourceError:
    """The `SourceError` for what a backend raised; its message is `subject`'s, never the text."""
    if isinstance(failure, SourceError):
        return failure
    name = type(failure).__name__
    return SourceError(
        "provider_error",
        f"{subject} failed",
        kind="transient",
        nothing_written=False,
        origin_code=name if _ORIGIN.fullmatch(name) else None,
    )


def raven_exception_name(error: SourceError) -> str | None:
    """The class name of the exception a backend raised, when `error` stands for one."""
    if error.code == "provider_error" and error.kind == "transient":
        return error.origin_code
    return None


async def backend_call(
    function: Callable[..., Awaitable[_T]], *args: Any, subject: str, **kwargs: Any
) -> _T:
    """Await a backend method; whatever it raises (but cancellation) fails by the table.

    Raises:
        SourceError: as `source_error` maps it; the exception itself is logged at DEBUG.
    """
    try:
        return await function(*args, **kwargs)
    except SourceError:
        raise
    except Exception as exc:
        _log.debug("%s failed", subject, exc_info=True)
        raise source_error(exc, subject) from None
