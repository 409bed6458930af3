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

from mnemon import Embedding, EmbeddingError, SourceError, VectorSpace

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

__all__ = ["FusedHit", "Semantic", "bulk_seconds", "choose_space", "fuse"]

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


def fuse(keyword: Sequence[SearchHit], meaning: Sequence[SearchHit], limit: int) -> list[FusedHit]:
    """One ranking of both by relative score, meaning and keywords weighed equally.

    Each list's scores are spread over [0, 1] (its best 1, its worst 0) and a memory's fused
    score is `MEANING_WEIGHT` of its meaning score plus the rest of its keyword score (0 where
    a list did not find it). Ranks alone would not do: in a small partition every memory is
    among the vector candidates, so a keyword hit sharing one rare word by chance would gain
    a meaning rank too and outrank what the question means. Scores keep how far apart the
    candidates are.
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
        key: MEANING_WEIGHT * semantic.get(key, 0.0) + (1 - MEANING_WEIGHT) * lexical.get(key, 0.0)
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
        # parents this process found with no memory waiting for vectors, and when: a recall
        # looks again after `RECHECK_SECONDS` (another process may have written without an
        # embedder), and at once after a write here whose vectors did not follow
        self._complete: dict[str, float] = {}

    @property
    def active(self) -> bool:
        """Whether recall by meaning is on (an embedder's space, a Provider that keeps vectors)."""
        return self.space is not None and not self._refused

    def _parts(self) -> tuple[Embedding, VectorSpace]:
        """The embedding and the space (only called once `_ready()` said yes)."""
        if self._embedding is None or self.space is None:
            raise SourceError("unsupported", "recall by meaning is off")
        return self._embedding, self.space

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
        self, parent: str, memories: Sequence[Memory], until: float | None = None
    ) -> int:
        """Embed memories of one parent and keep their vectors; how many got them.

        With `until` (an `anyio.current_time()` instant), no batch starts that the last one's
        duration says would end past it. Anything the embedder or the Provider cannot do now
        is left for a later catch-up: the memories are stored and found by keyword meanwhile.
        """
        if not memories or not await self._ready():
            return 0
        embedding, space = self._parts()
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
        """Embed right after a write, within `seconds`; what is left waits for catch-up."""
        done = 0
        with anyio.move_on_after(seconds) as scope:
            done = await self.embed(parent, memories, until=scope.deadline)
        if done < len(memories):
            self._complete.pop(parent, None)

    async def fill(self, parents: Sequence[str], seconds: float) -> tuple[int, int | None]:
        """Embed memories of `parents` still without vectors, oldest first, for `seconds`.

        Returns how many got vectors, and how many still wait (None when the Provider does
        not count them). Stops early when the embedder or the store cannot keep up.

        Raises:
            SourceError: `unsupported` when recall by meaning is off here.
        """
        if not await self._ready():
            raise SourceError("unsupported", "recall by meaning is off: nothing to reindex")
        space = self.space
        assert space is not None
        done = 0
        with anyio.move_on_after(seconds) as scope:
            for parent in parents:
                while True:
                    missing = await self._calls.call(
                        "missing_vectors",
                        MissingVectorsRequest(parent=parent, space=space.key, limit=1_000),
                        MissingVectorsResult,
                    )
                    check_parents(missing.memories, (parent,))
                    if not missing.memories:
                        self._complete[parent] = time.monotonic()
                        break
                    embedded = await self.embed(parent, missing.memories, until=scope.deadline)
                    done += embedded
                    if embedded < len(missing.memories):
                        break  # out of time, or the embedder or the store cannot keep up
                if scope.deadline <= anyio.current_time():
                    break
        return done, await self.pending(parents)

    async def catch_up(self, parents: Sequence[str]) -> None:
        """Embed memories still without vectors, for at most `CATCH_UP_SECONDS`."""
        if not await self._ready():
            return
        space = self.space
        assert space is not None
        with anyio.move_on_after(CATCH_UP_SECONDS):
            for parent in parents:
                checked = self._complete.get(parent)
                if checked is not None and time.monotonic() - checked < RECHECK_SECONDS:
                    continue
                while True:
                    try:
                        missing = await self._calls.call(
                            "missing_vectors",
                            MissingVectorsRequest(
                                parent=parent, space=space.key, limit=CATCH_UP_BATCH
                            ),
                            MissingVectorsResult,
                        )
                    except SourceError:
                        return
                    check_parents(missing.memories, (parent,))
                    if not missing.memories:
                        self._complete[parent] = time.monotonic()
                        break
                    done = await self.embed(parent, missing.memories)
                    if done < len(missing.memories):
                        return  # the embedder or the store cannot keep up now: next time

    async def pending(self, parents: Sequence[str]) -> int | None:
        """How many memories of `parents` still wait for vectors, when the Provider says."""
        if not await self._ready():
            return None
        space = self.space
        assert space is not None
        total = 0
        for parent in parents:
            missing = await self._calls.call(
                "missing_vectors",
                MissingVectorsRequest(parent=parent, space=space.key, limit=1),
                MissingVectorsResult,
            )
            if missing.remaining is None:
                return None
            total += missing.remaining
        return total

    async def search(self, parents: Sequence[str], query: str, limit: int) -> list[SearchHit]:
        """The memories nearest the query's meaning; empty when the embedder cannot answer."""
        if not await self._ready():
            return []
        embedding, space = self._parts()
        try:
            vector = await embedding.embed_query(space.id, query)
        except EmbeddingError as exc:
            _log.debug("spaces: the query could not be embedded (%s)", exc.code)
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
