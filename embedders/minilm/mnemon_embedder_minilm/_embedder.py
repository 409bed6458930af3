"""The runtime an entry gets: loads the model on its first call, then segments and embeds.

Nothing heavy happens in the factory. The first call loads the model in a worker thread, once,
under a lock; if its caller stops waiting (a deadline) the load still completes and the next
call uses it. Tokenizing and encoding run in worker threads too, in batches, one model run at
a time, so the event loop keeps serving turns while texts are embedded.
"""

from __future__ import annotations

import threading
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

import anyio

from mnemon.sdk import (
    EmbedQueryRequest,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    SourceError,
    run_blocking,
)

from ._settings import MiniLMSettings

if TYPE_CHECKING:
    from ._model import LoadedModel

__all__ = ["MAX_SEGMENTS", "SPACE_ID", "MiniLMEmbedder"]

SPACE_ID = "minilm.all-minilm-l6-v2"
#: the most segments one text yields: about 65,000 word pieces (a quarter of a megabyte of
#: English), 35 seconds of encoding on one thread
MAX_SEGMENTS = 256


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in one vector space: `segment_and_embed`, `embed_query`, `dispose`."""

    def __init__(self, settings: MiniLMSettings, *, weights: Traversable | None = None) -> None:
        self._settings = settings
        self._weights = weights
        self._model: LoadedModel | None = None
        self._failure: SourceError | None = None
        # set by dispose(), read by a load finishing in its thread
        self._disposed = threading.Event()
        # tasks wait for the load here, on the loop, rather than in worker threads
        self._loading = anyio.Lock()
        # the load itself, in its thread: once, even when the task that started it gave up
        self._load_lock = threading.Lock()
        # one model run at a time: a run already uses the configured threads
        self._running = anyio.Lock()

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        """Cut each part into segments of at most 256 tokens and embed each one.

        A part the model reads whole is one segment; a longer one is cut at word boundaries
        into windows of at most 254 word pieces, which together cover the part. An empty part
        has no segment.

        Raises:
            SourceError: `unknown_space` or `text_too_long` (over 256 segments), both terminal;
                a load failure (see `load_model`); `embedder_disposed`.
        """
        self._check_spaces(request.spaces)
        model = await self._loaded()
        texts = [part.text for part in request.parts]
        bounds = await run_blocking(model.segments, texts)
        count = sum(len(cuts) for cuts in bounds)
        if count > MAX_SEGMENTS:
            raise SourceError(
                "text_too_long",
                f"the text needs {count} segments of at most 256 tokens; "
                f"minilm embeds at most {MAX_SEGMENTS}: split it",
            )
        cuts = [
            (part.key, part.text, start, end)
            for part, part_bounds in zip(request.parts, bounds, strict=True)
            for start, end in part_bounds
        ]
        vectors = (
            await self._encode([text[start:end] for _, text, start, end in cuts])
            if request.spaces
            else [()] * len(cuts)
        )
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
        """The query's unit vector (a query longer than 256 tokens is read up to there).

        Raises:
            SourceError: `unknown_space`; a load failure (see `load_model`);
                `embedder_disposed`.
        """
        self._check_spaces((request.space,))
        [vector] = await self._encode([request.text])
        return QueryVector(vector=vector)

    def dispose(self) -> None:
        """Release the model; later calls are refused (`embedder_disposed`)."""
        # in this order: a load finishing in its thread sees the flag and drops its model
        self._disposed.set()
        model, self._model = self._model, None
        if model is not None:
            model.release()

    async def _encode(self, texts: list[str]) -> list[tuple[float, ...]]:
        model = await self._loaded()
        # texts of like length share a batch, so little of a run is padding; a text's vector
        # does not depend on the others of its batch
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors: list[tuple[float, ...]] = [()] * len(texts)
        batch = self._settings.batch
        for first in range(0, len(order), batch):
            chosen = order[first : first + batch]
            # per batch, so a query waits for one batch, not for a whole document
            async with self._running:
                encoded = await run_blocking(model.encode, [texts[index] for index in chosen])
            for index, vector in zip(chosen, encoded, strict=True):
                vectors[index] = vector
        return vectors

    async def _loaded(self) -> LoadedModel:
        model = self._model
        if model is not None:
            return model
        async with self._loading:
            model = self._model  # loaded while this task waited
            return model if model is not None else await run_blocking(self._load)

    def _load(self) -> LoadedModel:
        """In a worker thread: the model, loaded on the first call only."""
        with self._load_lock:
            if self._disposed.is_set():
                raise SourceError("embedder_disposed", "this minilm embedder was disposed")
            if self._failure is not None:
                # a refused file stays refused: no second read and hash of 23 MB per call
                raise SourceError(self._failure.code, str(self._failure), kind=self._failure.kind)
            model = self._model
            if model is None:
                # numpy, onnxruntime and tokenizers are imported here, off the event loop, on
                # the first call: mounting the embedder imports none of them
                from ._model import load_model

                try:
                    model = self._model = load_model(self._settings.threads, self._weights)
                except SourceError as error:
                    self._failure = error
                    raise
                if self._disposed.is_set():  # disposed while it loaded
                    self._model = None
                    model.release()
                    raise SourceError("embedder_disposed", "this minilm embedder was disposed")
            return model

    @staticmethod
    def _check_spaces(spaces: tuple[str, ...]) -> None:
        for space in spaces:
            if space != SPACE_ID:
                raise SourceError("unknown_space", f"minilm owns only the space {SPACE_ID}")
