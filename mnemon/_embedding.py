"""Embedders: the contract an embedding plugin keeps, and the checked access Sources get to it.

The contract is Quivr's ingestion contribution: an embedder owns vector spaces (`id@version`,
model, dimensions, metric), cuts a text into segments and embeds each (`segment_and_embed`),
and encodes queries (`embed_query`). Every answer is judged by the same rules a Quivr engine
applies before anything is stored; a broken answer is refused with the rule's code, never
stored, and never raises anything but `EmbeddingError`.
"""

from __future__ import annotations

import logging
import math
import struct
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import anyio
import orjson

from ._awaited import awaited
from ._errors import DefinitionError, MnemonError, SourceError
from ._models import (
    EmbedderManifest,
    EmbedQueryRequest,
    QueryVector,
    SegmentAnswer,
    SegmentRequest,
    VectorSpace,
    validate_model,
)
from ._models.embedding import MAX_LEXICAL_TEXT

__all__ = [
    "EmbedderDefinition",
    "EmbedderRuntime",
    "Embedding",
    "EmbeddingError",
    "check_query_vector",
    "check_segment_answer",
    "define_embedder",
    "space_registration_conflict",
]

_log = logging.getLogger("mnemon.embedding")
_Answer = TypeVar("_Answer", SegmentAnswer, QueryVector)
_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_MAX_PROVENANCE_BYTES = 4_096


class EmbeddingError(MnemonError):
    """An embedder call did not give usable vectors.

    `code` names why: `timeout`, `embedder_failed`, the embedder's own `SourceError` code, or,
    for an answer that breaks the contract, `ingestion_refused` with the broken rules in
    `rules` (`dimension_mismatch`, `invalid_vector`, ...). `retryable` says whether the same
    call may succeed later: a memory keeps its keyword index either way, and its vectors follow
    once a retry succeeds. `retry_after` is how many seconds the embedder asked to wait, when
    it said (a rate limit).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        retryable: bool,
        rules: Iterable[str] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.rules = tuple(sorted(set(rules)))
        self.retry_after = retry_after


class EmbedderRuntime(Protocol):
    """What an embedder's factory returns (both methods async; `dispose()` optional)."""

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer | Mapping[str, Any]:
        """Cut the request's parts into segments and embed each in the spaces asked for."""
        ...

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector | Mapping[str, Any]:
        """Encode one query into the space asked for."""
        ...


EmbedderFactory: TypeAlias = Callable[[Mapping[str, Any]], "EmbedderRuntime | Awaitable[Any]"]


@dataclass(frozen=True, slots=True)
class EmbedderDefinition:
    """A validated embedder type: its manifest and the factory making its runtime."""

    manifest: EmbedderManifest
    create: EmbedderFactory

    @property
    def type_id(self) -> str:
        """The embedder type id."""
        return self.manifest.type_id

    @property
    def package_name(self) -> str:
        """The distribution that ships this embedder."""
        return self.manifest.package_name


def define_embedder(
    manifest: EmbedderManifest | Mapping[str, Any], create: EmbedderFactory
) -> EmbedderDefinition:
    """Define an embedder type from its manifest and factory.

    The factory receives the entry's frozen configuration and returns the runtime (or an
    awaitable of it); it should load nothing heavy until the first call.

    Raises:
        DefinitionError: naming the manifest field at fault, or when `create` is not callable.
    """
    checked = validate_model(
        EmbedderManifest, manifest, subject="embedder manifest", error=DefinitionError
    )
    if not callable(create):
        raise DefinitionError("create: an embedder factory must be callable")
    return EmbedderDefinition(checked, create)


def space_registration_conflict(registered: VectorSpace, declared: VectorSpace) -> str | None:
    """Why `declared` may not take the place of `registered` under one `id@version`, or None.

    A store that keeps vectors registers the space they belong to; the same identity with
    another model, dimensions or metric would mix incomparable vectors (`space_changed`).
    """
    if registered.key != declared.key:
        return None
    same = (registered.model, registered.dimensions, registered.metric) == (
        declared.model,
        declared.dimensions,
        declared.metric,
    )
    return None if same else "space_changed"


def _float32(value: object) -> bool:
    """Whether `value` is a finite number a 32-bit float can hold."""
    return (
        isinstance(value, float | int)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= _FLOAT32_MAX
    )


def _vector_rules(space: VectorSpace, vector: Sequence[float]) -> set[str]:
    rules = set()
    if len(vector) != space.dimensions:
        rules.add("dimension_mismatch")
    if not all(
        isinstance(x, float | int) and math.isfinite(x) and abs(x) <= _FLOAT32_MAX for x in vector
    ):
        rules.add("invalid_vector")
    elif space.metric == "cosine" and not any(vector):
        rules.add("invalid_vector")  # a zero vector has no direction
    return rules


def check_query_vector(space: VectorSpace, answer: QueryVector) -> tuple[str, ...]:
    """The rules a query vector breaks (`dimension_mismatch`, `invalid_vector`); empty when none."""
    return tuple(sorted(_vector_rules(space, answer.vector)))


def check_segment_answer(
    request: SegmentRequest,
    answer: SegmentAnswer,
    spaces: Mapping[str, VectorSpace],
    max_segments: int,
) -> tuple[str, ...]:
    """The rules `answer` breaks as an answer to `request`, by code; empty when it keeps all.

    `spaces` maps the space ids of the request to their declarations. The rules are Quivr's
    `CheckSegmentAndEmbedOutput`: parts of the request only (`unknown_part_key`), offsets within
    the part (`offset_out_of_range`), empty segments only with a `title` part
    (`empty_segment`), each part and offsets once (`duplicate_segment`), at most
    `max_segments` (`too_many_segments`), exactly one vector per requested space
    (`missing_vector`, `unrequested_space`) of the space's dimensions, finite as 32-bit floats
    and not all zeros under `cosine` (`dimension_mismatch`, `invalid_vector`), lexical text
    without NUL of at most 16,384 code points (`invalid_lexical_text`,
    `lexical_text_too_large`) and provenance of at most 4 KiB without NUL
    (`invalid_provenance`, `provenance_too_large`).
    """
    rules: set[str] = set()
    lengths = {part.key: len(part.text) for part in request.parts}
    has_title = any(part.role == "title" for part in request.parts)
    if len(answer.segments) > max_segments:
        rules.add("too_many_segments")
    seen = set()
    for segment in answer.segments:
        length = lengths.get(segment.part_key)
        if length is None:
            rules.add("unknown_part_key")
        elif not 0 <= segment.start <= segment.end <= length:
            rules.add("offset_out_of_range")
        if segment.start == segment.end and not has_title:
            rules.add("empty_segment")
        where = (segment.part_key, segment.start, segment.end)
        if where in seen:
            rules.add("duplicate_segment")
        seen.add(where)
        asked = set(request.spaces)
        if asked - set(segment.vectors):
            rules.add("missing_vector")
        if set(segment.vectors) - asked:
            rules.add("unrequested_space")
        for space_id, vector in segment.vectors.items():
            if space_id in spaces:
                rules |= _vector_rules(spaces[space_id], vector)
        if segment.lexical_text is not None:
            if "\x00" in segment.lexical_text:
                rules.add("invalid_lexical_text")
            if len(segment.lexical_text) > MAX_LEXICAL_TEXT:
                rules.add("lexical_text_too_large")
        if segment.provenance is not None:
            encoded = orjson.dumps(dict(segment.provenance))
            if b"\\u0000" in encoded:
                rules.add("invalid_provenance")
            if len(encoded) > _MAX_PROVENANCE_BYTES:
                rules.add("provenance_too_large")
    return tuple(sorted(rules))


@dataclass(frozen=True, slots=True)
class _Installed:
    manifest: EmbedderManifest
    runtime: Any


class Embedding:
    """The embedders installed in a host, as a Source reaches them: checked, under deadlines.

    A Source asks for segments and vectors in spaces by id; the call goes to the space's owner
    under its `timeout_ms` (`query_timeout_ms` for queries), and the answer is checked against
    the contract before it is returned. Every failure is an `EmbeddingError`, never the
    embedder's own exception (logged at DEBUG only); an `EmbeddingError` the embedder raises
    itself (an answer it refused on its own wire) reaches the Source unchanged.
    """

    def __init__(self, embedders: Iterable[tuple[EmbedderManifest, Any]]) -> None:
        self._owners: dict[str, _Installed] = {}
        self._spaces: dict[str, VectorSpace] = {}
        for manifest, runtime in embedders:
            installed = _Installed(manifest, runtime)
            for space in manifest.spaces:
                if space.id in self._owners:
                    owner = self._owners[space.id].manifest.package_name
                    raise DefinitionError(
                        f"space_owner_conflict: space {space.id!r} is declared by "
                        f"{owner} and {manifest.package_name}"
                    )
                self._owners[space.id] = installed
                self._spaces[space.id] = space

    @property
    def spaces(self) -> tuple[VectorSpace, ...]:
        """Every installed space, sorted by id."""
        return tuple(self._spaces[key] for key in sorted(self._spaces))

    def space(self, space_id: str) -> VectorSpace:
        """The installed space with this id.

        Raises:
            EmbeddingError: no installed embedder owns it (`unknown_space`).
        """
        space = self._spaces.get(space_id)
        if space is None:
            raise EmbeddingError(
                "no installed embedder owns this space", code="unknown_space", retryable=False
            )
        return space

    def max_batch(self, space_id: str) -> int:
        """The most texts to send the space's owner in one batch."""
        self.space(space_id)
        return self._owners[space_id].manifest.max_batch

    async def segment_and_embed(self, request: SegmentRequest | Mapping[str, Any]) -> SegmentAnswer:
        """Segment and embed one text in the spaces it names (one owner for all of them).

        Raises:
            EmbeddingError: an unknown space, spaces of two owners, or the call failed (see
                the class for the codes).
        """
        checked = validate_model(
            SegmentRequest, request, subject="segment_and_embed request", error=DefinitionError
        )
        if not checked.spaces:
            raise EmbeddingError("name the spaces to embed in", code="no_space", retryable=False)
        owners = {id(self._owner(space)) for space in checked.spaces}
        if len(owners) > 1:
            raise EmbeddingError(
                "the spaces of one request must share one embedder",
                code="space_owner_conflict",
                retryable=False,
            )
        installed = self._owner(checked.spaces[0])
        spaces = {space: self._spaces[space] for space in checked.spaces}
        answer = await self._call(
            installed,
            "segment_and_embed",
            checked,
            SegmentAnswer,
            installed.manifest.timeout_ms / 1000,
        )
        rules = check_segment_answer(checked, answer, spaces, installed.manifest.max_segments)
        if rules:
            raise self._refused(installed, "segment_and_embed", rules)
        return answer

    async def embed_query(self, space_id: str, text: str) -> tuple[float, ...]:
        """The vector of `text` in the space `space_id`, within its `query_timeout_ms`.

        Raises:
            EmbeddingError: an unknown space, or the call failed (see the class for the codes).
        """
        space = self.space(space_id)
        installed = self._owner(space_id)
        request = EmbedQueryRequest(space=space_id, text=text)
        answer = await self._call(
            installed,
            "embed_query",
            request,
            QueryVector,
            installed.manifest.query_timeout_ms / 1000,
        )
        rules = check_query_vector(space, answer)
        if rules:
            raise self._refused(installed, "embed_query", rules)
        return answer.vector

    def _owner(self, space_id: str) -> _Installed:
        self.space(space_id)
        return self._owners[space_id]

    @staticmethod
    def _refused(installed: _Installed, call: str, rules: Sequence[str]) -> EmbeddingError:
        name = installed.manifest.type_id
        _log.warning("embedder %s %s() broke the contract: %s", name, call, ", ".join(rules))
        return EmbeddingError(
            f"embedder {name} {call}() answered against the contract ({', '.join(rules)})",
            code="ingestion_refused",
            retryable=False,
            rules=rules,
        )

    @staticmethod
    async def _call(
        installed: _Installed, call: str, request: Any, model: type[_Answer], deadline: float
    ) -> _Answer:
        name = installed.manifest.type_id
        method = getattr(installed.runtime, call)
        with anyio.move_on_after(deadline) as scope:
            try:
                produced = await awaited(method(request))
            except EmbeddingError:
                # an embedder that judges an answer of its own wire (one served over HTTP)
                # refuses it the way the host refuses a broken answer: as it is
                raise
            except SourceError as error:
                _log.debug("embedder %s %s() refused", name, call, exc_info=True)
                raise EmbeddingError(
                    f"embedder {name} {call}() refused the call ({error.code})",
                    code=error.code,
                    retryable=error.retryable,
                    retry_after=error.retry_after,
                ) from None
            except Exception:
                # the exception text may carry paths, URLs or keys: DEBUG only
                _log.debug("embedder %s %s() failed", name, call, exc_info=True)
                raise EmbeddingError(
                    f"embedder {name} {call}() failed", code="embedder_failed", retryable=True
                ) from None
        if scope.cancelled_caught:
            raise EmbeddingError(
                f"embedder {name} {call}() timed out", code="timeout", retryable=True
            )
        try:
            return validate_model(model, produced, subject=f"{call}()", error=MnemonError)
        except MnemonError:
            raise EmbeddingError(
                f"embedder {name} {call}() answered in another shape",
                code="ingestion_refused",
                retryable=False,
                rules=("schema_violation",),
            ) from None
