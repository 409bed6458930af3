"""An entry's configuration: defaults, the space id rule, and every refusal naming its key."""

from __future__ import annotations

from typing import Any

import mnemon_embedder_openai
import pytest
from mnemon_embedder_openai import default_space_id, define_openai_embedder

from mnemon import DefinitionError, InstallError, MemoryHost
from mnemon_testing import EmbeddingProbe

#: a value no refusal may repeat
SECRETISH = "hunter2-not-for-messages"
LOCAL = {"base_url": "http://127.0.0.1:11434/v1", "model": "nomic-embed-text", "dimensions": 768}


def test_the_defaults_of_a_local_server() -> None:
    manifest = define_openai_embedder(LOCAL).manifest
    [space] = manifest.spaces
    assert space.model_dump() == {
        "id": "openai.nomic-embed-text",
        "version": "1",
        "model": "nomic-embed-text",
        "dimensions": 768,
        "metric": "cosine",
        "description": None,
    }
    assert (manifest.type_id, manifest.package_name) == (
        "openai-embeddings",
        "mnemon-embedder-openai",
    )
    assert (manifest.timeout_ms, manifest.query_timeout_ms) == (60_000, 5_000)
    assert (manifest.max_segments, manifest.max_batch) == (1_024, 64)
    assert "key=none" in repr(define_openai_embedder(LOCAL).create(LOCAL))


def test_every_key_is_taken() -> None:
    given = {
        **LOCAL,
        "base_url": "https://gpu.example.com:8000/v1/",
        "space": "team.embeddings",
        "version": "2024-06.b",
        "metric": "dot",
        "send_dimensions": True,
        "api_key_env": "VLLM_KEY",
        "timeout_ms": 2_000,
        "query_timeout_ms": 300,
        "batch": 2_048,
        "max_input_characters": 500,
        "max_response_bytes": 2048,
    }
    manifest = define_openai_embedder(given).manifest
    [space] = manifest.spaces
    assert (space.key, space.metric) == ("team.embeddings@2024-06.b", "dot")
    assert (manifest.timeout_ms, manifest.query_timeout_ms) == (2_000, 300)
    assert manifest.max_batch == 1_024  # the core's ceiling; requests still take 2,048


@pytest.mark.parametrize(
    ("model", "space"),
    [
        ("text-embedding-3-small", "openai.text-embedding-3-small"),
        ("nomic-embed-text:latest", "openai.nomic-embed-text.latest"),
        ("BAAI/bge-base-en-v1.5", "openai.baai.bge-base-en-v1_5"),
        ("mxbai-embed-large:335m", "openai.mxbai-embed-large_335m"),
        ("Qwen/Qwen3-Embedding-0.6B", "openai.qwen.qwen3-embedding-0_6b"),
        ("3-small", None),
        ("東京", None),
        ("m" * 60, None),
    ],
    ids=[
        "openai",
        "ollama-tag",
        "hugging-face",
        "digit-tag",
        "decimal",
        "digit-first",
        "no-latin",
        "too-long",
    ],
)
def test_the_space_id_is_derived_from_the_model(model: str, space: str | None) -> None:
    assert default_space_id(model) == space


def test_a_model_without_a_derivable_id_needs_space() -> None:
    with pytest.raises(DefinitionError, match=r"configuration\.space: cannot be derived"):
        define_openai_embedder({**LOCAL, "model": "東京"})
    definition = define_openai_embedder({**LOCAL, "model": "東京", "space": "local.tokyo"})
    assert definition.manifest.spaces[0].key == "local.tokyo@1"


BAD: list[tuple[dict[str, Any], str]] = [
    ({"base_url": f"ftp://{SECRETISH}/v1"}, r"base_url: must be an http\(s\) URL"),
    ({"base_url": f"http://user:{SECRETISH}@host/v1"}, r"base_url: must not carry credentials"),
    ({"base_url": f"https://host/v1?api-key={SECRETISH}"}, r"base_url: must not carry"),
    ({"base_url": "http://host:port/v1"}, r"base_url: must be an http\(s\) URL"),
    ({"base_url": "https:///v1"}, r"base_url: must be an http\(s\) URL"),
    ({"base_url": 8080}, r"base_url: must be a non-empty string"),
    ({"model": None}, r"model: must be a non-empty string"),
    ({"model": f"two words {SECRETISH}"}, r"model: must be 1 to 256 printable"),
    ({"model": "m" * 257}, r"model: must be 1 to 256 printable"),
    ({"dimensions": 0}, r"dimensions: must be a whole number from 1 to 4096"),
    ({"dimensions": 4097}, r"dimensions: must be"),
    ({"dimensions": "768"}, r"dimensions: must be"),
    ({"dimensions": True}, r"dimensions: must be"),
    ({"send_dimensions": "yes"}, r"send_dimensions: must be true or false"),
    ({"space": f"Bad.{SECRETISH}"}, r"space: must be lowercase segments"),
    ({"space": "a." + "b" * 63}, r"space: must be lowercase segments"),
    ({"version": f"{SECRETISH} v2"}, r"version: must be 1 to 32"),
    ({"version": 2}, r"version: must be a non-empty string"),
    ({"metric": "euclid"}, r"metric: must be cosine, dot or l2"),
    ({"api_key_env": f"{SECRETISH}!"}, r"api_key_env: must be an environment variable's name"),
    ({"api_key_env": ""}, r"api_key_env: must be a non-empty string"),
    ({"timeout_ms": 999}, r"timeout_ms: must be a whole number from 1000 to 300000"),
    ({"timeout_ms": 300_001}, r"timeout_ms: must be"),
    ({"query_timeout_ms": 99}, r"query_timeout_ms: must be a whole number from 100 to 10000"),
    ({"query_timeout_ms": 10_001}, r"query_timeout_ms: must be"),
    ({"batch": 0}, r"batch: must be a whole number from 1 to 2048"),
    ({"batch": 2_049}, r"batch: must be"),
    ({"batch": 2.0}, r"batch: must be"),
    ({"max_input_characters": 31}, r"max_input_characters: must be a whole number from 32 to"),
    ({"max_input_characters": 1_000_001}, r"max_input_characters: must be"),
    ({"max_response_bytes": 1_023}, r"max_response_bytes: must be a whole number from 1024 to"),
    ({"max_response_bytes": (1 << 30) + 1}, r"max_response_bytes: must be"),
    ({"dimension": 768}, r"configuration\.dimension: unknown key; did you mean 'dimensions'\?"),
    ({"api_key": SECRETISH}, r"configuration\.api_key: unknown key; did you mean 'api_key_env'\?"),
]


@pytest.mark.parametrize(
    ("change", "message"),
    BAD,
    ids=[
        "scheme",
        "credentials",
        "query",
        "port",
        "no-host",
        "url-not-text",
        "model-null",
        "model-spaces",
        "model-long",
        "no-dimensions",
        "too-many-dimensions",
        "dimensions-text",
        "dimensions-bool",
        "send-dimensions-text",
        "space-pattern",
        "space-long",
        "version-pattern",
        "version-number",
        "metric",
        "key-variable-pattern",
        "key-variable-empty",
        "timeout-short",
        "timeout-long",
        "query-timeout-short",
        "query-timeout-long",
        "no-batch",
        "batch-large",
        "batch-float",
        "input-short",
        "input-long",
        "response-small",
        "response-large",
        "misspelt",
        "key-in-configuration",
    ],
)
def test_a_bad_value_is_refused_naming_its_key_and_never_the_value(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(DefinitionError, match=message) as caught:
        define_openai_embedder({**LOCAL, **change})
    assert str(caught.value).startswith("openai-embeddings configuration.")
    assert SECRETISH not in str(caught.value)


@pytest.mark.parametrize("key", ["model", "dimensions"])
def test_model_and_dimensions_are_required(key: str) -> None:
    given = {name: value for name, value in LOCAL.items() if name != key}
    with pytest.raises(DefinitionError, match=rf"configuration\.{key}: is required"):
        define_openai_embedder(given)


async def test_a_bad_configuration_refuses_the_mount() -> None:
    async with MemoryHost() as host:
        await host.mount(EmbeddingProbe(), instance_id="probe")
        with pytest.raises(InstallError, match=r"configuration\.batch: must be a whole number"):
            await host.mount(
                mnemon_embedder_openai, instance_id="openai", config={**LOCAL, "batch": 0}
            )
        assert host.inspect()["entries"] == ["probe"]
