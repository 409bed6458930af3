"""A probe for embedder authors: the `Embedding` a Source gets, reached as a Source reaches it."""

from __future__ import annotations

from typing import Any

from mnemon.sdk import (
    Embedding,
    FactsRequest,
    PluginContext,
    ProjectionRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    define_memory_source,
    install_memory,
)

__all__ = ["EmbeddingProbe"]


class _Quiet:
    """A Source that is ready and shows nothing: it is only there to receive `init.embedding`."""

    def __init__(self, key: str) -> None:
        self._key = key

    async def facts(self, request: FactsRequest) -> SourceFacts:
        return SourceFacts(
            instance_key=self._key,
            type_id="embedding-probe",
            role="notes",
            availability="ready",
            capabilities=("project",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        return ViewContribution()


class EmbeddingProbe:
    """A plugin with one quiet Source that keeps what its factory got: `init.embedding`.

    Mount it beside your embedder (and a Strategy, such as `SelectAll`), open one turn, and
    test your embedder through `probe.embedding`, exactly as a Source reaches it: every call
    routed to its space's owner under its deadline, every answer checked by the core.
    """

    def __init__(self) -> None:
        self.embeddings: list[Any] = []
        self._definition = define_memory_source(
            {
                "type_id": "embedding-probe",
                "package_name": "mnemon-testing",
                "role": "notes",
                "capabilities": ["project"],
                "consistency": "exact-snapshot",
            },
            self._create,
        )

    def apply(self, ctx: PluginContext) -> None:
        """Install the quiet Source."""
        install_memory(ctx, sources=[self._definition])

    @property
    def embedding(self) -> Embedding:
        """What the newest generation's Source got.

        Raises:
            AssertionError: no Source was made yet, or no embedder was installed beside it.
        """
        assert self.embeddings, "no generation was built yet: open a turn first"
        embedding = self.embeddings[-1]
        assert isinstance(embedding, Embedding), "no embedder is installed beside the probe"
        return embedding

    def _create(self, init: SourceInit) -> _Quiet:
        self.embeddings.append(init.embedding)
        return _Quiet(init.instance_key)
