"""The embedder against a real loopback server, reached the way a Source reaches it."""

from __future__ import annotations

import json
import logging
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from itertools import pairwise
from typing import Any

import anyio
import mnemon_embedder_openai
import pytest
from mnemon_embedder_openai import define_openai_embedder
from openai_kit import (
    SERVER_WORDS,
    FakeOpenAI,
    changed,
    drop,
    endless,
    hang,
    mounted,
    raw,
    status,
    toy_vector,
)

from mnemon import DefinitionError, InstallError, SourceError, TextPart
from mnemon.sdk import EmbeddingError, EmbedQueryRequest, SegmentRequest

MODEL = "toy-embed"
SPACE = "openai.toy-embed"
KEY = "sk-test-0123456789abcdefDoNotLeak"


def configuration(api: FakeOpenAI, **changes: Any) -> dict[str, Any]:
    return {"base_url": api.base_url, "model": MODEL, "dimensions": api.dimensions, **changes}


def request(*texts: str, spaces: tuple[str, ...] = (SPACE,)) -> SegmentRequest:
    return SegmentRequest(
        idempotency_key="k",
        parts=tuple(TextPart(key=f"p{index}", text=text) for index, text in enumerate(texts)),
        spaces=spaces,
    )


def approx(vector: list[float]) -> tuple[float, ...]:
    # exact: a float survives the JSON round trip unchanged
    return tuple(vector)


async def test_the_embedder_fills_its_space_through_a_host(api: FakeOpenAI) -> None:
    async with mounted(configuration(api)) as (host, embedding):
        [space] = embedding.spaces
        answer = await embedding.segment_and_embed(request("Ada prefers tea", "tea for two"))
        query = await embedding.embed_query(SPACE, "what does Ada drink?")
        report = host.inspect()
    assert (space.key, space.model, space.dimensions, space.metric) == (
        "openai.toy-embed@1",
        MODEL,
        8,
        "cosine",
    )
    assert report["serving"]["embedders"] == [
        {
            "key": "embedder:e0",
            "type_id": "openai-embeddings",
            "package_name": "mnemon-embedder-openai",
            "spaces": ["openai.toy-embed@1"],
        }
    ]
    assert [(s.part_key, s.start, s.end) for s in answer.segments] == [
        ("p0", 0, 15),
        ("p1", 0, 11),
    ]
    assert answer.segments[0].vectors[SPACE] == approx(toy_vector("Ada prefers tea", 8))
    assert answer.segments[1].vectors[SPACE] == approx(toy_vector("tea for two", 8))
    assert query == approx(toy_vector("what does Ada drink?", 8))
    first, second = api.received
    assert first.path == "/v1/embeddings"
    assert first.body == {
        "model": MODEL,
        "input": ["Ada prefers tea", "tea for two"],
        "encoding_format": "float",
    }
    assert second.body["input"] == ["what does Ada drink?"]
    assert first.headers["content-type"] == "application/json"


async def test_two_entries_with_two_models_own_two_spaces(api: FakeOpenAI) -> None:
    small, large = configuration(api, model="Small/v1.5"), configuration(api, model="large")
    async with mounted(small, large) as (_, embedding):
        assert [space.key for space in embedding.spaces] == [
            "openai.large@1",
            "openai.small.v1_5@1",
        ]
        await embedding.embed_query("openai.small.v1_5", "tea")
        await embedding.embed_query("openai.large", "tea")
    assert [r.body["model"] for r in api.received] == ["Small/v1.5", "large"]


async def test_two_entries_of_one_model_are_refused_unless_one_names_its_space(
    api: FakeOpenAI,
) -> None:
    with pytest.raises(
        InstallError, match=r"space_owner_conflict: vector space 'openai\.toy-embed'"
    ):
        async with mounted(configuration(api), configuration(api)):
            pass
    other = configuration(api, space="openai.toy-embed.local")
    async with mounted(configuration(api), other) as (_, embedding):
        assert len(embedding.spaces) == 2


async def test_vectors_follow_index_when_the_server_answers_out_of_order(api: FakeOpenAI) -> None:
    api.reverse = True
    texts = [f"text number {n}" for n in range(5)]
    async with mounted(configuration(api)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(*texts))
    assert [s.vectors[SPACE] for s in answer.segments] == [approx(toy_vector(t, 8)) for t in texts]


async def test_segments_go_to_the_api_in_batches_of_batch(api: FakeOpenAI) -> None:
    texts = [f"text number {n}" for n in range(7)]
    async with mounted(configuration(api, batch=3)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(*texts))
        assert embedding.max_batch(SPACE) == 3
    assert api.inputs == [texts[0:3], texts[3:6], texts[6:7]]
    assert [s.vectors[SPACE] for s in answer.segments] == [approx(toy_vector(t, 8)) for t in texts]


@pytest.mark.parametrize("send", [False, True], ids=["not-sent", "sent"])
async def test_dimensions_are_sent_only_when_asked(api: FakeOpenAI, send: bool) -> None:
    api.dimensions = 64  # the model's own size: what the server answers when not asked
    shortened = {**configuration(api), "dimensions": 4, "send_dimensions": send}
    async with mounted(shortened) as (_, embedding):
        if send:
            assert len(await embedding.embed_query(SPACE, "tea")) == 4
        else:  # the server's 64 numbers are not the 4 declared
            with pytest.raises(EmbeddingError) as caught:
                await embedding.embed_query(SPACE, "tea")
            assert caught.value.code == "invalid_response"
    assert ("dimensions" in api.received[0].body) is send
    if send:
        assert api.received[0].body["dimensions"] == 4


async def test_the_key_goes_as_a_bearer_token_and_nowhere_else(
    api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("TOY_API_KEY", KEY)
    settings = configuration(api, api_key_env="TOY_API_KEY")
    failures = [status(401), status(500), raw(b"{not json"), status(400), drop]
    api.replies += failures
    errors: list[BaseException] = []
    async with mounted(settings) as (host, embedding):
        for _ in failures:
            with pytest.raises(EmbeddingError) as caught:
                await embedding.embed_query(SPACE, "tea")
            errors.append(caught.value)
        await embedding.embed_query(SPACE, "tea")
        report = json.dumps(host.inspect())
    definition = define_openai_embedder(settings)
    runtime = definition.create(settings)
    said = [
        *map(str, errors),
        *(repr(e.__context__) for e in errors),
        caplog.text,
        report,
        repr(runtime),
        repr(definition),
        definition.manifest.model_dump_json(),
    ]
    assert not [text for text in said if KEY in text or KEY[3:12] in text]
    assert [r.headers["authorization"] for r in api.received] == [f"Bearer {KEY}"] * 6
    assert "key=set" in repr(runtime)
    await runtime.dispose()


async def test_without_a_key_no_authorization_header_is_sent(api: FakeOpenAI) -> None:
    async with mounted(configuration(api)) as (_, embedding):
        await embedding.embed_query(SPACE, "tea")
    assert "authorization" not in api.received[0].headers


async def test_a_key_variable_that_is_empty_refuses_the_mount(
    api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOY_API_KEY", "  ")
    with pytest.raises(InstallError, match=r"configuration\.api_key_env: TOY_API_KEY holds no API"):
        async with mounted(configuration(api, api_key_env="TOY_API_KEY")):
            pass
    assert api.received == []


def test_openai_itself_needs_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    openai = {"model": "text-embedding-3-small", "dimensions": 1536}
    definition = define_openai_embedder(openai)
    assert definition.manifest.spaces[0].key == "openai.text-embedding-3-small@1"
    with pytest.raises(DefinitionError, match=r"api_key_env: OPENAI_API_KEY holds no"):
        definition.create(openai)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert "key=set" in repr(definition.create(openai))  # made, never called: no network


@pytest.mark.parametrize(
    ("reply", "code", "retryable"),
    [
        (status(429, ("Retry-After", "7")), "rate_limited", True),
        (status(500), "provider_error", True),
        (status(503, ("Retry-After", "2")), "provider_error", True),
        (status(401), "unauthorized", False),
        (status(403), "forbidden", False),
        (status(400), "invalid_payload", False),
        (status(404), "invalid_payload", False),
        (status(422), "invalid_payload", False),
        (status(408), "timeout", True),
        (status(307, ("Location", "http://127.0.0.1:9/v1/embeddings")), "invalid_response", False),
    ],
    ids=["429", "500", "503", "401", "403", "400", "404", "422", "408", "307-not-followed"],
)
async def test_each_refusal_maps_to_a_code_and_never_repeats_the_server(
    api: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    reply: Any,
    code: str,
    retryable: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    api.replies.append(reply)
    async with mounted(configuration(api)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.segment_and_embed(request("tea"))
        await embedding.embed_query(SPACE, "tea")  # the next call is served as usual
    assert (caught.value.code, caught.value.retryable) == (code, retryable)
    assert SERVER_WORDS not in str(caught.value)
    assert SERVER_WORDS not in caplog.text
    assert len(api.received) == 2  # the redirect was not followed


async def test_the_runtime_reports_how_long_the_server_asked_to_wait(api: FakeOpenAI) -> None:
    in_a_minute = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    api.replies += [
        status(429, ("Retry-After", "7")),
        status(429, ("retry-after-ms", "1500"), ("Retry-After", "9")),
        status(429, ("Retry-After", in_a_minute)),
        status(429, ("Retry-After", "soon")),
    ]
    settings = configuration(api)
    runtime = define_openai_embedder(settings).create(settings)
    waits = []
    for _ in range(4):
        with pytest.raises(SourceError) as caught:
            await runtime.embed_query(EmbedQueryRequest(space=SPACE, text="tea"))
        assert (caught.value.code, caught.value.kind, caught.value.origin_code) == (
            "rate_limited",
            "transient",
            "http-429",
        )
        waits.append(caught.value.retry_after)
    await runtime.dispose()
    assert waits[:2] == [7.0, 1.5]
    assert 55 < waits[2] <= 60
    assert waits[3] is None


def _drop_last(answer: dict[str, Any]) -> None:
    answer["data"].pop()


def _index(value: Any) -> Any:
    def change(answer: dict[str, Any]) -> None:
        answer["data"][0]["index"] = value

    return change


def _coordinate(value: Any) -> Any:
    def change(answer: dict[str, Any]) -> None:
        answer["data"][0]["embedding"][0] = value

    return change


@pytest.mark.parametrize(
    "reply",
    [
        raw(b"{not json"),
        raw(b'{"data": [{"index": 0, "embedding": [NaN, 1, 1, 1, 1, 1, 1, 1]}]}'),
        raw(b'{"data": [{"index": 0, "embedding": [Infinity, 1, 1, 1, 1, 1, 1, 1]}]}'),
        raw(b'{"data": [{"index": 0, "embedding": [1e39, 1, 1, 1, 1, 1, 1, 1]}]}'),
        raw(b'[{"index": 0, "embedding": [1, 1, 1, 1, 1, 1, 1, 1]}]'),
        raw(b""),
        changed(lambda answer: answer["data"][0]["embedding"].pop()),
        changed(_drop_last),
        changed(lambda answer: answer["data"].append(answer["data"][0])),
        changed(_index(1)),
        changed(_index(None)),
        changed(_index(True)),
        changed(_index(-1)),
        changed(_coordinate(True)),
        changed(_coordinate("0.5")),
        changed(lambda answer: {"data": None}),
    ],
    ids=[
        "not-json",
        "nan",
        "infinity",
        "past-float32",
        "not-an-object",
        "empty",
        "wrong-dimensions",
        "too-few",
        "too-many",
        "duplicate-index",
        "no-index",
        "bool-index",
        "negative-index",
        "bool-coordinate",
        "text-coordinate",
        "no-data",
    ],
)
async def test_a_malformed_answer_is_a_terminal_invalid_response(
    api: FakeOpenAI, reply: Any
) -> None:
    api.replies.append(reply)
    async with mounted(configuration(api)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.segment_and_embed(request("tea", "milk"))
    assert (caught.value.code, caught.value.retryable) == ("invalid_response", False)


async def test_an_answer_declared_larger_than_the_limit_is_not_read(api: FakeOpenAI) -> None:
    api.dimensions = 512  # about 10 KB of JSON: over a 1 KiB limit
    async with mounted(configuration(api, max_response_bytes=1024)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE, "tea")
    assert (caught.value.code, caught.value.retryable) == ("response_too_large", False)


async def test_an_endless_answer_is_cut_at_the_limit(api: FakeOpenAI) -> None:
    api.replies.append(endless)
    limit = 256 * 1024
    async with mounted(configuration(api, max_response_bytes=limit)) as (_, embedding):
        started = anyio.current_time()
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE, "tea")
        elapsed = anyio.current_time() - started
        # the client hung up at the limit: the server stops writing long before its 512 MiB
        assert await anyio.to_thread.run_sync(api.stopped.wait, 5)
    assert (caught.value.code, caught.value.retryable) == ("response_too_large", False)
    assert elapsed < 2
    assert api.written < 64 << 20


async def test_a_server_that_cannot_be_reached_is_unavailable_and_retryable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # nothing listens there now
    closed = FakeOpenAI(base_url=f"http://127.0.0.1:{port}/v1")
    async with mounted(configuration(closed)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE, "tea")
    assert (caught.value.code, caught.value.retryable) == ("unavailable", True)


async def test_a_connection_closed_without_an_answer_is_unavailable(api: FakeOpenAI) -> None:
    api.replies.append(drop)
    async with mounted(configuration(api)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE, "tea")
        assert len(await embedding.embed_query(SPACE, "tea")) == 8
    assert (caught.value.code, caught.value.retryable) == ("unavailable", True)


async def test_a_query_to_a_hanging_server_times_out_at_its_deadline(api: FakeOpenAI) -> None:
    api.replies.append(hang)
    # 500 ms: the next call makes a fresh connection and is answered within it on a loaded machine
    async with mounted(configuration(api, query_timeout_ms=500)) as (_, embedding):
        started = anyio.current_time()
        with pytest.raises(EmbeddingError) as caught:
            await embedding.embed_query(SPACE, "tea")
        elapsed = anyio.current_time() - started
        # the hung connection is dropped; the next call gets a fresh one and its answer
        assert len(await embedding.embed_query(SPACE, "tea")) == 8
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)
    # it waited for its deadline, not for the hung server: how much longer a loaded machine
    # takes to notice is not this test's business, so the bound is loose
    assert 0.45 <= elapsed < 5.0  # the hung server lets go after 10 s


async def test_the_runtime_keeps_its_deadline_when_called_directly(api: FakeOpenAI) -> None:
    api.replies.append(hang)
    settings = configuration(api, query_timeout_ms=100)
    runtime = define_openai_embedder(settings).create(settings)
    with pytest.raises(SourceError) as caught:
        await runtime.embed_query(EmbedQueryRequest(space=SPACE, text="tea"))
    await runtime.dispose()
    assert (caught.value.code, caught.value.kind) == ("timeout", "transient")


async def test_a_long_text_waits_for_its_segments_within_timeout_ms(api: FakeOpenAI) -> None:
    # the shortest deadline the core allows a segment_and_embed: one second
    api.replies += [changed(lambda answer: None), hang]
    # 269 characters: 9 segments of at most 32, so three requests of 4; the second hangs
    text = " ".join(f"word{n}" for n in range(40))
    settings = configuration(api, timeout_ms=1_000, max_input_characters=32, batch=4)
    async with mounted(settings) as (_, embedding):
        started = anyio.current_time()
        with pytest.raises(EmbeddingError) as caught:
            await embedding.segment_and_embed(request(text))
        elapsed = anyio.current_time() - started
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)
    assert 0.95 <= elapsed < 1.5
    assert len(api.received) == 2


def assert_tiles(cuts: list[tuple[int, int]], text: str, limit: int) -> None:
    assert cuts[0][0] == 0
    assert cuts[-1][1] == len(text)
    assert all(0 < end - start <= limit for start, end in cuts)
    assert all(left[1] == right[0] for left, right in pairwise(cuts))


@pytest.mark.parametrize(
    "word",
    ["tea", "naïve", "crème-brûlée", "😀👍🏽", "東京タワー"],
    ids=["ascii", "accent", "accents", "emoji", "cjk"],
)
async def test_a_long_part_is_cut_at_whitespace_with_code_point_offsets(
    api: FakeOpenAI, word: str
) -> None:
    text = " ".join(f"{word}{n}" for n in range(60)) + "  \n"
    limit = 40
    async with mounted(configuration(api, max_input_characters=limit)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(text, "short", ""))
    cuts = [(s.start, s.end) for s in answer.segments if s.part_key == "p0"]
    assert len(cuts) > 3
    assert_tiles(cuts, text, limit)
    for start, _ in cuts[1:]:  # every later segment starts on a word, after whitespace
        assert text[start - 1] == " "
        assert text[start] != " "
    # what the server read (JSON text, decoded) is the text at those offsets: code points
    sent = [text[start:end] for start, end in cuts]
    assert api.inputs[0] == [*sent, "short"]
    assert [s.part_key for s in answer.segments].count("p2") == 0  # an empty part has none
    for segment, piece in zip(answer.segments, sent, strict=False):
        assert segment.vectors[SPACE] == approx(toy_vector(piece, 8))


async def test_a_long_document_is_cut_off_the_event_loop_the_same_way(api: FakeOpenAI) -> None:
    text = "a few words of a long document " * 10_000  # 310,000 characters
    async with mounted(configuration(api)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(text))
    cuts = [(s.start, s.end) for s in answer.segments]
    assert len(cuts) == 39
    assert_tiles(cuts, text, 8_000)
    assert api.inputs == [[text[start:end] for start, end in cuts]]


async def test_a_word_longer_than_the_limit_is_cut_inside_it(api: FakeOpenAI) -> None:
    text = "a" * 100 + " tail"
    async with mounted(configuration(api, max_input_characters=32)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(text))
    assert [(s.start, s.end) for s in answer.segments] == [(0, 32), (32, 64), (64, 96), (96, 105)]


async def test_a_request_without_spaces_gets_segments_and_no_request(api: FakeOpenAI) -> None:
    settings = configuration(api, max_input_characters=32)
    runtime = define_openai_embedder(settings).create(settings)
    answer = await runtime.segment_and_embed(request("x " * 40, "", spaces=()))
    await runtime.dispose()
    assert [(s.part_key, s.start, s.end, dict(s.vectors)) for s in answer.segments] == [
        ("p0", 0, 32, {}),
        ("p0", 32, 64, {}),
        ("p0", 64, 80, {}),
    ]
    assert api.received == []


@pytest.mark.parametrize(
    "text",
    ["word " * 7_000, "seventeen-letters " * 1_100],
    ids=["longer-than-1024-full-segments", "1100-short-segments"],
)
async def test_a_text_needing_too_many_segments_is_refused_before_any_request(
    api: FakeOpenAI, text: str
) -> None:
    async with mounted(configuration(api, max_input_characters=32)) as (_, embedding):
        with pytest.raises(EmbeddingError) as caught:
            await embedding.segment_and_embed(request(text))
    assert (caught.value.code, caught.value.retryable) == ("text_too_long", False)
    assert api.received == []


async def test_a_long_query_is_read_up_to_its_first_segment(api: FakeOpenAI) -> None:
    query = "where is the tea " * 10
    async with mounted(configuration(api, max_input_characters=32)) as (_, embedding):
        await embedding.embed_query(SPACE, query)
    assert api.inputs == [["where is the tea where is the "]]


async def test_a_lone_surrogate_is_sent_as_a_replacement_character(api: FakeOpenAI) -> None:
    text = "tea \ud800 time"
    async with mounted(configuration(api)) as (_, embedding):
        answer = await embedding.segment_and_embed(request(text))
    assert [(s.start, s.end) for s in answer.segments] == [(0, len(text))]
    assert api.inputs == [["tea \ufffd time"]]


async def test_dispose_closes_the_client_and_refuses_later_calls(api: FakeOpenAI) -> None:
    settings = configuration(api)
    runtime = define_openai_embedder(settings).create(settings)
    await runtime.embed_query(EmbedQueryRequest(space=SPACE, text="tea"))
    await runtime.dispose()
    with pytest.raises(SourceError) as caught:
        await runtime.embed_query(EmbedQueryRequest(space=SPACE, text="tea"))
    assert caught.value.code == "embedder_disposed"
    assert len(api.received) == 1


async def test_keep_alive_reuses_one_connection(api: FakeOpenAI) -> None:
    async with mounted(configuration(api)) as (_, embedding):
        for _ in range(3):
            await embedding.embed_query(SPACE, "tea")
    assert len(api.received) == 3
    assert len({r.port for r in api.received}) == 1


def test_the_package_exports_exactly_its_public_names() -> None:
    assert mnemon_embedder_openai.__all__ == [
        "apply",
        "default_space_id",
        "define_openai_embedder",
        "memory_plugin",
    ]
    assert mnemon_embedder_openai.memory_plugin.roles == ("embedder",)
