"""Embedding: vector spaces, and the two calls an embedder answers (Quivr's ingestion shape).

A vector space is identified by its id and version together (`id@version`): vectors of another
version belong to another space, so a new model, new weights or a new input template means a
new version. An embedder owns its spaces; `segment_and_embed` cuts a text into segments (in
code points) and embeds each in the spaces asked for, `embed_query` encodes one query.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, StringConstraints, model_validator

from .base import Id, JsonObject, PackageName, StrictInt, WireModel

__all__ = [
    "SPACE_ID_PATTERN",
    "EmbedQueryRequest",
    "EmbedderManifest",
    "QueryVector",
    "Segment",
    "SegmentAnswer",
    "SegmentRequest",
    "SpaceId",
    "SpaceMetric",
    "TextPart",
    "VectorSpace",
]

SPACE_ID_PATTERN = r"^[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*$"
SpaceId = Annotated[str, Strict(), StringConstraints(pattern=SPACE_ID_PATTERN, max_length=64)]
SpaceVersion = Annotated[
    str, Strict(), StringConstraints(pattern=r"^[0-9A-Za-z][0-9A-Za-z._-]{0,31}$")
]
SpaceMetric = Literal["cosine", "dot", "l2"]
_SpaceDescription = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=1024)]
Vector = tuple[Annotated[float, Strict()], ...]
#: the most code points of lexical text one segment carries
MAX_LEXICAL_TEXT = 16_384


class VectorSpace(WireModel):
    """One vector space an embedder owns: its identity (`id@version`) and what its vectors are."""

    id: SpaceId
    """The space's id: lowercase segments joined by dots (the embedder's package, say)."""
    version: SpaceVersion
    """Bumped whenever the vectors change (a new model, new weights, a new input template)."""
    model: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=256)]
    """The model that produces the vectors, for people and reports."""
    dimensions: Annotated[StrictInt, Field(ge=1, le=4096)]
    """How many numbers each vector holds."""
    metric: SpaceMetric
    """`cosine`, `dot` or `l2`: the distance searches in this space use."""
    description: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=1024)] | None
    ) = None
    """What the space is good for, for people."""

    @property
    def key(self) -> str:
        """The space's identity, `id@version`: vectors of another version are another space."""
        return f"{self.id}@{self.version}"


class EmbedderManifest(WireModel):
    """What an embedder declares: its spaces, its deadlines and its bounds."""

    type_id: Id
    """The embedder type's id."""
    package_name: PackageName
    """The distribution that ships it."""
    spaces: Annotated[tuple[VectorSpace, ...], Field(min_length=1, max_length=8)]
    """The spaces it owns (distinct ids)."""
    timeout_ms: Annotated[StrictInt, Field(ge=1_000, le=300_000)] = 30_000
    """The deadline of one `segment_and_embed`."""
    query_timeout_ms: Annotated[StrictInt, Field(ge=100, le=10_000)] = 2_000
    """The deadline of one `embed_query`: a search waits for it."""
    max_segments: Annotated[StrictInt, Field(ge=1, le=1_024)] = 256
    """The most segments one text yields."""
    max_batch: Annotated[StrictInt, Field(ge=1, le=1_024)] = 64
    """The most texts a host puts in one `segment_and_embed` batch."""

    @model_validator(mode="after")
    def _distinct_spaces(self) -> EmbedderManifest:
        ids = [space.id for space in self.spaces]
        if len(ids) != len(set(ids)):
            raise ValueError("spaces: each space id may appear only once")
        return self


class TextPart(WireModel):
    """One part of a text to segment: its key, its role (`title`, `body`, ...) and its text."""

    key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=128)]
    """The part's key, unique in the request; segments name it."""
    role: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=64)] = "body"
    """What the part is (`title`, `body`, ...); a `title` part allows empty segments."""
    text: Annotated[str, Strict()]
    """The part's text; segment offsets count its code points."""


class SegmentRequest(WireModel):
    """A text to cut into segments and embed in the spaces named (none: segments only)."""

    idempotency_key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
    """The same key must get the same answer: a rebuild reuses stored segments."""
    parts: Annotated[tuple[TextPart, ...], Field(min_length=1, max_length=256)]
    """The text's parts, in reading order, with distinct keys."""
    spaces: tuple[SpaceId, ...] = ()
    """The ids of the spaces to embed each segment in; empty asks for the segments alone."""
    language: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=35)] | None = None
    """A language hint (BCP 47), when known."""

    @model_validator(mode="after")
    def _distinct(self) -> SegmentRequest:
        keys = [part.key for part in self.parts]
        if len(keys) != len(set(keys)):
            raise ValueError("parts: each part key may appear only once")
        if len(self.spaces) != len(set(self.spaces)):
            raise ValueError("spaces: each space may be asked for only once")
        return self


class Segment(WireModel):
    """One segment of a part (`start`..`end` in code points) and its vector in each space."""

    part_key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=128)]
    """The part the segment is cut from."""
    start: Annotated[StrictInt, Field(ge=0)]
    """Where it starts in the part, in code points."""
    end: Annotated[StrictInt, Field(ge=0)]
    """Where it ends (exclusive), in code points."""
    vectors: dict[SpaceId, Vector] = Field(default_factory=dict)
    """One vector per space asked for, by space id."""
    lexical_text: Annotated[str, Strict()] | None = None
    """Text to index for keyword search instead of the segment's own (excerpts keep that)."""
    provenance: JsonObject | None = None
    """Stored with the segment, never interpreted."""


class SegmentAnswer(WireModel):
    """The segments of one text, in reading order."""

    segments: tuple[Segment, ...]
    """Every segment, in reading order."""


class EmbedQueryRequest(WireModel):
    """A query to encode into one space."""

    space: SpaceId
    """The id of the space to encode into."""
    text: Annotated[str, Strict(), StringConstraints(min_length=1)]
    """The query."""
    modality: Literal["text"] = "text"
    """The query's modality: text."""


class QueryVector(WireModel):
    """A query's vector in the space asked for."""

    vector: Vector
    """The vector, of the space's dimensions."""
