"""One backend per identity: made and started on first use, kept in a bounded LRU.

Raven gives a backend its identity when it is made (`ctx.config["user_id"]`), so a backend
serving two people would write both people's messages under one id. The Source therefore
keeps one backend per scope partition (tenant, user, agent). The least recently used idle one
beyond the maximum is stopped; one with a call in flight is never stopped under it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from mnemon.sdk import ScopePartition, SourceError

from ._contract import MemoryBackend
from ._failures import backend_call

__all__ = ["BackendInstance", "IdentityBackends"]

_log = logging.getLogger("mnemon.sources.raven")

#: makes one identity's backend: the backend, or None and the reason it serves nothing
BuildBackend = Callable[[ScopePartition], Awaitable[tuple[MemoryBackend | None, str | None]]]


@dataclass(eq=False)
class BackendInstance:
    """One identity's backend and how far it got; `reason` says why it serves nothing."""

    key: str
    backend: MemoryBackend | None = None
    reason: str | None = None
    made: bool = False
    started: bool = False
    start_tried: bool = False
    calls: int = 0
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    stopped: anyio.Event | None = None

    @property
    def ready(self) -> bool:
        """Made and started: calls may reach it."""
        return self.started and self.reason is None


class IdentityBackends:
    """The backends of one Source, one per identity, at most `maximum` idle ones kept."""

    def __init__(self, build: BuildBackend, maximum: int, source_key: str) -> None:
        self._build = build
        self._maximum = maximum
        self._key = source_key
        self._instances: OrderedDict[str, BackendInstance] = OrderedDict()
        # identities whose evicted backend is still stopping: a new one waits for it
        self._stopping: dict[str, anyio.Event] = {}
        self._lock = anyio.Lock()
        self._closed = False

    def __len__(self) -> int:
        return len(self._instances)

    @asynccontextmanager
    async def use(self, partition: ScopePartition) -> AsyncIterator[BackendInstance]:
        """The identity's backend, made and started if it was not, held for one call.

        Raises:
            SourceError: the Source was disposed.
        """
        async with self._lock:
            if self._closed:
                raise SourceError("provider_error", "the Raven Source is closed")
            instance = self._instances.get(partition.key)
            if instance is None:
                instance = BackendInstance(partition.key)
                self._instances[partition.key] = instance
            self._instances.move_to_end(partition.key)
            instance.calls += 1
            evicted = self._evictable()
        try:
            await self._stop_each(evicted)
            await self._prepare(instance, partition)
            yield instance
        finally:
            instance.calls -= 1
            with anyio.CancelScope(shield=True):  # a cancelled call still lets go of its hold
                async with self._lock:
                    evicted = self._evictable()
                await self._stop_each(evicted)

    def _evictable(self) -> list[BackendInstance]:
        """Remove the least recently used idle instances beyond the maximum (lock held)."""
        removed = []
        for key in list(self._instances)[:-1]:  # never the one just used
            if len(self._instances) <= self._maximum:
                break
            instance = self._instances[key]
            if instance.calls == 0:
                del self._instances[key]
                instance.stopped = anyio.Event()
                self._stopping[key] = instance.stopped
                removed.append(instance)
        return removed

    async def _stop_each(self, instances: list[BackendInstance]) -> None:
        for instance in instances:
            try:
                await self._stop(instance)
            finally:
                if instance.stopped is not None:
                    instance.stopped.set()
                    if self._stopping.get(instance.key) is instance.stopped:
                        del self._stopping[instance.key]

    async def _prepare(self, instance: BackendInstance, partition: ScopePartition) -> None:
        async with instance.lock:
            if not instance.made:
                previous = self._stopping.get(instance.key)
                if previous is not None:
                    await previous.wait()  # never two backends on one workspace at once
                instance.backend, instance.reason = await self._build(partition)
                instance.made = True
            if instance.backend is None or instance.reason is not None or instance.start_tried:
                return
            instance.start_tried = True
            try:
                await backend_call(instance.backend.start, subject="the Raven backend start")
            except SourceError:
                instance.reason = "backend-start-failed"
                _log.warning("Memory Source %s: a Raven backend failed to start", self._key)
            except BaseException:
                instance.start_tried = False  # cancelled: the next call starts it again
                raise
            else:
                instance.started = True

    async def _stop(self, instance: BackendInstance) -> None:
        """Stop a backend whose start was tried (stop is safe after a failed start)."""
        if instance.backend is None or not instance.start_tried:
            return
        instance.start_tried = instance.started = False
        with anyio.CancelScope(shield=True):
            try:
                await backend_call(instance.backend.stop, subject="the Raven backend stop")
            except SourceError:
                _log.warning("Memory Source %s: a Raven backend failed to stop", self._key)

    async def close(self) -> None:
        """Stop every backend, most recently used last; no call may start afterwards."""
        async with self._lock:
            self._closed = True
            instances = list(self._instances.values())
            self._instances.clear()
        await self._stop_each(instances)
        for event in list(self._stopping.values()):
            await event.wait()
