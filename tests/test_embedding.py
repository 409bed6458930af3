"""Embedders: installed beside Sources, reached by them through checked, deadline-bound calls."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mnemon import DefinitionError, InstallError, MemoryHost, SourceError
from mnemon.sdk import (
    EmbedderManifest,
    Embedding,
    EmbeddingError,
    EmbedQueryRequest,
    PluginContext,
    QueryVector,
    Segment,
    SegmentAnswer,
    SegmentRequest,
    VectorSpace,
    define_embedder,
    install_memory,
    space_registration_conflict,
)
from tests.kit import Probe, fake_source, strategy_plugin

SPACE = {"id": "test.words", "version": "1", "model": "hashed-words", "dimensions": 8}
Answer = Callable[[SegmentRequest], Any]


def hashed(text: str, dimensions: int = 8) -> tuple[float, ...]:
    """A deterministic unit vector of the words of `text` (a toy embedding)."""
    vector = [0.0] * dimensions
    for word in text.lower().split():
        vector[hashlib.sha256(word.encode()).digest()[0] % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return tuple(x / norm for x in vector) if any(vector) else (1.0,) + (0.0,) * (dimensions - 1)


class WordEmbedder:
    """One segment per part, embedded by hashed words; `answer` overrides what it says."""

    def __init__(self, configuration: Any, answer: Answer | None = None) -> None:
        self.configuration = configuration
        self.answer = answer
        self.requests: list[Any] = []
        self.disposed = False

    async def segment_and_embed(self, request: SegmentRequest) -> Any:
        self.requests.append(request)
        if self.answer is not None:
            return self.answer(request)
        return SegmentAnswer(
            segments=tuple(
                Segment(
                    part_key=part.key,
                    start=0,
                    end=len(part.text),
                    vectors={space: hashed(part.text) for space in request.spaces},
                )
                for part in request.parts
            )
        )

    async def embed_query(self, request: EmbedQueryRequest) -> QueryVector:
        self.requests.append(request)
        return QueryVector(vector=hashed(request.text))

    def dispose(self) -> None:
        self.disposed = True


def embedder_plugin(
    answer: Answer | None = None, *, space: dict[str, Any] | None = None, **manifest: Any
) -> tuple[Any, list[WordEmbedder]]:
    made: list[WordEmbedder] = []

    def create(configuration: Any) -> WordEmbedder:
        made.append(WordEmbedder(configuration, answer))
        return made[-1]

    definition = define_embedder(
        {
            "type_id": "words",
            "package_name": "mnemon-test-words",
            "spaces": [{"metric": "cosine", **(space or SPACE)}],
            **manifest,
        },
        create,
    )

    class Plugin:
        def apply(self, ctx: PluginContext) -> None:
            install_memory(ctx, embedders=[definition])

    return Plugin(), made


async def _embedding(host: MemoryHost, probe: Probe) -> Embedding:
    async with host.turn():
        pass
    embedding = probe.inits[-1].embedding
    assert isinstance(embedding, Embedding)
    return embedding


async def test_a_source_reaches_the_installed_embedder_through_checked_calls() -> None:
    source, probe = fake_source()
    plugin, made = embedder_plugin()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(plugin, instance_id="words", config={"threads": 1})
        await host.mount(strategy_plugin(), instance_id="strategy")
        embedding = await _embedding(host, probe)
        assert [space.key for space in embedding.spaces] == ["test.words@1"]
        answer = await embedding.segment_and_embed(
            {
                "idempotency_key": "m1",
                "parts": [{"key": "text", "text": "Ada prefers tea"}],
                "spaces": ["test.words"],
            }
        )
        vector = await embedding.embed_query("test.words", "tea for Ada")
        report = host.inspect()
    assert answer.segments[0].vectors["test.words"] == hashed("Ada prefers tea")
    assert vector == hashed("tea for Ada")
    assert dict(made[-1].configuration) == {"threads": 1}
    assert report["serving"]["embedders"] == [
        {
            "key": "embedder:words",
            "type_id": "words",
            "package_name": "mnemon-test-words",
            "spaces": ["test.words@1"],
        }
    ]
    assert made[-1].disposed  # with the host, after the Sources that used it


async def test_without_an_embedder_a_source_gets_none() -> None:
    source, probe = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn():
            pass
    assert probe.inits[-1].embedding is None


async def test_installing_an_embedder_makes_a_new_generation_of_sources() -> None:
    source, probe = fake_source()
    plugin, _ = embedder_plugin()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(strategy_plugin(), instance_id="strategy")
        async with host.turn() as turn:
            before = turn.view.generation_id
        unmount = await host.mount(plugin, instance_id="words")
        async with host.turn() as turn:
            embedded = turn.view.generation_id
        assert embedded != before
        assert isinstance(probe.inits[-1].embedding, Embedding)
        await unmount()
        async with host.turn() as turn:
            assert turn.view.generation_id not in (before, embedded)
        assert probe.inits[-1].embedding is None


async def test_two_embedders_declaring_one_space_are_refused() -> None:
    first, _ = embedder_plugin()
    second, _ = embedder_plugin()
    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(first, instance_id="one")
        with pytest.raises(InstallError, match=r"space_owner_conflict: vector space 'test\.words'"):
            await host.mount(second, instance_id="two")
        await host.mount(strategy_plugin(), instance_id="strategy")
        # the first owner is kept, the whole second batch refused
        assert host.inspect()["entries"] == ["a", "one", "strategy"]
        assert [e["key"] for e in host.inspect()["serving"]["embedders"]] == ["embedder:one"]


def _segments(**changes: Any) -> Answer:
    def answer(request: SegmentRequest) -> Any:
        segment: dict[str, Any] = {
            "part_key": request.parts[0].key,
            "start": 0,
            "end": len(request.parts[0].text),
            "vectors": {space: list(hashed(request.parts[0].text)) for space in request.spaces},
        }
        if "segments" in changes:
            return {"segments": changes["segments"](segment)}
        return {"segments": [{**segment, **changes}]}

    return answer


@pytest.mark.parametrize(
    ("answer", "rules"),
    [
        (_segments(vectors={"test.words": [0.5] * 7}), ("dimension_mismatch",)),
        (_segments(vectors={"test.words": [math.nan] + [0.1] * 7}), ("invalid_vector",)),
        (_segments(vectors={"test.words": [1e39] + [0.1] * 7}), ("invalid_vector",)),
        (_segments(vectors={"test.words": [0.0] * 8}), ("invalid_vector",)),
        (_segments(vectors={}), ("missing_vector",)),
        (
            _segments(vectors={"test.words": [0.5] * 8, "other.space": [0.5] * 8}),
            ("unrequested_space",),
        ),
        (_segments(part_key="nowhere"), ("unknown_part_key",)),
        (_segments(end=10_000), ("offset_out_of_range",)),
        (_segments(start=3, end=3), ("empty_segment",)),
        (_segments(segments=lambda s: [s, s]), ("duplicate_segment",)),
        (
            _segments(segments=lambda s: [{**s, "end": i + 1} for i in range(5)]),
            ("too_many_segments",),
        ),
        (_segments(lexical_text="nul\x00inside"), ("invalid_lexical_text",)),
        (_segments(lexical_text="x" * 16_385), ("lexical_text_too_large",)),
        (_segments(provenance={"blob": "x" * 5_000}), ("provenance_too_large",)),
        (lambda request: {"segments": "nope"}, ("schema_violation",)),
        (
            lambda request: {
                "segments": [
                    {
                        "part_key": "text",
                        "start": 0,
                        "end": 1,
                        "vectors": {"test.words": ["0.1"] * 8},
                    }
                ]
            },
            ("schema_violation",),
        ),
    ],
    ids=[
        "dimensions",
        "nan",
        "past-float32",
        "zero-under-cosine",
        "missing-vector",
        "unrequested-space",
        "unknown-part",
        "offset",
        "empty-without-title",
        "duplicate",
        "too-many",
        "nul-in-lexical-text",
        "lexical-text-too-large",
        "provenance-too-large",
        "shape",
        "strings-for-numbers",
    ],
)
async def test_an_answer_breaking_the_contract_is_refused_with_its_rule(
    answer: Answer, rules: tuple[str, ...]
) -> None:
    source, probe = fake_source()
    plugin, _ = embedder_plugin(answer, max_segments=4)
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(plugin, instance_id="words")
        await host.mount(strategy_plugin(), instance_id="strategy")
        embedding = await _embedding(host, probe)
        with pytest.raises(EmbeddingError) as caught:
            await embedding.segment_and_embed(
                SegmentRequest(
                    idempotency_key="k",
                    parts=({"key": "text", "text": "Ada prefers tea"},),
                    spaces=("test.words",),
                )
            )
    assert (caught.value.code, caught.value.rules, caught.value.retryable) == (
        "ingestion_refused",
        rules,
        False,
    )


async def test_an_empty_segment_is_allowed_beside_a_title() -> None:
    answer = _segments(start=0, end=0)
    source, probe = fake_source()
    plugin, _ = embedder_plugin(answer)
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        await host.mount(plugin, instance_id="words")
        await host.mount(strategy_plugin(), instance_id="strategy")
        embedding = await _embedding(host, probe)
        checked = await embedding.segment_and_embed(
            {
                "idempotency_key": "k",
                "parts": [{"key": "title", "role": "title", "text": ""}, {"key": "b", "text": "x"}],
                "spaces": ["test.words"],
            }
        )
    assert checked.segments[0].start == checked.segments[0].end == 0


class _Failing:
    def __init__(self, failure: BaseException | None = None, hang: bool = False) -> None:
        self.failure = failure
        self.hang = hang

    async def segment_and_embed(self, request: Any) -> Any:
        if self.hang:
            await anyio.sleep_forever()
        assert self.failure is not None
        raise self.failure

    async def embed_query(self, request: Any) -> Any:
        return await self.segment_and_embed(request)


@pytest.mark.parametrize(
    ("runtime", "code", "retryable"),
    [
        (
            _Failing(SourceError("rate_limited", "quota of key-SECRET-1 used", retry_after=7)),
            "rate_limited",
            True,
        ),
        (_Failing(SourceError("invalid_payload", "no")), "invalid_payload", False),
        (
            _Failing(RuntimeError("cannot reach http://user:key-SECRET-1@x")),
            "embedder_failed",
            True,
        ),
        (_Failing(hang=True), "timeout", True),
    ],
    ids=["transient", "terminal", "crash", "hang"],
)
async def test_a_failing_embedder_gives_a_coded_error_and_no_text_of_its_own(
    runtime: Any, code: str, retryable: bool
) -> None:
    definition = define_embedder(
        {
            "type_id": "failing",
            "package_name": "mnemon-test-failing",
            "spaces": [{**SPACE, "metric": "dot"}],
            "query_timeout_ms": 100,
            "timeout_ms": 1_000,
        },
        lambda configuration: runtime,
    )
    embedding = Embedding([(definition.manifest, runtime)])
    with pytest.raises(EmbeddingError) as caught:
        await embedding.embed_query("test.words", "tea")
    assert (caught.value.code, caught.value.retryable) == (code, retryable)
    assert caught.value.retry_after == (7.0 if code == "rate_limited" else None)
    assert "SECRET" not in str(caught.value)


async def test_an_embedders_own_refusal_of_its_wire_reaches_the_source_as_it_is() -> None:
    # an embedder served over HTTP refuses an answer too large to read before the host sees it
    refusal = EmbeddingError(
        "the answer broke the contract",
        code="ingestion_refused",
        retryable=False,
        rules=["response_too_large"],
    )
    runtime = _Failing(refusal)
    definition = define_embedder(
        {
            "type_id": "wire",
            "package_name": "mnemon-test-wire",
            "spaces": [{**SPACE, "metric": "dot"}],
        },
        lambda configuration: runtime,
    )
    embedding = Embedding([(definition.manifest, runtime)])
    with pytest.raises(EmbeddingError) as caught:
        await embedding.segment_and_embed(
            {
                "idempotency_key": "k",
                "parts": [{"key": "p", "text": "tea"}],
                "spaces": ["test.words"],
            }
        )
    assert caught.value is refusal
    assert caught.value.rules == ("response_too_large",)


async def test_the_callers_cancellation_is_never_an_embedder_failure() -> None:
    definition = define_embedder(
        {
            "type_id": "hang",
            "package_name": "mnemon-test-hang",
            "spaces": [{**SPACE, "metric": "dot"}],
        },
        lambda configuration: _Failing(hang=True),
    )
    embedding = Embedding([(definition.manifest, _Failing(hang=True))])
    with anyio.move_on_after(0.05) as scope:
        await embedding.embed_query("test.words", "tea")
    assert scope.cancelled_caught


async def test_requests_name_installed_spaces_of_one_owner() -> None:
    first = define_embedder(
        {"type_id": "a", "package_name": "mnemon-test-a", "spaces": [{**SPACE, "metric": "dot"}]},
        lambda configuration: WordEmbedder(configuration),
    )
    second = define_embedder(
        {
            "type_id": "b",
            "package_name": "mnemon-test-b",
            "spaces": [{**SPACE, "id": "test.other", "metric": "dot"}],
        },
        lambda configuration: WordEmbedder(configuration),
    )
    embedding = Embedding([(first.manifest, WordEmbedder({})), (second.manifest, WordEmbedder({}))])
    with pytest.raises(EmbeddingError) as unknown:
        await embedding.embed_query("test.nowhere", "tea")
    with pytest.raises(EmbeddingError) as mixed:
        await embedding.segment_and_embed(
            {
                "idempotency_key": "k",
                "parts": [{"key": "text", "text": "tea"}],
                "spaces": ["test.words", "test.other"],
            }
        )
    assert unknown.value.code == "unknown_space"
    assert mixed.value.code == "space_owner_conflict"
    with pytest.raises(DefinitionError, match="space_owner_conflict"):
        Embedding([(first.manifest, WordEmbedder({})), (first.manifest, WordEmbedder({}))])


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"spaces": []}, "spaces"),
        ({"spaces": [{**SPACE, "metric": "cosine"}, {**SPACE, "metric": "dot"}]}, "only once"),
        ({"spaces": [{**SPACE, "id": "Not.Valid", "metric": "dot"}]}, r"spaces\[0\]\.id"),
        ({"spaces": [{**SPACE, "metric": "manhattan"}]}, r"spaces\[0\]\.metric"),
        ({"spaces": [{**SPACE, "metric": "dot", "dimensions": 0}]}, r"spaces\[0\]\.dimensions"),
        ({"spaces": [{**SPACE, "metric": "dot", "version": "1 2"}]}, r"spaces\[0\]\.version"),
    ],
    ids=["no-space", "twice", "bad-id", "bad-metric", "no-dimensions", "bad-version"],
)
def test_a_bad_embedder_manifest_names_the_field(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        define_embedder(
            {"type_id": "x", "package_name": "mnemon-test-x", **manifest},
            lambda configuration: None,
        )


async def test_a_synchronous_embedder_is_refused_when_it_is_mounted() -> None:
    class Blocking:
        def segment_and_embed(self, request: Any) -> Any:
            return None

        async def embed_query(self, request: Any) -> Any:
            return None

    definition = define_embedder(
        {
            "type_id": "sync",
            "package_name": "mnemon-test-sync",
            "spaces": [{**SPACE, "metric": "dot"}],
        },
        lambda configuration: Blocking(),
    )

    class Plugin:
        def apply(self, ctx: PluginContext) -> None:
            install_memory(ctx, embedders=[definition])

    source, _ = fake_source()
    async with MemoryHost() as host:
        await host.mount(source, instance_id="a")
        with pytest.raises(Exception, match=r"segment_and_embed\(\) must be an async function"):
            await host.mount(Plugin(), instance_id="sync")


def test_a_space_registered_under_one_version_keeps_its_model() -> None:
    registered = VectorSpace(**{**SPACE, "metric": "cosine"})
    assert space_registration_conflict(registered, registered) is None
    for change in ({"model": "other"}, {"dimensions": 16}, {"metric": "dot"}):
        changed = VectorSpace(**{**SPACE, "metric": "cosine", **change})
        assert space_registration_conflict(registered, changed) == "space_changed"
    bumped = VectorSpace(**{**SPACE, "metric": "cosine", "model": "other", "version": "2"})
    assert space_registration_conflict(registered, bumped) is None  # another space
    assert bumped.key == "test.words@2"
    assert EmbedderManifest.model_fields["max_batch"].default == 64
