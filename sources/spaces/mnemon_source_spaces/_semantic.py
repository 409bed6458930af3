"""Recall by meaning: vectors kept beside memories, query vectors, and fusion with keywords.

With an embedder installed beside the Source and a Provider that keeps vectors, a memory is
durable and found by keyword as soon as it is written, and its vectors follow: right after
the write when the embedder answers within a short budget, else on a later write or recall,
which catch up on memories still without vectors (so an embedder outage, or a restart, loses
nothing). A recall then fuses the keyword ranking with the vector ranking, and each result
says which of them found it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import anyio
import orjson

from mnemon.sdk import Embedding, EmbeddingError, SourceError, VectorSpace

from ._calls import ProviderCalls, check_parents
from ._evidence import tier
from ._provider import (
    Memory,
    MemoryVectors,
    MissingVectorsRequest,
    MissingVectorsResult,
    RegisterSpaceRequest,
    RegisterSpaceResult,
    SearchHit,
    SearchResult,
    SegmentVector,
    StoreVectorsRequest,
    StoreVectorsResult,
    VectorSearchRequest,
)

__all__ = ["MEANING_OFF", "FusedHit", "Semantic", "bulk_seconds", "choose_space", "fuse"]

_log = logging.getLogger("mnemon.spaces")

#: how long a write waits for its vectors before leaving them to a later catch-up
INLINE_SECONDS = 2.0
#: how long a recall spends catching up on memories without vectors before it searches
CATCH_UP_SECONDS = 1.0
#: memories embedded per catch-up step (and at most per embedder call)
CATCH_UP_BATCH = 64
#: how long a parent found with nothing waiting for vectors is not looked at again
RECHECK_SECONDS = 30.0
#: what a bulk step (an import's vectors, a reindex call) leaves of its caller's deadline,
#: so the result still goes out in time
DEADLINE_MARGIN = 1.0
#: the longest one bulk step embeds when its caller set no deadline
STEP_SECONDS = 30.0
#: how much of a fused score is meaning (the rest is keywords): equal, see `fuse`
MEANING_WEIGHT = 0.5
#: why a recall by meaning alone is refused when there is no meaning to search
MEANING_OFF = (
    "recall by meaning is off: no embedder is mounted beside this Source, its vectors setting "
    "is off, or its store cannot keep vectors"
)
#: cosine similarity (for the relevance tier of a hit found by meaning only)
STRONG_COSINE = 0.55
RELATED_COSINE = 0.35


def choose_space(embedding: Embedding | None, wanted: str | None) -> VectorSpace | None:
    """The space recall by meaning uses: `wanted` (`off` for none), else the only installed one.

    Raises:
        SourceError: `wanted` names a space no installed embedder owns (`invalid_payload`).
    """
    if wanted == "off" or embedding is None:
        return None
    if wanted is not None and wanted != "auto":
        try:
            return embedding.space(wanted)
        except EmbeddingError:
            raise SourceError(
                "invalid_payload", "configuration.vectors names no installed vector space"
            ) from None
    spaces = embedding.spaces
    return spaces[0] if len(spaces) == 1 else None


@dataclass(frozen=True, slots=True)
class FusedHit:
    """A recall result: the memory, its relevance score and what found it (ranks from 1)."""

    memory: Memory
    score: float
    tier: str
    keyword_rank: int | None
    meaning_rank: int | None
    similarity: float | None


def _tier_of(keyword: SearchHit | None, similarity: float | None) -> str:
    tiers = ["weak"]
    if keyword is not None:
        tiers.append(tier(keyword.score))
    if similarity is not None:
        tiers.append(
            "strong"
            if similarity >= STRONG_COSINE
            else "related"
            if similarity >= RELATED_COSINE
            else "weak"
        )
    order = ("weak", "related", "strong")
    return max(tiers, key=order.index)


def _spread(values: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Each value placed between the list's lowest (0) and highest (1)."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high <= low:
        return dict.fromkeys(values, 1.0)
    return {key: (value - low) / (high - low) for key, value in values.items()}


def fuse(
    keyword: Sequence[SearchHit],
    meaning: Sequence[SearchHit],
    limit: int,
    meaning_weight: float = MEANING_WEIGHT,
) -> list[FusedHit]:
    """One ranking of both by relative score, meaning weighing `meaning_weight` (0 to 1).

    Each list's scores are spread over [0, 1] (its best 1, its worst 0) and a memory's fused
    score is `meaning_weight` of its meaning score plus the rest of its keyword score (0 where
    a list did not find it). Ranks alone would not do: in a small partition every memory is
    among the vector candidates, so a keyword hit sharing one rare word by chance would gain
    a meaning rank too and outrank what the question means. Scores keep how far apart the
    candidates are. With no keyword list (recall by meaning alone) and a weight of 1, the
    ranking is the meaning ranking.
    """
    found: dict[tuple[str, str], Memory] = {}
    keyword_rank: dict[tuple[str, str], int] = {}
    meaning_rank: dict[tuple[str, str], int] = {}
    by_keyword: dict[tuple[str, str], SearchHit] = {}
    similarity: dict[tuple[str, str], float] = {}
    for rank, hit in enumerate(keyword, 1):
        key = (hit.memory.parent, hit.memory.id)
        found[key] = hit.memory
        keyword_rank[key] = rank
        by_keyword[key] = hit
    for rank, hit in enumerate(meaning, 1):
        key = (hit.memory.parent, hit.memory.id)
        found.setdefault(key, hit.memory)
        meaning_rank[key] = rank
        similarity[key] = 2.0 * hit.score - 1.0  # the Provider's (1 + cosine) / 2, undone
    lexical = _spread({key: hit.score for key, hit in by_keyword.items()})
    semantic = _spread(similarity)
    scores = {
        key: meaning_weight * semantic.get(key, 0.0) + (1 - meaning_weight) * lexical.get(key, 0.0)
        for key in found
    }
    ranked = sorted(scores, key=lambda key: (-scores[key], key))
    return [
        FusedHit(
            memory=found[key],
            score=min(1.0, max(0.0, scores[key])),
            tier=_tier_of(by_keyword.get(key), similarity.get(key)),
            keyword_rank=keyword_rank.get(key),
            meaning_rank=meaning_rank.get(key),
            similarity=similarity.get(key),
        )
        for key in ranked[:limit]
    ]


def bulk_seconds() -> float:
    """How long a bulk step may embed: its caller's deadline less a margin, at most a cap."""
    left = anyio.current_effective_deadline() - anyio.current_time() - DEADLINE_MARGIN
    return max(0.0, min(STEP_SECONDS, left))


def _batches(memories: Sequence[Memory], size: int) -> Iterable[Sequence[Memory]]:
    for start in range(0, len(memories), size):
        yield memories[start : start + size]


class Semantic:
    """The Source's vectors: kept in one space through the Provider, embedded by its owner."""

    def __init__(
        self, embedding: Embedding | None, space: VectorSpace | None, calls: ProviderCalls
    ) -> None:
        self._embedding = embedding
        self.space = space if embedding is not None and calls.supports("vectors") else None
        self._calls = calls
        self._registered = False
        self._refused = False
        self._lock = anyio.Lock()
        # (space key, parent) this process found with no memory waiting for vectors in that
        # space, and when: looked at again after `RECHECK_SECONDS` (another process may have
        # written without an embedder), and at once after a write here whose vectors did not
        # follow
        self._complete: dict[tuple[str, str], float] = {}
        # the other installed spaces, by key: whether the store already holds their vectors
        # (they serve recall while the configured space is being filled), and since when known
        self._previous: dict[str, tuple[bool, float]] = {}

    @property
    def active(self) -> bool:
        """Whether recall by meaning is on (an embedder's space, a Provider that keeps vectors)."""
        return self.space is not None and not self._refused

    def _parts(self) -> tuple[Embedding, VectorSpace]:
        """The embedding and the space (only called once `_ready()` said yes)."""
        if self._embedding is None or self.space is None:
            raise SourceError("unsupported", "recall by meaning is off")
        return self._embedding, self.space

    def _covered(self, space: VectorSpace, parent: str) -> bool:
        checked = self._complete.get((space.key, parent))
        return checked is not None and time.monotonic() - checked < RECHECK_SECONDS

    async def _missing(self, space: VectorSpace, parent: str, limit: int) -> MissingVectorsResult:
        missing = await self._calls.call(
            "missing_vectors",
            MissingVectorsRequest(parent=parent, space=space.key, limit=limit),
            MissingVectorsResult,
        )
        check_parents(missing.memories, (parent,))
        if not missing.memories:
            self._complete[space.key, parent] = time.monotonic()
        return missing

    async def _held(self, space: VectorSpace, parent: str) -> bool:
        """Whether the store holds vectors of this other installed space, the same model's.

        Asked without registering it: a space the store never kept is not made to look kept.
        """
        known = self._previous.get(space.key)
        if known is not None and time.monotonic() - known[1] < RECHECK_SECONDS:
            return known[0]
        held = False
        try:
            await self._missing(space, parent, 1)  # refused while the space is not registered
            answer = await self._calls.call(
                "register_space", RegisterSpaceRequest(space=space), RegisterSpaceResult
            )
            held = not answer.registered
        except SourceError as exc:
            _log.debug("spaces: %s is not a previous space here (%s)", space.key, exc.code)
        self._previous[space.key] = (held, time.monotonic())
        return held

    async def previous_spaces(self, parents: Sequence[str]) -> list[VectorSpace]:
        """The other installed spaces whose vectors the store holds, in installed order."""
        if self._embedding is None or self.space is None or not parents:
            return []
        others = [space for space in self._embedding.spaces if space.id != self.space.id]
        return [space for space in others if await self._held(space, parents[0])]

    async def serving(self, parents: Sequence[str]) -> VectorSpace | None:
        """The space recall searches for `parents`: the configured one once it covers them all.

        While it is being filled (a new model or space version was installed), a previous
        space whose vectors cover every memory of `parents` keeps serving, as long as its
        embedder is still installed; failing one, the configured space serves what it has.
        """
        if not await self._ready():
            return None
        target = self.space
        assert target is not None
        if all(self._covered(target, parent) for parent in parents):
            return target
        for space in await self.previous_spaces(parents):
            covered = True
            for parent in parents:
                if (
                    not self._covered(space, parent)
                    and (await self._missing(space, parent, 1)).memories
                ):
                    covered = False
                    break
            if covered:
                return space
        return target

    async def _ready(self) -> bool:
        """Register the space with the Provider once; False when it cannot be used."""
        if self._registered or not self.active:
            return self._registered
        space = self.space
        assert space is not None
        async with self._lock:
            if not self._registered and not self._refused:
                try:
                    await self._calls.call(
                        "register_space", RegisterSpaceRequest(space=space), RegisterSpaceResult
                    )
                    self._registered = True
                except SourceError as exc:
                    if exc.code == "space_changed":
                        # vectors of another model under this identity: never mixed in
                        _log.warning("spaces: the store's %s is another model's", space.key)
                        self._refused = True
                    elif exc.code == "unsupported":
                        # the store cannot keep vectors here (numpy is not installed)
                        _log.warning("spaces: the store cannot keep vectors; recall by keywords")
                        self._refused = True
                    else:
                        _log.debug("spaces: registering the vector space failed (%s)", exc.code)
        return self._registered

    async def embed(
        self,
        parent: str,
        memories: Sequence[Memory],
        until: float | None = None,
        space: VectorSpace | None = None,
    ) -> int:
        """Embed memories of one parent and keep their vectors; how many got them.

        In the configured space unless `space` names another installed one. With `until` (an
        `anyio.current_time()` instant), no batch starts that the last one's duration says
        would end past it. Anything the embedder or the Provider cannot do now is left for a
        later catch-up: the memories are stored and found by keyword meanwhile.
        """
        if not memories or not await self._ready():
            return 0
        embedding, target = self._parts()
        space = space or target
        size = max(1, min(embedding.max_batch(space.id), CATCH_UP_BATCH))
        stored = 0
        took = 0.0
        for batch in _batches(memories, size):
            started = anyio.current_time()
            if until is not None and started + took > until:
                break
            digest = hashlib.sha256(orjson.dumps([[m.id, m.text] for m in batch])).hexdigest()
            try:
                answer = await embedding.segment_and_embed(
                    {
                        "idempotency_key": f"spaces:{space.key}:{digest}",
                        "parts": [{"key": memory.id, "text": memory.text} for memory in batch],
                        "spaces": [space.id],
                    }
                )
            except EmbeddingError as exc:
                _log.debug("spaces: embedding failed (%s); left for catch-up", exc.code)
                return stored
            segments: dict[str, list[SegmentVector]] = {}
            for segment in answer.segments:
                segments.setdefault(segment.part_key, []).append(
                    SegmentVector(
                        start=segment.start, end=segment.end, vector=segment.vectors[space.id]
                    )
                )
            kept = [
                MemoryVectors(id=memory.id, segments=tuple(segments[memory.id]))
                for memory in batch
                if segments.get(memory.id)
            ]
            if not kept:
                continue
            try:
                result = await self._calls.call(
                    "store_vectors",
                    StoreVectorsRequest(parent=parent, space=space.key, memories=tuple(kept)),
                    StoreVectorsResult,
                )
            except SourceError as exc:
                _log.debug("spaces: keeping vectors failed (%s); left for catch-up", exc.code)
                return stored
            stored += result.stored
            took = anyio.current_time() - started
        return stored

    async def embed_soon(
        self, parent: str, memories: Sequence[Memory], seconds: float = INLINE_SECONDS
    ) -> None:
        """Embed right after a write, within `seconds`; what is left waits for catch-up.

        A previous space that still serves recall gets the memories too, so it stays whole
        until the configured space takes over.
        """
        if not await self._ready():
            return
        assert self.space is not None
        spaces = [self.space, *await self.previous_spaces((parent,))]
        done = dict.fromkeys((space.key for space in spaces), 0)
        with anyio.move_on_after(seconds) as scope:
            for space in spaces:
                done[space.key] = await self.embed(parent, memories, scope.deadline, space)
        for space in spaces:
            if done[space.key] < len(memories):
                self._complete.pop((space.key, parent), None)

    async def _fill_parent(self, parent: str, batch: int, until: float) -> tuple[int, bool]:
        """Embed `parent`'s memories without vectors, `batch` at a time, oldest first.

        Returns how many got vectors, and whether none are left (False: out of time, or the
        embedder or the store cannot keep up now).
        """
        assert self.space is not None
        done = 0
        while True:
            missing = await self._missing(self.space, parent, batch)
            if not missing.memories:
                return done, True
            embedded = await self.embed(parent, missing.memories, until)
            done += embedded
            if embedded < len(missing.memories):
                return done, False

    async def fill(self, parents: Sequence[str], seconds: float) -> tuple[int, int | None]:
        """Embed memories of `parents` still without vectors, oldest first, for `seconds`.

        Returns how many got vectors, and how many still wait (None when the Provider does
        not count them). No batch starts that would end past `seconds`, so the count is
        exact; it stops early when the embedder or the store cannot keep up.

        Raises:
            SourceError: `unsupported` when recall by meaning is off here.
        """
        if not await self._ready():
            raise SourceError("unsupported", "recall by meaning is off: nothing to reindex")
        until = anyio.current_time() + seconds
        done = 0
        for parent in parents:
            embedded, whole = await self._fill_parent(parent, 1_000, until)
            done += embedded
            if not whole:
                break
        return done, await self.pending(parents)

    async def catch_up(self, parents: Sequence[str]) -> None:
        """Embed memories still without vectors, for at most `CATCH_UP_SECONDS`."""
        if not await self._ready():
            return
        assert self.space is not None
        with anyio.move_on_after(CATCH_UP_SECONDS) as scope:
            for parent in parents:
                if self._covered(self.space, parent):
                    continue
                try:
                    _, whole = await self._fill_parent(parent, CATCH_UP_BATCH, scope.deadline)
                except SourceError:
                    return
                if not whole:
                    return  # the embedder or the store cannot keep up now: next time

    async def pending(self, parents: Sequence[str]) -> int | None:
        """How many memories of `parents` still wait for vectors, when the Provider says."""
        if not await self._ready():
            return None
        assert self.space is not None
        total = 0
        for parent in parents:
            missing = await self._missing(self.space, parent, 1)
            if missing.remaining is None:
                return None
            total += missing.remaining
        return total

    async def search(
        self, parents: Sequence[str], query: str, limit: int, *, required: bool = False
    ) -> list[SearchHit]:
        """The memories nearest the query's meaning, in the space that serves `parents`.

        Beside a keyword search, a query the embedder cannot encode costs only meaning: the
        answer is empty. When meaning is all that was asked for (`required`), an empty answer
        would hide that nothing was searched, so the failure is raised instead.

        Raises:
            SourceError: only when `required`: `unsupported` (recall by meaning is off), or
                the embedder's own code (`timeout`, `unavailable`, ...; retryable when it is).
        """
        space = await self.serving(parents)
        if space is None or self._embedding is None:
            if required:
                raise SourceError("unsupported", MEANING_OFF)
            return []
        try:
            vector = await self._embedding.embed_query(space.id, query)
        except EmbeddingError as exc:
            _log.debug("spaces: the query could not be embedded (%s)", exc.code)
            if required:
                raise SourceError(
                    exc.code,
                    "the query could not be embedded",
                    kind="transient" if exc.retryable else "terminal",
                    retry_after=exc.retry_after,
                ) from None
            return []
        result = await self._calls.call(
            "vector_search",
            VectorSearchRequest(
                parents=tuple(parents), space=space.key, vector=vector, limit=limit
            ),
            SearchResult,
        )
        check_parents((hit.memory for hit in result.hits), parents)
        return list(result.hits)
