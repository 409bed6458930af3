"""Quivr's ingestion Contribution on the wire: its requests built, its answers judged.

mnemon's embedder contract has Quivr's ingestion shape (`SegmentRequest`, `SegmentAnswer`,
`QueryVector`), so a Quivr plugin's answer becomes mnemon's model once it fits Quivr's response
schema; the rules it must then keep are the core's own `check_segment_answer` and
`check_query_vector`, the functions every embedder's answers are judged by. The hosted
embedder and the contract runner both decode with this module and judge with those functions:
there is no second copy of the rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mnemon.sdk import (
    DefinitionError,
    QueryVector,
    SegmentAnswer,
    SegmentRequest,
    VectorSpace,
    check_query_vector,
    check_segment_answer,
)

from ._schemas import (
    query_request_validator,
    query_response_validator,
    segment_request_validator,
    segment_response_validator,
)

__all__ = [
    "EMBED_QUERY",
    "MAX_QUERY_RESPONSE_BYTES",
    "MAX_SEGMENT_RESPONSE_BYTES",
    "SEGMENT_AND_EMBED",
    "IngestionContribution",
    "answer_segments",
    "check_embed_query_request",
    "check_segment_request",
    "decode_query_vector",
    "decode_segment_answer",
    "embed_query_body",
    "judge_query_vector",
    "judge_segment_answer",
    "segment_request_body",
    "segment_request_from_body",
]

SEGMENT_AND_EMBED = "/v0/contributions/ingestion/segment_and_embed"
EMBED_QUERY = "/v0/contributions/ingestion/embed_query"
#: the most of a segment_and_embed answer anyone reads (a manifest may declare less)
MAX_SEGMENT_RESPONSE_BYTES = 16 * 1024 * 1024
#: the most of an embed_query answer anyone reads
MAX_QUERY_RESPONSE_BYTES = 1024 * 1024
#: the longest idempotency key the wire admits; a longer one of mnemon's is sent hashed
MAX_IDEMPOTENCY_KEY = 256
_LANGUAGE = re.compile(r"^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$")


@dataclass(frozen=True)
class IngestionContribution:
    """What a manifest's `ingestion` Contribution declares, with Quivr's defaults.

    Attributes:
        spaces: every declared space, in the manifest's order, as mnemon's `VectorSpace`.
        timeout_ms: the deadline of one `segment_and_embed`.
        query_timeout_ms: the deadline of one `embed_query`.
        max_segments: the most segments one request may yield.
        max_response_bytes: the most of one `segment_and_embed` answer read (16 MiB at most).
    """

    spaces: tuple[VectorSpace, ...]
    timeout_ms: int = 30_000
    query_timeout_ms: int = 2_000
    max_segments: int = 256
    max_response_bytes: int = MAX_SEGMENT_RESPONSE_BYTES

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> IngestionContribution:
        """The Contribution a (valid) manifest declares.

        Raises:
            DefinitionError: a declared space mnemon cannot hold, named by its id.
        """
        declared = manifest["contributions"]["ingestion"]
        spaces = []
        for space_id, space in declared["spaces"].items():
            fields = {key: space[key] for key in ("version", "model", "dimensions", "metric")}
            if "description" in space:
                fields["description"] = space["description"]
            try:
                spaces.append(VectorSpace.model_validate({"id": space_id, **fields}))
            except ValueError:
                # Quivr's and mnemon's space grammars agree; this is a manifest not inspected
                raise DefinitionError(
                    f"contributions.ingestion.spaces.{space_id}: not a vector space mnemon holds"
                ) from None
        limits = declared.get("limits") or {}
        return cls(
            spaces=tuple(spaces),
            timeout_ms=int(declared.get("timeout_ms", 30_000)),
            query_timeout_ms=int(declared.get("query_timeout_ms", 2_000)),
            max_segments=int(limits.get("max_segments", 256)),
            max_response_bytes=min(
                int(limits.get("max_response_bytes", MAX_SEGMENT_RESPONSE_BYTES)),
                MAX_SEGMENT_RESPONSE_BYTES,
            ),
        )

    def space(self, space_id: str) -> VectorSpace | None:
        """The declared space with this id, or None."""
        return next((space for space in self.spaces if space.id == space_id), None)

    def spaces_of(self, request: SegmentRequest) -> dict[str, VectorSpace]:
        """The declared spaces a request names, by id (an undeclared one is left out)."""
        found = {space_id: self.space(space_id) for space_id in request.spaces}
        return {space_id: space for space_id, space in found.items() if space is not None}


def _wire_key(key: str) -> str:
    # mnemon's keys may be longer than the wire's; a hash stays stable across retries
    if len(key) <= MAX_IDEMPOTENCY_KEY:
        return key
    return "mnemon-sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def segment_request_body(
    request: SegmentRequest,
    *,
    invocation_id: str,
    organization_id: str = "mnemon",
    configuration: Mapping[str, Any] | None = None,
    version: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `segment_and_embed` request a plugin receives for mnemon's `request`.

    A text mnemon embeds is no Quivr Record Version: unless `version` is given, its identity
    (informational to the plugin) is derived from the idempotency key. A language hint Quivr's
    grammar does not admit is left out.
    """
    key = _wire_key(request.idempotency_key)
    if version is None:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        version = {
            "corpus_id": organization_id,
            "record_id": f"{organization_id}-record-{digest}",
            "record_version_id": f"{organization_id}-version-{digest}",
        }
    body: dict[str, Any] = {
        "invocation_id": invocation_id,
        "idempotency_key": key,
        "contribution": "ingestion",
        "organization_id": organization_id,
        "configuration": dict(configuration or {}),
        "version": dict(version),
        "parts": [{"key": p.key, "role": p.role, "text": p.text} for p in request.parts],
        "spaces": list(request.spaces),
    }
    if request.language is not None and _LANGUAGE.match(request.language):
        body["language"] = request.language
    return body


def segment_request_from_body(body: Mapping[str, Any]) -> SegmentRequest:
    """The `SegmentRequest` a (schema-valid) `segment_and_embed` request is, to judge answers by.

    Raises:
        DefinitionError: the request exceeds what mnemon's model admits (a Part key over 128
            characters, a role over 64, a repeated key).
    """
    value: dict[str, Any] = {
        "idempotency_key": body["idempotency_key"],
        "parts": [{"key": p["key"], "role": p["role"], "text": p["text"]} for p in body["parts"]],
        "spaces": list(body["spaces"]),
    }
    if "language" in body:
        value["language"] = body["language"]
    try:
        return SegmentRequest.model_validate(value)
    except ValueError:
        # pydantic's message would quote the request's text
        raise DefinitionError(
            "the request exceeds mnemon's segment request (parts, keys, roles or spaces)"
        ) from None


def embed_query_body(
    space: str,
    text: str,
    *,
    invocation_id: str,
    organization_id: str = "mnemon",
    configuration: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `embed_query` request a plugin receives to encode `text` into `space`."""
    return {
        "invocation_id": invocation_id,
        "contribution": "ingestion",
        "organization_id": organization_id,
        "configuration": dict(configuration or {}),
        "space": space,
        "query": {"modality": "text", "text": text},
    }


def check_segment_request(body: Any) -> frozenset[str]:
    """The codes a `segment_and_embed` request breaks: `schema_violation`, or none."""
    valid = segment_request_validator().is_valid(body)
    return frozenset() if valid else frozenset({"schema_violation"})


def check_embed_query_request(body: Any) -> frozenset[str]:
    """The codes an `embed_query` request breaks: `schema_violation`, or none."""
    valid = query_request_validator().is_valid(body)
    return frozenset() if valid else frozenset({"schema_violation"})


def decode_segment_answer(value: Any) -> SegmentAnswer:
    """A `segment_and_embed` answer (parsed JSON) as mnemon's model.

    Raises:
        ValueError: it does not fit Quivr's response schema (as far as the Plugin API versions
            mnemon speaks go) or mnemon's model; the message quotes nothing of it.
    """
    if not segment_response_validator().is_valid(value):
        raise ValueError("the answer does not fit the segment_and_embed response schema")
    try:
        return SegmentAnswer.model_validate(value)
    except ValueError:
        # pydantic's message may quote the answer
        raise ValueError("the answer does not fit mnemon's segment model") from None


def decode_query_vector(value: Any) -> QueryVector:
    """An `embed_query` answer (parsed JSON) as mnemon's model.

    Raises:
        ValueError: it does not fit the response schema or mnemon's model.
    """
    if not query_response_validator().is_valid(value):
        raise ValueError("the answer does not fit the embed_query response schema")
    try:
        return QueryVector.model_validate(value)
    except ValueError:
        raise ValueError("the answer does not fit mnemon's query vector model") from None


def _parsed(answer: bytes | str | Mapping[str, Any]) -> tuple[Any, int]:
    if isinstance(answer, Mapping):
        return answer, len(orjson.dumps(dict(answer)))
    raw = answer.encode("utf-8") if isinstance(answer, str) else bytes(answer)
    # strict JSON, as the host reads it: NaN and Infinity are no numbers
    return orjson.loads(raw), len(raw)


def judge_segment_answer(
    answer: bytes | str | Mapping[str, Any],
    request: SegmentRequest,
    contribution: IngestionContribution,
) -> tuple[frozenset[str], SegmentAnswer | None]:
    """The exact set of rule codes a `segment_and_embed` answer breaks, and the answer.

    `response_too_large` past the manifest's `max_response_bytes`; `schema_violation` alone
    when the answer is not JSON or does not fit the response schema; otherwise every code
    `check_segment_answer` (the core's) reports against the request and the declared spaces.
    """
    try:
        value, size = _parsed(answer)
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return frozenset({"schema_violation"}), None
    codes: set[str] = set()
    if size > contribution.max_response_bytes:
        codes.add("response_too_large")
    try:
        decoded = decode_segment_answer(value)
    except ValueError:
        return frozenset(codes | {"schema_violation"}), None
    spaces = contribution.spaces_of(request)
    codes.update(check_segment_answer(request, decoded, spaces, contribution.max_segments))
    return frozenset(codes), decoded


def judge_query_vector(
    answer: bytes | str | Mapping[str, Any], space: VectorSpace
) -> tuple[frozenset[str], QueryVector | None]:
    """The exact set of rule codes an `embed_query` answer breaks, and the vector.

    `response_too_large` past 1 MiB; `schema_violation` alone when the answer is not JSON or
    does not fit the response schema; otherwise the codes `check_query_vector` (the core's)
    reports for the space.
    """
    try:
        value, size = _parsed(answer)
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return frozenset({"schema_violation"}), None
    codes: set[str] = set()
    if size > MAX_QUERY_RESPONSE_BYTES:
        codes.add("response_too_large")
    try:
        decoded = decode_query_vector(value)
    except ValueError:
        return frozenset(codes | {"schema_violation"}), None
    codes.update(check_query_vector(space, decoded))
    return frozenset(codes), decoded


def answer_segments(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each segment of an answer without its vectors: what a segments-only answer repeats."""
    return [
        {key: value for key, value in segment.items() if key != "vectors"}
        for segment in answer.get("segments", [])
    ]
