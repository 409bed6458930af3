"""Guarded calls to the Source's private Provider adapter.

Every call runs under `provider_timeout`; a Provider's failure becomes a `SourceError` with
its code and this Source's own words (a Provider's text never travels), and a result that
does not validate, or that answers from a namespace nobody asked for, is not believed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from mnemon.sdk import SourceError, guarded_call

from ._grants import PinnedSpace
from ._provider import (
    GetRequest,
    GetResult,
    Memory,
    ProviderStatus,
    RememberRequest,
    RememberResult,
    SpaceProvider,
    SpaceProviderDefinition,
    StatusRequest,
    get_many,
    remember_many,
)

__all__ = ["ProviderCalls", "check_parents"]

_log = logging.getLogger("mnemon_source_spaces")
_M = TypeVar("_M", bound=BaseModel)


class ProviderCalls:
    """One mounted Provider adapter, reachable only through guarded calls."""

    def __init__(
        self, definition: SpaceProviderDefinition, adapter: SpaceProvider, timeout: float
    ) -> None:
        self._definition = definition
        self._adapter = adapter
        self._timeout = timeout
        self._disposed = False

    def __repr__(self) -> str:
        return f"ProviderCalls({self._definition.type_id!r})"

    @property
    def type_id(self) -> str:
        """The Provider type id."""
        return self._definition.type_id

    def supports(self, capability: str) -> bool:
        """Whether the Provider's manifest declares `capability`."""
        return capability in self._definition.capabilities

    def require(self, capability: str) -> None:
        """Refuse (`unsupported`) unless the Provider declares `capability`.

        Raises:
            SourceError: `unsupported`.
        """
        if not self.supports(capability):
            raise SourceError("unsupported", f"the memory Provider does not offer {capability}")

    async def call(self, method: str, request: BaseModel, result: type[_M]) -> _M:
        """Call one adapter method under the timeout and validate its answer.

        Raises:
            SourceError: `timeout`, the Provider's own code, or `provider_error` for any
                other failure or a malformed answer.
        """
        if self._disposed:
            raise SourceError("unavailable", "the spaces Source is disposed", kind="transient")
        try:
            produced = await guarded_call(
                getattr(self._adapter, method),
                request,
                subject="the memory Provider",
                timeout=self._timeout,
            )
        except SourceError as exc:  # ProviderError included: keep the code, drop the text
            raise SourceError(
                exc.code, f"the memory Provider refused or failed ({exc.code})", kind=exc.kind
            ) from None
        if isinstance(produced, result):
            return produced
        try:
            return result.model_validate(produced)
        except ValidationError:
            raise SourceError(
                "provider_error", "the memory Provider returned malformed data"
            ) from None

    async def held_elsewhere(
        self, memory_ids: Iterable[str], space: PinnedSpace, pinned: Sequence[PinnedSpace]
    ) -> set[str]:
        """Which of `memory_ids` a space of `pinned` other than `space` holds.

        A Provider keeps idempotency keys per parent; a keyed memory's id is derived from the
        key, so the other spaces of a View are asked for those ids: every id in every other
        space in one `get_many` of the Provider SDK (a batch of its own, or one `get` each).
        Empty without `get`.

        Raises:
            SourceError: as `call`; an answer of the wrong count, shape or parent is not
                believed.
        """
        others = [other.parent for other in pinned if other.parent != space.parent]
        wanted = list(dict.fromkeys(memory_ids))
        if not others or not wanted or not self.supports("get"):
            return set()
        requests = [GetRequest(parent=parent, id=m_id) for parent in others for m_id in wanted]
        # one result per request: the Provider SDK's get_many refuses any other count
        produced = await self._guarded(get_many, self._adapter, requests)
        held: set[str] = set()
        for request, item in zip(requests, produced, strict=True):
            found = _checked(item, GetResult).memory
            if found is None:
                continue
            if (found.parent, found.id) != (request.parent, request.id):
                raise SourceError(
                    "provider_error", "the memory Provider answered from a namespace not asked for"
                )
            held.add(request.id)
        return held

    async def remember_many(self, requests: Sequence[RememberRequest]) -> list[RememberResult]:
        """Store a batch through the Provider SDK's `remember_many`, under the timeout.

        Raises:
            SourceError: as `call`; a result list of the wrong shape is not believed.
        """
        produced = await self._guarded(remember_many, self._adapter, list(requests))
        return [_checked(item, RememberResult) for item in produced]

    async def _guarded(self, batch: Callable[..., Awaitable[list[Any]]], *args: Any) -> list[Any]:
        """Run one of the Provider SDK's batch functions under the timeout.

        Raises:
            SourceError: as `call`.
        """
        if self._disposed:
            raise SourceError("unavailable", "the spaces Source is disposed", kind="transient")
        try:
            produced = await guarded_call(
                batch, *args, subject="the memory Provider", timeout=self._timeout
            )
        except SourceError as exc:  # ProviderError included: keep the code, drop the text
            raise SourceError(
                exc.code, f"the memory Provider refused or failed ({exc.code})", kind=exc.kind
            ) from None
        if not isinstance(produced, list):
            raise SourceError("provider_error", "the memory Provider returned malformed data")
        return produced

    async def status(self, pinned: Sequence[PinnedSpace], *, count: bool) -> ProviderStatus:
        """The Provider's health; a failing `status()` reads as coded unavailability."""
        request = StatusRequest(parents=tuple(space.parent for space in pinned), count=count)
        try:
            return await self.call("status", request, ProviderStatus)
        except SourceError as exc:
            reason = "provider-timeout" if exc.code == "timeout" else "provider-failed"
            return ProviderStatus(availability="unavailable", reason=reason)

    def live(self, status: ProviderStatus) -> set[str]:
        """The declared capabilities, narrowed by what `status` says is live now."""
        declared = set(self._definition.capabilities)
        if status.availability == "unavailable":
            return set()
        if status.capabilities is None:
            return declared
        return declared & set(status.capabilities)

    async def dispose(self) -> None:
        """Dispose the adapter once (its errors are logged at DEBUG only)."""
        if self._disposed:
            return
        self._disposed = True
        dispose = getattr(self._adapter, "dispose", None)
        if callable(dispose):
            try:
                with anyio.CancelScope(shield=True):
                    await dispose()
            except Exception:
                _log.debug("the memory Provider's dispose() failed", exc_info=True)


def _checked(item: Any, model: type[_M]) -> _M:
    """`item` as `model`; an answer that does not validate is not believed.

    Raises:
        SourceError: `provider_error`.
    """
    if isinstance(item, model):
        return item
    try:
        return model.model_validate(item)
    except ValidationError:
        raise SourceError("provider_error", "the memory Provider returned malformed data") from None


def check_parents(memories: Iterable[Memory], parents: Sequence[str]) -> None:
    """Refuse an answer holding a memory of a parent that was not asked for.

    Raises:
        SourceError: `provider_error` (fail closed: such a Provider is not believed).
    """
    allowed = set(parents)
    for memory in memories:
        if memory.parent not in allowed:
            raise SourceError(
                "provider_error", "the memory Provider answered from a namespace not asked for"
            )
