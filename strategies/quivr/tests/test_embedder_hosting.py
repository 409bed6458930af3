"""A Quivr ingestion plugin hosted as an embedder, from the user's side, over real loopback HTTP.

The reference plugin (`embedders/quivr_embedder.py`, a word-hashing embedder with a few
synonyms folded) is launched by the run convention or served on 127.0.0.1; the spaces Source
beside it stores memories and recalls them by meaning through it. A hostile plugin's answers
are refused with the contract's codes, and no memory is ever lost to one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import mnemon_source_spaces as spaces
import mnemon_strategy_quivr as quivr
import pytest
import yaml
from launched import (
    EMBEDDERS,
    edit_manifest,
    embedder_folder,
    ended_within,
    kill,
    recorded,
    with_retrieval,
)

from mnemon import InstallError
from mnemon.sdk import EmbeddingError, PluginContext, install_memory
from mnemon_testing import EmbeddingProbe, MemoryCompositionRunner, SelectAll

sys.path.insert(0, str(EMBEDDERS))
import quivr_embedder

MANIFEST = EMBEDDERS / "quivr-plugin.yaml"
SPACE = "mnemon.hashing.words"
ADA = {"scope": {"user_id": "ada"}}
CHAI = "Ada drinks chai every morning."
MEMORIES = [
    CHAI,
    "The quarterly report is due on Friday.",
    "Ada fixed her bicycle on Sunday.",
    "Bob moved to Lisbon last year.",
]
# a paraphrase sharing no word with the memory it means: only meaning can find it
PARAPHRASE = "tea habits"


def allow(offer: Any) -> bool:
    return True


def launched_folder(folder: Path, *arguments: str) -> Path:
    """The reference plugin to launch, with deadlines its start never runs past.

    The first call launches the plugin inside its own deadline (1 s for a query in the
    reference manifest); on a loaded machine a start alone can take that long. These tests
    are about launching, not deadlines (those are tested against a served plugin).
    """
    manifest = embedder_folder(folder, *arguments)

    def roomy(values: dict[str, Any]) -> None:
        values["contributions"]["ingestion"].update(timeout_ms=30_000, query_timeout_ms=10_000)

    edit_manifest(folder, roomy)
    return manifest


@pytest.fixture
def served():
    """Start the reference plugin on 127.0.0.1 in this process: its endpoint and its server."""
    started = []

    def start(mode: str = "correct", **options: Any) -> tuple[str, Any]:
        server = quivr_embedder.serve("127.0.0.1", 0, mode, **options)
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


async def _with_spaces(tmp_path: Path, **config: Any) -> MemoryCompositionRunner:
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")}
        )
        await runner.mount(quivr, instance_id="quivr", config={"manifest": str(MANIFEST), **config})
        await runner.mount(SelectAll(), instance_id="strategy")
    except BaseException:
        await runner.dispose()
        raise
    return runner


async def _remember(runner: MemoryCompositionRunner, *texts: str) -> list[Any]:
    turn = await runner.begin_turn(ADA)
    try:
        return [
            await turn.execute_action("source:spaces/remember", {"text": text}, allow)
            for text in texts
        ]
    finally:
        await turn.release()


async def _recall(runner: MemoryCompositionRunner, query: str, limit: int = 2) -> Any:
    turn = await runner.begin_turn(ADA)
    try:
        return await turn.execute_route("source:spaces/recall", {"query": query, "limit": limit})
    finally:
        await turn.release()


async def test_a_launched_plugin_recalls_a_memory_by_a_paraphrase(tmp_path: Path) -> None:
    manifest = launched_folder(tmp_path / "plugin")
    runner = await _with_spaces(tmp_path, manifest=str(manifest), launch=True)
    try:
        await _remember(runner, *MEMORIES)
        found = await _recall(runner, PARAPHRASE)
    finally:
        await runner.dispose()
    top = found.items[0]
    assert top.text == CHAI
    # no word of the question is in it: the plugin's vectors found it
    assert top.provenance["explain"]["keywords"] is None
    assert top.provenance["explain"]["meaning"] == 1


class _Hosting:
    """Installs the embedder from a link the test keeps, to reach the launched process."""

    def __init__(self, manifest: Path) -> None:
        config = quivr.QUIVR_CONFIGURATION.validate({"manifest": str(manifest), "launch": True})
        self.link = quivr.plugin_link(config)

    def apply(self, ctx: PluginContext) -> None:
        ctx.on_dispose(self.link.aclose)
        install_memory(ctx, embedders=[quivr.define_quivr_embedder(self.link)])


async def _probe(plugin: Any, config: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """A host with the plugin mounted as `quivr` beside an `EmbeddingProbe`: the runner, the
    probe and what unmounts the plugin."""
    probe = EmbeddingProbe()
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(probe, instance_id="probe")
        unmount = await runner.mount(plugin, instance_id="quivr", config=config)
        await runner.mount(SelectAll(), instance_id="strategy")
        turn = await runner.begin_turn(ADA)
        await turn.release()
    except BaseException:
        await runner.dispose()
        raise
    return runner, probe, unmount


async def test_only_the_host_that_launched_the_plugin_can_use_it(tmp_path: Path) -> None:
    started = tmp_path / "started.json"
    hosting = _Hosting(launched_folder(tmp_path / "plugin", "--record", str(started)))
    runner, probe, _ = await _probe(hosting)
    try:
        assert hosting.link.serving_endpoint is None  # launched on first use, not at mount
        vector = await probe.embedding.embed_query(SPACE, "tea")
        assert len(vector) == 64
        endpoint = hosting.link.serving_endpoint
        assert str(endpoint).startswith("http://127.0.0.1:")
        body = {
            "invocation_id": "stranger-1",
            "contribution": "ingestion",
            "organization_id": "o",
            "configuration": {},
            "space": SPACE,
            "query": {"modality": "text", "text": "tea"},
        }
        async with httpx.AsyncClient(base_url=endpoint) as stranger:
            # another local process, without a request signed with the per-launch key
            unsigned = await stranger.post("/v0/contributions/ingestion/embed_query", json=body)
            forged = await stranger.post(
                "/v0/contributions/ingestion/embed_query",
                json=body,
                headers={"Authorization": "Bearer e30.e30.c2lnbmF0dXJl"},
            )
            # a web page that made its own name resolve to 127.0.0.1 (DNS rebinding)
            rebound = await stranger.get("/v0/health", headers={"Host": "evil.example:80"})
    finally:
        await runner.dispose()
    assert unsigned.status_code == forged.status_code == 401
    assert rebound.status_code == 403
    environment = recorded(started)["environment"]
    # the signing key reached the plugin through its environment; no request ever carried it
    key = environment["QUIVR_PLUGIN_TOKEN"]
    assert len(key) >= 32
    assert environment["QUIVR_PLUGIN_HOST"] == "127.0.0.1"


async def test_unmounting_stops_the_launched_plugin(tmp_path: Path) -> None:
    started = tmp_path / "started.json"
    hosting = _Hosting(launched_folder(tmp_path / "plugin", "--record", str(started)))
    pid = None
    runner, probe, unmount = await _probe(hosting)
    try:
        await probe.embedding.embed_query(SPACE, "tea")
        pid = recorded(started)["pid"]
        await unmount()
        assert ended_within(pid, 1.0), "the plugin outlived its entry"
        # a late call never starts a process nobody would stop
        with pytest.raises(quivr.PluginUnavailable):
            await hosting.link.plugin()
    finally:
        kill(pid)
        await runner.dispose()


async def test_a_plugin_that_exited_is_launched_again_at_the_next_call(tmp_path: Path) -> None:
    started = tmp_path / "started.json"
    hosting = _Hosting(launched_folder(tmp_path / "plugin", "--record", str(started)))
    runner, probe, _ = await _probe(hosting)
    try:
        await probe.embedding.embed_query(SPACE, "tea")
        first = recorded(started)["pid"]
        kill(first)
        assert ended_within(first, 1.0)
        # the next call finds it gone and launches it again, with a new key
        assert len(await probe.embedding.embed_query(SPACE, "tea")) == 64
        assert recorded(started)["pid"] != first
    finally:
        await runner.dispose()


async def test_a_manifest_declaring_ingestion_and_retrieval_is_hosted_whole(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started.json"
    manifest = launched_folder(tmp_path / "plugin", "--record", str(started))
    edit_manifest(manifest.parent, with_retrieval)
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")}
        )
        # no other Strategy: the plugin's ranker is the one the host selects
        await runner.mount(
            quivr, instance_id="quivr", config={"manifest": str(manifest), "launch": True}
        )
        await _remember(runner, *MEMORIES)
        found = await _recall(runner, PARAPHRASE)
    finally:
        await runner.dispose()
    # ranked by the plugin's retrieval Contribution, over memories its ingestion embedded
    assert found.output["status"] == "ranked"
    assert found.output["ranker"] == "mnemon.hashing"
    assert found.items[0].text == CHAI
    assert found.items[0].provenance["explain"]["meaning"] == 1
    # both Contributions from one process, launched once
    starts = (tmp_path / "started.json.starts").read_text().split()
    assert len(starts) == 1


# what each hostile plugin's answer becomes: the call, the code, the broken rules, retryable
HOSTILE = [
    ("wrong_dimensions", "segment", "ingestion_refused", ("dimension_mismatch",), False),
    ("wrong_dimensions", "query", "ingestion_refused", ("dimension_mismatch",), False),
    ("nan", "segment", "ingestion_refused", ("schema_violation",), False),
    ("nan", "query", "ingestion_refused", ("schema_violation",), False),
    ("overflow", "segment", "ingestion_refused", ("invalid_vector",), False),
    ("offsets", "segment", "ingestion_refused", ("offset_out_of_range",), False),
    ("too_large", "segment", "ingestion_refused", ("response_too_large",), False),
    ("slow", "segment", "timeout", (), True),
    ("slow", "query", "timeout", (), True),
    ("refuses", "segment", "ingestion_refused", (), False),
    ("refuses", "query", "unsupported_search", (), False),
    ("busy", "segment", "unavailable", (), True),
    ("crashes", "query", "unavailable", (), True),
]


async def _embed(embedding: Any, call: str) -> Any:
    if call == "query":
        return await embedding.embed_query(SPACE, PARAPHRASE)
    request = {"idempotency_key": "k1", "parts": [{"key": "m1", "text": CHAI}], "spaces": [SPACE]}
    return await embedding.segment_and_embed(request)


@pytest.mark.parametrize(
    ("mode", "call", "code", "rules", "retryable"),
    HOSTILE,
    ids=[f"{mode}-{call}" for mode, call, *_ in HOSTILE],
)
async def test_a_hostile_answer_is_refused_with_the_contracts_code(
    served, mode: str, call: str, code: str, rules: tuple[str, ...], retryable: bool
) -> None:
    endpoint, _ = served(mode)
    config = {"manifest": str(MANIFEST), "endpoint": endpoint}
    runner, probe, _ = await _probe(quivr, config)
    try:
        with pytest.raises(EmbeddingError) as caught:
            await _embed(probe.embedding, call)
    finally:
        await runner.dispose()
    error = caught.value
    assert (error.code, error.rules, error.retryable) == (code, rules, retryable)
    # the plugin's own words (its envelope's message, a traceback) never reach the error
    assert "Traceback" not in str(error)
    assert "not this one" not in str(error)


async def test_nothing_is_lost_to_a_broken_plugin_and_vectors_follow_once_it_answers(
    tmp_path: Path, served
) -> None:
    endpoint, server = served("wrong_dimensions")
    runner = await _with_spaces(tmp_path, endpoint=endpoint)
    try:
        [receipt] = await _remember(runner, CHAI)
        assert receipt.completion == "committed"  # durable whatever the plugin answered
        by_word = await _recall(runner, "chai")
        assert [item.text for item in by_word.items] == [CHAI]
        assert (await _recall(runner, PARAPHRASE)).items == ()  # no vector was kept
        server.RequestHandlerClass.mode = "busy"  # a retryable envelope: still nothing
        assert (await _recall(runner, PARAPHRASE)).items == ()
        server.RequestHandlerClass.mode = "correct"
        # the next recall catches up on the memory still without vectors
        found = await _recall(runner, PARAPHRASE)
    finally:
        await runner.dispose()
    assert [item.text for item in found.items] == [CHAI]
    assert found.items[0].provenance["explain"]["meaning"] == 1


async def test_a_secret_the_plugin_echoes_is_scrubbed_from_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HASHING_API_KEY", "the-declared-secret-0123456789")
    manifest = launched_folder(tmp_path / "plugin", "--mode", "leaks_secret_in_answer")
    runner, probe, _ = await _probe(quivr, {"manifest": str(manifest), "launch": True})
    try:
        answer = await probe.embedding.segment_and_embed(
            {"idempotency_key": "k1", "parts": [{"key": "m1", "text": CHAI}], "spaces": [SPACE]}
        )
    finally:
        await runner.dispose()
    assert answer.segments[0].provenance == {"source": "key [redacted]"}
    assert "the-declared-secret" not in json.dumps(answer.model_dump(mode="json"))


async def test_two_plugins_declaring_one_space_are_refused(served) -> None:
    first, _ = served()
    second, _ = served()
    probe = EmbeddingProbe()
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(probe, instance_id="probe")
        await runner.mount(SelectAll(), instance_id="strategy")
        await runner.mount(
            quivr, instance_id="a", config={"manifest": str(MANIFEST), "endpoint": first}
        )
        with pytest.raises(InstallError, match="space_owner_conflict"):
            await runner.mount(
                quivr, instance_id="b", config={"manifest": str(MANIFEST), "endpoint": second}
            )
    finally:
        await runner.dispose()


def _space(manifest: Path, **changes: Any) -> None:
    """Change the declared space of a manifest copy (its dimensions, its version)."""

    def change(value: dict[str, Any]) -> None:
        value["contributions"]["ingestion"]["spaces"][SPACE].update(changes)

    edit_manifest(manifest.parent, change)


async def test_a_space_changed_under_the_same_version_is_never_mixed_into_the_store(
    tmp_path: Path, served
) -> None:
    manifest = embedder_folder(tmp_path / "plugin")
    endpoint, _ = served()
    runner = await _with_spaces(tmp_path, manifest=str(manifest), endpoint=endpoint)
    try:
        await _remember(runner, *MEMORIES)
        assert (await _recall(runner, PARAPHRASE)).items[0].text == CHAI
    finally:
        await runner.dispose()
    # the plugin now makes 56-number vectors, but its manifest keeps the space's version
    _space(manifest, dimensions=56)
    endpoint, _ = served(dimensions=56)
    runner = await _with_spaces(tmp_path, manifest=str(manifest), endpoint=endpoint)
    try:
        # space_changed: the store keeps its vectors apart and recalls by keywords only
        assert (await _recall(runner, PARAPHRASE)).items == ()
        assert [item.text for item in (await _recall(runner, "chai")).items] == [CHAI]
    finally:
        await runner.dispose()
    # a new version is another space: the memories are embedded again, and found by meaning
    _space(manifest, version="2")
    runner = await _with_spaces(tmp_path, manifest=str(manifest), endpoint=endpoint)
    try:
        found = await _recall(runner, PARAPHRASE)
    finally:
        await runner.dispose()
    assert found.items[0].text == CHAI


def test_the_reference_manifest_is_what_the_plugin_serves() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    [(space_id, space)] = manifest["contributions"]["ingestion"]["spaces"].items()
    assert (manifest["id"], space_id) == (quivr_embedder.PLUGIN_ID, quivr_embedder.SPACE)
    assert space["dimensions"] == quivr_embedder.DIMENSIONS
    assert quivr.inspect_manifest(MANIFEST).valid
