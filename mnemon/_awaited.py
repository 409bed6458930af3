"""Plugins and hosts may answer with a value or with an awaitable of it; the core takes either."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar, cast

__all__ = ["awaited"]

_T = TypeVar("_T")


async def awaited(value: _T | Awaitable[_T]) -> _T:
    """`value` itself, or what it gives when awaited if it is awaitable.

    A plain value costs no checkpoint, as if the caller had not awaited at all.
    """
    if inspect.isawaitable(value):
        return cast(_T, await value)
    return value
