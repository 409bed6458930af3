"""The MiniLM embedder on the real model, reached the way a Source reaches it: `init.embedding`."""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
import textwrap
import threading
import weakref
from collections.abc import AsyncIterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import mnemon_embedder_minilm
import pytest
from mnemon_embedder_minilm import MINILM, SPACE_ID
from mnemon_embedder_minilm._embedder import MiniLMEmbedder
from mnemon_embedder_minilm._model import LoadedModel, installed_weights, load_model
from mnemon_embedder_minilm._settings import read_settings

from mnemon import DefinitionError, InstallError, MemoryHost, SourceError, TextPart
from mnemon.sdk import Embedding, EmbeddingError, Segment, SegmentRequest, check_segment_answer
from mnemon_testing import EmbeddingProbe, SelectAll

HEAVY = ("numpy", "onnxruntime", "tokenizers")
CAT = "The cat sits on the mat."
FELINE = "A feline rests on a rug."
REVENUE = "Quarterly revenue rose 4%."
SENTENCE = "Entry {}: Ada moved the meeting about the quarterly budget to Thursday afternoon."


@pytest.fixture(scope="module")
async def host() -> AsyncIterator[tuple[MemoryHost, Embedding]]:
    """One host for the module: the model loads once, on the first test's first call."""
    probe = EmbeddingProbe()
    async with MemoryHost() as memory:
        await memory.mount(probe, instance_id="probe")
        await memory.mount(mnemon_embedder_minilm, instance_id="minilm")
        await memory.mount(SelectAll(), instance_id="strategy")
        async with memory.turn():
            pass
        yield memory, probe.embedding


@pytest.fixture
def embedding(host: tuple[MemoryHost, Embedding]) -> Embedding:
    return host[1]


def minilm(configuration: dict[str, Any]) -> MiniLMEmbedder:
    """A runtime made by the definition's factory, as a host makes it."""
    made = MINILM.create(configuration)
    assert isinstance(made, MiniLMEmbedder)
    return made


def request(*texts: str, spaces: Sequence[str] = (SPACE_ID,)) -> SegmentRequest:
    return SegmentRequest(
        idempotency_key="k",
        parts=tuple(TextPart(key=f"p{index}", text=text) for index, text in enumerate(texts)),
        spaces=tuple(spaces),
    )


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # unit vectors


def bounds(segments: Sequence[Segment], key: str) -> list[tuple[int, int]]:
    return [(segment.start, segment.end) for segment in segments if segment.part_key == key]


def assert_tiles(cuts: list[tuple[int, int]], text: str) -> None:
    """The cuts cover `text` from its first code point to its last, without gap or overlap."""
    assert cuts[0][0] == 0
    assert cuts[-1][1] == len(text)
    assert all(start < end for start, end in cuts)
    assert all(left[1] == right[0] for left, right in pairwise(cuts))


async def test_minilm_serves_one_cosine_space_through_a_host(
    host: tuple[MemoryHost, Embedding],
) -> None:
    memory, embedding = host
    [space] = embedding.spaces
    assert (space.key, space.model, space.dimensions, space.metric) == (
        "minilm.all-minilm-l6-v2@1",
        "sentence-transformers/all-MiniLM-L6-v2 (ONNX, int8 weights)",
        384,
        "cosine",
    )
    assert memory.inspect()["serving"]["embedders"] == [
        {
            "key": "embedder:minilm",
            "type_id": "minilm",
            "package_name": "mnemon-embedder-minilm",
            "spaces": ["minilm.all-minilm-l6-v2@1"],
        }
    ]
    assert mnemon_embedder_minilm.memory_plugin.roles == ("embedder",)
    assert [item.id for item in mnemon_embedder_minilm.memory_plugin.provides] == ["embedding"]


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedding: Embedding) -> None:
    cat, feline, revenue = [
        await embedding.embed_query(SPACE_ID, t) for t in (CAT, FELINE, REVENUE)
    ]
    assert len(cat) == 384
    assert math.isclose(math.sqrt(cosine(cat, cat)), 1.0, abs_tol=1e-5)
    # measured: 0.555 and -0.021
    assert cosine(cat, feline) > cosine(cat, revenue) + 0.3
    assert cosine(cat, feline) > cosine(feline, revenue) + 0.3


async def test_a_text_batched_with_others_gets_the_vector_it_gets_alone(
    embedding: Embedding,
) -> None:
    texts = (CAT, FELINE, REVENUE, "x", SENTENCE.format(1) * 3)
    batched = await embedding.segment_and_embed(request(*texts))
    one_by_one = minilm({"batch": 1, "threads": 1})
    alone = Embedding([(MINILM.manifest, one_by_one)])
    for index, text in enumerate(texts):
        [segment] = [s for s in batched.segments if s.part_key == f"p{index}"]
        [single] = (await alone.segment_and_embed(request(text))).segments
        query = await embedding.embed_query(SPACE_ID, text)
        for other in (single.vectors[SPACE_ID], query):
            difference = max(
                abs(a - b) for a, b in zip(segment.vectors[SPACE_ID], other, strict=True)
            )
            assert difference <= 1e-6, (text, difference)
    one_by_one.dispose()


async def test_a_short_part_is_one_segment_and_an_empty_part_none(embedding: Embedding) -> None:
    segments_only = SegmentRequest(
        idempotency_key="k",
        parts=(
            TextPart(key="title", role="title", text=""),
            TextPart(key="body", text=CAT),
            TextPart(key="blank", text="   "),
        ),
    )
    answer = await embedding.segment_and_embed({**segments_only.model_dump(), "spaces": [SPACE_ID]})
    assert [(s.part_key, s.start, s.end) for s in answer.segments] == [
        ("body", 0, len(CAT)),
        ("blank", 0, 3),  # whitespace still has a vector ([CLS] and [SEP])
    ]
    # the facade asks for at least one space; the runtime answers segments alone without any
    runtime = minilm({})
    alone = await runtime.segment_and_embed(segments_only)
    assert check_segment_answer(segments_only, alone, {}, MINILM.manifest.max_segments) == ()
    assert [(s.part_key, s.start, s.end, dict(s.vectors)) for s in alone.segments] == [
        ("body", 0, len(CAT), {}),
        ("blank", 0, 3, {}),
    ]
    runtime.dispose()


async def test_a_long_text_is_cut_into_windows_that_cover_it(embedding: Embedding) -> None:
    text = " ".join(SENTENCE.format(index) for index in range(120))
    answer = await embedding.segment_and_embed(request(text, CAT))
    cuts = bounds(answer.segments, "p0")
    assert len(cuts) > 1
    assert_tiles(cuts, text)
    assert bounds(answer.segments, "p1") == [(0, len(CAT))]
    # every window is at most 254 word pieces ([CLS] and [SEP] make 256), and no piece is cut
    pieces = load_model(1).pieces(text)
    held = [[p for p in pieces if start <= p[0] and p[1] <= end] for start, end in cuts]
    assert all(0 < len(inside) <= 254 for inside in held)
    assert sum(map(len, held)) == len(pieces)
    # each window's vector is its own text's
    for segment in answer.segments[:2]:
        alone = await embedding.embed_query(SPACE_ID, text[segment.start : segment.end])
        assert (
            max(abs(a - b) for a, b in zip(segment.vectors[SPACE_ID], alone, strict=True)) <= 1e-6
        )


async def test_offsets_count_code_points_in_non_ascii_text(embedding: Embedding) -> None:
    words = "Café 😀👍🏽 naïve crème"
    pieces = load_model(1).pieces(words)
    assert {words[start:end] for start, end in pieces} >= {"Café", "😀👍🏽", "naïve", "cr", "ème"}
    # cuts land on word starts only if offsets are code points (bytes or UTF-16 units would
    # drift further with every emoji and accent)
    text = "naïve café 😀👍🏽 crème brûlée " * 150
    answer = await embedding.segment_and_embed(request(text))
    cuts = bounds(answer.segments, "p0")
    assert len(cuts) > 2
    assert_tiles(cuts, text)
    for start, _ in cuts[1:]:
        assert text[start - 1] == " ", text[start - 5 : start + 5]
        assert text[start] != " ", text[start - 5 : start + 5]


async def test_a_lone_surrogate_keeps_its_place(embedding: Embedding) -> None:
    text = "tea \ud800 time " * 200  # a code point the tokenizer cannot take as it is
    answer = await embedding.segment_and_embed(request(text))
    assert_tiles(bounds(answer.segments, "p0"), text)


async def test_a_text_needing_too_many_segments_is_refused(embedding: Embedding) -> None:
    with pytest.raises(EmbeddingError) as caught:
        await embedding.segment_and_embed(request("word " * 70_000))  # 276 windows
    assert (caught.value.code, caught.value.retryable) == ("text_too_long", False)


def test_importing_and_mounting_loads_no_model(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import anyio
        import mnemon_embedder_minilm
        from mnemon import MemoryHost
        from mnemon.sdk import SourceFacts, ViewContribution, define_memory_source, install_memory
        from mnemon_testing import EmbeddingProbe, SelectAll

        HEAVY = ("numpy", "onnxruntime", "tokenizers")
        embeddings = []

        class Quiet:
            async def facts(self, request):
                return SourceFacts(instance_key="probe", type_id="probe", role="notes",
                                   availability="ready", capabilities=("project",))

            async def project(self, request):
                return ViewContribution()

        def create(init):
            embeddings.append(init.embedding)
            return Quiet()

        source = define_memory_source(
            {"type_id": "probe", "package_name": "probe", "role": "notes",
             "capabilities": ["project"], "consistency": "exact-snapshot"},
            create,
        )

        class Probe:
            def apply(self, ctx):
                install_memory(ctx, sources=[source])

        async def main():
            seen = {"imported": [m for m in HEAVY if m in sys.modules]}
            async with MemoryHost() as host:
                await host.mount(Probe(), instance_id="probe")
                await host.mount(mnemon_embedder_minilm, instance_id="minilm")
                await host.mount(SelectAll(), instance_id="strategy")
                async with host.turn():
                    pass
                seen["mounted"] = [m for m in HEAVY if m in sys.modules]
                await embeddings[-1].embed_query(mnemon_embedder_minilm.SPACE_ID, "tea")
                seen["used"] = [m for m in HEAVY if m in sys.modules]
            print(json.dumps(seen))

        anyio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"imported": [], "mounted": [], "used": list(HEAVY)}


def tampered_copy(folder: Path) -> Path:
    weights = bytearray(installed_weights().read_bytes())
    weights[len(weights) // 2] ^= 0xFF
    tampered = folder / "model.onnx"
    tampered.write_bytes(weights)
    return tampered


def test_weights_other_than_the_pinned_ones_are_refused(tmp_path: Path) -> None:
    faithful = tmp_path / "faithful.onnx"
    faithful.write_bytes(installed_weights().read_bytes())
    assert isinstance(load_model(1, faithful), LoadedModel)  # a copy is fine: its bytes count
    with pytest.raises(SourceError) as caught:
        load_model(1, tampered_copy(tmp_path))
    assert (caught.value.code, caught.value.kind, caught.value.retryable) == (
        "model_checksum_mismatch",
        "terminal",
        False,
    )


async def test_a_source_gets_the_refusal_as_a_terminal_coded_error(tmp_path: Path) -> None:
    runtime = MiniLMEmbedder(read_settings({}), weights=tampered_copy(tmp_path))
    embedding = Embedding([(MINILM.manifest, runtime)])
    for _ in range(2):  # the refusal is kept: the second call does not load again
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE_ID, CAT)
        assert (caught.value.code, caught.value.retryable) == ("model_checksum_mismatch", False)


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({"threads": 0}, r"configuration\.threads: must be a whole number from 1 to 64"),
        ({"threads": 65}, r"configuration\.threads: must be"),
        ({"threads": True}, r"configuration\.threads: must be"),
        ({"threads": "2"}, r"configuration\.threads: must be"),
        ({"batch": 0}, r"configuration\.batch: must be a whole number from 1 to 256"),
        ({"batch": 257}, r"configuration\.batch: must be"),
        ({"batch": 2.0}, r"configuration\.batch: must be"),
        ({"thread": 2}, r"configuration\.thread: unknown key; did you mean 'threads'\?"),
    ],
    ids=[
        "no-threads",
        "too-many-threads",
        "bool",
        "text",
        "no-batch",
        "batch-too-large",
        "float",
        "misspelt",
    ],
)
def test_a_bad_configuration_names_the_key(configuration: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        MINILM.create(configuration)


async def test_a_bad_configuration_refuses_the_mount() -> None:
    async with MemoryHost() as memory:
        await memory.mount(EmbeddingProbe(), instance_id="probe")
        with pytest.raises(InstallError, match=r"minilm configuration\.batch: must be"):
            await memory.mount(mnemon_embedder_minilm, instance_id="minilm", config={"batch": 0})
        assert memory.inspect()["entries"] == ["probe"]


def _encoding_in_another_thread() -> bool:
    """Whether a thread other than this one is inside `LoadedModel.encode` right now."""
    encode = LoadedModel.encode.__code__
    here = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        current = frame if ident != here else None
        while current is not None:
            if current.f_code is encode:
                return True
            current = current.f_back
    return False


async def test_the_event_loop_keeps_running_while_a_batch_encodes() -> None:
    runtime = minilm({"batch": 64})
    embedding = Embedding([(MINILM.manifest, runtime)])
    await embedding.embed_query(SPACE_ID, CAT)  # loaded first: the batch is what is watched
    texts = [SENTENCE.format(index) * 3 for index in range(64)]
    ticks_while_encoding = 0
    finished = False

    async def ticker() -> None:
        nonlocal ticks_while_encoding
        while not finished:
            ticks_while_encoding += _encoding_in_another_thread()
            await anyio.sleep(0.001)

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        answer = await embedding.segment_and_embed(request(*texts))
        finished = True
    assert len(answer.segments) == 64
    assert ticks_while_encoding >= 1
    runtime.dispose()


async def test_dispose_releases_the_model() -> None:
    runtime = minilm({"threads": 1})
    embedding = Embedding([(MINILM.manifest, runtime)])
    await embedding.embed_query(SPACE_ID, CAT)
    session = weakref.ref((await runtime._loaded())._session)
    runtime.dispose()
    gc.collect()
    assert session() is None
    with pytest.raises(EmbeddingError) as caught:
        await embedding.embed_query(SPACE_ID, CAT)
    assert caught.value.code == "embedder_disposed"
