"""A Quivr ingestion plugin hosted as a mnemon embedder: its spaces, its two calls over HTTP.

The plugin's manifest declares the spaces it owns and its deadlines and limits; they become the
embedder's manifest, so the core routes the spaces' calls to it under the plugin's own
deadlines and judges every answer by the rules every embedder keeps. What this module adds is
the wire: each call is one POST, its answer read no further than the declared limit, parsed as
strict JSON and fitted to Quivr's response schema before the core sees it. Nothing the plugin
says is trusted beyond that: its messages never reach an error or a log line, and the secrets
the host gave it are scrubbed from what it returns.

Failures keep the contract's classes. A plugin that is down, unreachable, slow or answers a
retryable envelope is `unavailable` (retryable: a memory stays stored and found by keyword,
and its vectors follow later); a terminal envelope is a coded refusal of the vectors
(`ingestion_refused`; `query_too_long` or `unsupported_search` for a query); an answer that
breaks the contract is refused with its rules, as the core refuses one.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from mnemon_remote import AnswerTooLarge, InvalidAnswer, Redactor, decode_answer

from mnemon.sdk import (
    EmbedderDefinition,
    EmbeddingError,
    EmbedQueryRequest,
    QueryVector,
    SegmentAnswer,
    SegmentRequest,
    SourceError,
    define_embedder,
)

from ._ingestion import (
    EMBED_QUERY,
    MAX_QUERY_RESPONSE_BYTES,
    SEGMENT_AND_EMBED,
    IngestionContribution,
    decode_query_vector,
    decode_segment_answer,
    embed_query_body,
    segment_request_body,
)
from ._link import PluginLink
from ._plugin import PluginRefused, PluginUnavailable

__all__ = ["MAX_BATCH", "PACKAGE", "TYPE_ID", "QuivrEmbedder", "define_quivr_embedder"]

TYPE_ID = "quivr-ingestion"
PACKAGE = "mnemon-strategy-quivr"
#: the most texts (Parts) a host puts in one `segment_and_embed`: the core's default batch
MAX_BATCH = 64
_log = logging.getLogger("mnemon.quivr")
_Answer = TypeVar("_Answer", SegmentAnswer, QueryVector)


def define_quivr_embedder(link: PluginLink) -> EmbedderDefinition:
    """The embedder a plugin's `ingestion` Contribution is: its declared spaces, over `link`.

    Each text the host sends is one Part, so a batch holds at most `max_segments` texts (each
    yields a segment at least) and never more than `MAX_BATCH`.

    Raises:
        DefinitionError: a declared space mnemon cannot hold (named by its id).
    """
    contribution = IngestionContribution.from_manifest(link.report.manifest or {})
    embedder = QuivrEmbedder(link, contribution)
    return define_embedder(
        {
            "type_id": TYPE_ID,
            "package_name": PACKAGE,
            "spaces": [space.model_dump(exclude_none=True) for space in contribution.spaces],
            "timeout_ms": contribution.timeout_ms,
            "query_timeout_ms": contribution.query_timeout_ms,
            "max_segments": contribution.max_segments,
            "max_batch": min(MAX_BATCH, contribution.max_segments),
        },
        # the plugin's process belongs to the entry (the link), not to one generation
        lambda configuration: embedder,
    )


class QuivrEmbedder:
    """The embedder runtime of one hosted ingestion plugin: each call one POST, judged.

    Args:
        link: the plugin, launched on first use and shared with its other Contributions.
        contribution: what its manifest's `ingestion` Contribution declares.
    """

    def __init__(self, link: PluginLink, contribution: IngestionContribution) -> None:
        self._link = link
        self._contribution = contribution
        # invocation ids are unique per attempt, across host restarts too
        self._prefix = f"mnemon-{secrets.token_hex(6)}"
        self._calls = itertools.count(1)

    def __repr__(self) -> str:
        return f"QuivrEmbedder(plugin={self._link.plugin_id!r})"

    async def segment_and_embed(self, request: SegmentRequest) -> SegmentAnswer:
        """Send the texts to `segment_and_embed`; the answer, fitted to Quivr's schema.

        Raises:
            SourceError: `unavailable` (retryable) or `ingestion_refused` (the plugin's
                terminal envelope).
            EmbeddingError: `ingestion_refused` with `response_too_large` or
                `schema_violation`: the answer itself breaks the contract.
        """
        body = segment_request_body(request, invocation_id=self._invocation())
        limit = self._contribution.max_response_bytes
        raw, redactor = await self._post(SEGMENT_AND_EMBED, body, limit, _segment_refusal)
        return await self._decode(raw, redactor, decode_segment_answer, "segment_and_embed")

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        """Send one query to `embed_query`; its vector, fitted to the response schema.

        Raises:
            SourceError: `unavailable` (retryable), `query_too_long` or `unsupported_search`
                (the plugin's terminal envelope).
            EmbeddingError: `ingestion_refused` with `response_too_large` or
                `schema_violation`.
        """
        body = embed_query_body(request.space, request.text, invocation_id=self._invocation())
        limit = MAX_QUERY_RESPONSE_BYTES
        raw, redactor = await self._post(EMBED_QUERY, body, limit, _query_refusal)
        return await self._decode(raw, redactor, decode_query_vector, "embed_query")

    def _invocation(self) -> str:
        return f"{self._prefix}-{next(self._calls)}"

    async def _post(
        self,
        path: str,
        body: dict[str, Any],
        limit: int,
        refusal: Callable[[PluginRefused], SourceError],
    ) -> tuple[bytes, Redactor]:
        """The answer's bytes (2xx), and what scrubs the plugin's secrets out of it."""
        try:
            plugin = await self._link.plugin()
            return await plugin.post(path, body, max_response_bytes=limit), plugin.redactor
        except PluginUnavailable:
            raise SourceError(
                "unavailable", "the ingestion plugin is unavailable", kind="transient"
            ) from None
        except AnswerTooLarge:
            raise self._broken(path, "response_too_large") from None
        except PluginRefused as refused:
            if refused.retryable:
                raise SourceError(
                    "unavailable",
                    f"the ingestion plugin asked to retry later ({refused.code})",
                    kind="transient",
                    retry_after=refused.retry_after,
                    origin_code=refused.code,
                ) from None
            raise refusal(refused) from None

    async def _decode(
        self, raw: bytes, redactor: Redactor, build: Callable[[Any], _Answer], call: str
    ) -> _Answer:
        try:
            # strict JSON (no NaN), Quivr's schema, mnemon's model; large ones off the loop
            return await decode_answer(raw, build, redactor=redactor)
        except InvalidAnswer:
            raise self._broken(call, "schema_violation") from None

    def _broken(self, call: str, rule: str) -> EmbeddingError:
        name = self._link.plugin_id
        call = call.rsplit("/", 1)[-1]
        _log.warning("quivr plugin %s %s broke the contract: %s", name, call, rule)
        return EmbeddingError(
            f"quivr plugin {name} {call} answered against the contract ({rule})",
            code="ingestion_refused",
            retryable=False,
            rules=(rule,),
        )


def _segment_refusal(refused: PluginRefused) -> SourceError:
    """A terminal envelope to segment_and_embed: the vectors are refused, never the text."""
    return SourceError(
        "ingestion_refused",
        f"the ingestion plugin refused the text ({refused.code})",
        kind="terminal",
        origin_code=refused.code,
    )


def _query_refusal(refused: PluginRefused) -> SourceError:
    """A terminal envelope to embed_query: `query_too_long` when it says so, as Quivr maps it."""
    code = "query_too_long" if refused.code == "query_too_long" else "unsupported_search"
    return SourceError(
        code,
        f"the ingestion plugin refused the query ({refused.code})",
        kind="terminal",
        origin_code=refused.code,
    )
