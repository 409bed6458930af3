"""A Quivr ranker hosted over HTTP ranks a real turn's recall over the spaces Source."""

from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import mnemon_source_spaces as spaces
import mnemon_strategy_quivr as quivr
import pytest
from launched import edit_manifest, ended_within, kill, ranker_folder, recorded, running

from mnemon import InstallError
from mnemon.sdk import install_memory
from mnemon_testing import MemoryCompositionRunner

sys.path.insert(0, str(Path(__file__).parent / "rankers"))
import quivr_ranker

MANIFEST = Path(__file__).parent / "rankers" / "quivr-plugin.yaml"
RECALL = "source:spaces/recall"
ADA = {"scope": {"user_id": "ada"}}
MEMORIES = [
    "Ada keeps her tea in the blue tin on the left shelf.",
    "The harbour strike delayed Ada's shipment of green tea and tea cups.",
    "Ada's bicycle has a flat tyre.",
    "Tea with lemon is what Ada drinks when she has a cold; tea tea.",
    "Ada plays chess on Sundays.",
    "Ada's kettle whistles when the tea water boils.",
    "Green tea from the market is Ada's usual.",
]


def allow(offer):
    return True


@pytest.fixture
def ranker_server():
    started = []

    def start(mode="correct"):
        server = quivr_ranker.serve("127.0.0.1", 0, mode)
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


async def _runner(tmp_path, **config):
    runner = MemoryCompositionRunner()
    await runner.mount(spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")})
    await runner.mount(quivr, instance_id="quivr", config={"manifest": str(MANIFEST), **config})
    turn = await runner.begin_turn(ADA)
    for text in MEMORIES:
        await turn.execute_action("source:spaces/remember", {"text": text}, allow)
    await turn.release()
    return runner


async def _recall(runner, query="tea", **fields):
    turn = await runner.begin_turn(ADA)
    try:
        return await turn.execute_route(RECALL, {"query": query, **fields})
    finally:
        await turn.release()


async def _own_order(tmp_path, query="tea", **fields):
    """What the spaces Source returns by itself, with no ranker in the way."""
    from mnemon_testing import SelectAll

    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")}
        )
        await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
        turn = await runner.begin_turn(ADA)
        try:
            return await turn.execute_route(RECALL, {"query": query, **fields})
        finally:
            await turn.release()
    finally:
        await runner.dispose()


async def test_a_correct_ranker_ranks_a_real_turns_recall(tmp_path, ranker_server):
    runner = await _runner(tmp_path, endpoint=ranker_server())
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    assert evidence.output == {
        "status": "ranked",
        "ranker": "mnemon.bm25",
        "profile": "default",
        "rounds": 2,
    }
    texts = [item.text for item in evidence.items]
    # BM25 over the served candidates: the memory saying "tea" most, densest, comes first
    assert texts[0].startswith("Tea with lemon")
    assert len(texts) == 3
    assert all("tea" in text.casefold() for text in texts)
    scores = [item.metadata["ranker_score"] for item in evidence.items]
    assert scores == sorted(scores, reverse=True)
    own = await _own_order(tmp_path, "tea", limit=3)
    assert sorted(texts) == sorted(item.text for item in own.items)


RULE_BREAKERS = [
    "unserved_candidate",
    "duplicate_hit",
    "too_many_hits",
    "too_many_rounds",
    "too_many_requests",
    "candidate_limit",
    "unknown_space",
    "plugin_dependency",
    "over_budget",
    "schema_violation",
    "response_too_large",
]


@pytest.mark.parametrize("rule", RULE_BREAKERS)
async def test_a_broken_ranker_is_caught_by_exactly_its_rule_and_recall_survives(
    tmp_path, ranker_server, rule
):
    runner = await _runner(tmp_path, endpoint=ranker_server(rule))
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    own = await _own_order(tmp_path, "tea", limit=3)
    assert evidence.output["status"] == "fallback"
    assert evidence.output["diagnostic"]["code"] == "retrieval_plugin_invalid"
    assert list(evidence.output["diagnostic"]["rules"]) == [rule]
    # the user's recall results, in the Source's own order
    assert [item.text for item in evidence.items] == [item.text for item in own.items]
    assert evidence.items


@pytest.mark.parametrize(
    ("mode", "status", "code"),
    [
        ("refuses", "refused", "unsupported_search"),
        ("busy", "fallback", "retrieval_plugin_unavailable"),
        ("crashes", "fallback", "retrieval_plugin_unavailable"),
    ],
)
async def test_failures_map_per_the_protocol(tmp_path, ranker_server, mode, status, code):
    runner = await _runner(tmp_path, endpoint=ranker_server(mode))
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    assert evidence.output["status"] == status
    assert evidence.output["diagnostic"]["code"] == code
    assert len(evidence.items) == 3
    # the plugin's own error text never reaches the evidence
    assert "secret-token" not in str(evidence.model_dump())


async def test_an_unreachable_ranker_falls_back(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    # the port is closed again: nothing listens, the connection is refused
    runner = await _runner(tmp_path, endpoint=f"http://127.0.0.1:{free}")
    try:
        evidence = await _recall(runner, "tea", limit=2)
    finally:
        await runner.dispose()
    assert evidence.output["diagnostic"]["code"] == "retrieval_plugin_unavailable"
    assert len(evidence.items) == 2


async def test_an_overrun_is_search_deadline_exceeded(tmp_path, ranker_server):
    # the hasty profile allows 1 s; the slow ranker answers after 2 s
    runner = await _runner(tmp_path, endpoint=ranker_server("slow"), profile="hasty")
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    assert evidence.output["diagnostic"]["code"] == "search_deadline_exceeded"
    assert len(evidence.items) == 3


async def test_other_routes_are_read_as_asked(tmp_path, ranker_server):
    runner = await _runner(tmp_path, endpoint=ranker_server("crashes"))
    try:
        turn = await runner.begin_turn(ADA)
        try:
            evidence = await turn.execute_route("source:spaces/inspect", {})
        finally:
            await turn.release()
    finally:
        await runner.dispose()
    assert evidence.output is None or "ranker" not in str(evidence.output)


async def test_a_launched_ranker_ranks_and_stops_with_the_entry(tmp_path):
    runner = await _runner(tmp_path, launch=True)
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    assert evidence.output["status"] == "ranked"
    assert evidence.items[0].text.startswith("Tea with lemon")


async def test_a_ranker_declared_beside_contributions_mnemon_does_not_host_ranks(tmp_path):
    def beside(manifest):
        manifest["contributions"]["subscription"] = {"expression_schema": {"type": "object"}}
        manifest["run"]["command"].extend(["--also", "subscription"])

    manifest = ranker_folder(tmp_path / "ranker")
    edit_manifest(manifest.parent, beside)
    runner = await _runner(tmp_path, manifest=str(manifest), launch=True)
    try:
        evidence = await _recall(runner, "tea", limit=3)
    finally:
        await runner.dispose()
    assert evidence.output["status"] == "ranked"


async def test_unmounting_stops_the_launched_plugin(tmp_path):
    class Launching:
        def apply(self, ctx):
            self.ranker = quivr.create_ranker(
                quivr.QUIVR_CONFIGURATION.validate({"manifest": str(MANIFEST), "launch": True})
            )
            ctx.on_dispose(self.ranker.aclose)
            install_memory(ctx, strategies=[quivr.define_ranking_strategy(self.ranker)])

    plugin = Launching()
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")}
        )
        unmount = await runner.mount(plugin, instance_id="quivr")
        assert plugin.ranker.serving_endpoint is None  # launched on first use, not at mount
        evidence = await _recall(runner, "tea")
        assert evidence.output["status"] == "ranked"
        endpoint = plugin.ranker.serving_endpoint
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{endpoint}/v0/health")).status_code == 200
            await unmount()
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{endpoint}/v0/health")
    finally:
        await runner.dispose()


async def test_unmounting_ends_every_process_the_launched_ranker_started(tmp_path):
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--with-child", "--record", str(started))
    child = None
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            spaces, instance_id="spaces", config={"data_dir": str(tmp_path / "spaces")}
        )
        config = {"manifest": str(manifest), "launch": True}
        unmount = await runner.mount(quivr, instance_id="quivr", config=config)
        evidence = await _recall(runner, "tea")
        assert evidence.output["status"] == "ranked"
        child = recorded(started)["child"]
        assert running(child)
        await unmount()
        # the ranker's worker ignores SIGTERM: stopping the ranker must end its whole group
        assert ended_within(child, 1.0), "the ranker's child process outlived its entry"
    finally:
        kill(child)
        await runner.dispose()


async def test_a_launched_ranker_gets_its_declared_secrets_and_nothing_else_of_the_host(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MNEMON_TEST_HOST_ONLY_SECRET", "host-only-value-0123456789")
    monkeypatch.setenv("BM25_API_KEY", "declared-value-0123456789")  # the manifest declares it
    monkeypatch.setenv("MNEMON_TEST_QUIVR_KEY", "the-shared-engine-key-0123456789")
    started = tmp_path / "started.json"
    manifest = ranker_folder(tmp_path / "ranker", "--record", str(started))
    runner = await _runner(
        tmp_path, manifest=str(manifest), launch=True, signing_secret_env="MNEMON_TEST_QUIVR_KEY"
    )
    try:
        evidence = await _recall(runner, "tea")
    finally:
        await runner.dispose()
    assert evidence.output["status"] == "ranked"
    environment = recorded(started)["environment"]
    assert "MNEMON_TEST_HOST_ONLY_SECRET" not in environment
    assert environment["BM25_API_KEY"] == "declared-value-0123456789"
    # the signing key, where a launched plugin that verifies signed requests reads it
    assert environment["MNEMON_TEST_QUIVR_KEY"] == "the-shared-engine-key-0123456789"
    assert environment["QUIVR_PLUGIN_MANIFEST"] == str(manifest.resolve())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "configuration.endpoint"),
        ({"endpoint": "http://127.0.0.1:1", "launch": True}, "configuration.endpoint"),
        ({"endpoint": "ftp://x"}, "configuration.endpoint"),
        ({"endpoint": "http://127.0.0.1:1", "profile": "nope"}, "configuration.profile"),
        (
            {"endpoint": "http://127.0.0.1:1", "signing_secret_env": "MNEMON_TEST_UNSET_SECRET"},
            "configuration.signing_secret_env",
        ),
    ],
)
async def test_bad_configuration_names_the_key(tmp_path, config, message):
    runner = MemoryCompositionRunner()
    try:
        with pytest.raises(InstallError, match=message):
            await runner.mount(
                quivr, instance_id="quivr", config={"manifest": str(MANIFEST), **config}
            )
    finally:
        await runner.dispose()


async def test_an_invalid_manifest_is_refused_with_its_codes_not_its_path(tmp_path):
    bad = tmp_path / "secret-folder" / "quivr-plugin.yaml"
    bad.parent.mkdir()
    bad.write_text(MANIFEST.read_text().replace("max_rounds: 2", "max_rounds: 9"))
    runner = MemoryCompositionRunner()
    try:
        with pytest.raises(InstallError, match="schema_violation") as caught:
            await runner.mount(
                quivr,
                instance_id="quivr",
                config={"manifest": str(bad), "endpoint": "http://127.0.0.1:1"},
            )
        assert "secret-folder" not in str(caught.value)
        with pytest.raises(InstallError, match="cannot be read"):
            await runner.mount(
                quivr,
                instance_id="quivr",
                config={
                    "manifest": str(tmp_path / "missing.yaml"),
                    "endpoint": "http://127.0.0.1:1",
                },
            )
        with pytest.raises(InstallError, match=r"configuration\.manifest: required"):
            await runner.mount(
                quivr, instance_id="quivr", config={"endpoint": "http://127.0.0.1:1"}
            )
    finally:
        await runner.dispose()


async def test_a_plugin_mnemon_hosts_nothing_of_is_refused_with_the_reasons(tmp_path):
    full = Path(__file__).parent / "fixtures/quivr/fixtures/manifests/valid/full.yaml"
    runner = MemoryCompositionRunner()
    try:
        with pytest.raises(InstallError, match="mnemon hosts none") as caught:
            await runner.mount(
                quivr,
                instance_id="quivr",
                config={"manifest": str(full), "endpoint": "http://127.0.0.1:1"},
            )
        assert "normalizer: not hosted" in str(caught.value)
    finally:
        await runner.dispose()


class _Verifying(quivr_ranker.Handler):
    """The correct ranker behind signed engine requests (Plugin API 0.14)."""

    key = b""

    def do_POST(self):
        import time

        body = self.rfile.read(int(self.headers["Content-Length"]))
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            quivr.verify_engine_request(
                token,
                self.key,
                audience="mnemon.bm25",
                plugin_id="mnemon.bm25",
                contribution="retrieval",
                method="POST",
                target=self.path,
                body=body,
                now=int(time.time()),
            )
        except quivr.SignatureRejected:
            return self._send(
                401, {"code": "unauthenticated", "message": "bad token", "retryable": False}
            )
        return self._send(200, quivr_ranker.answer(json.loads(body), "correct"))


async def _signed_recall(tmp_path, handler):
    """A recall ranked by `handler` served on loopback, with MNEMON_TEST_QUIVR_KEY signing."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        runner = await _runner(
            tmp_path,
            endpoint=f"http://127.0.0.1:{server.server_address[1]}",
            signing_secret_env="MNEMON_TEST_QUIVR_KEY",
        )
        try:
            return await _recall(runner, "tea", limit=3)
        finally:
            await runner.dispose()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("server_key", "status"),
    [
        (b"the-shared-engine-key-0123456789", "ranked"),
        (b"another-key-the-host-does-not-have", "refused"),
    ],
)
async def test_signed_requests_reach_a_verifying_plugin(tmp_path, monkeypatch, server_key, status):
    monkeypatch.setenv("MNEMON_TEST_QUIVR_KEY", "the-shared-engine-key-0123456789")
    handler = type("Verifying", (_Verifying,), {"key": server_key})
    evidence = await _signed_recall(tmp_path, handler)
    assert evidence.output["status"] == status
    assert len(evidence.items) == 3
    assert "the-shared-engine-key" not in str(evidence.model_dump())


# a key the envelope's code pattern admits, so only scrubbing keeps it out of the evidence
SIGNING_KEY = "engine_key_0123456789abcdef"


class _RefusingWithTheKey(quivr_ranker.Handler):
    """A ranker that refuses every search with an error code that repeats the signing key."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        envelope = {"code": SIGNING_KEY, "message": "refused", "retryable": False}
        return self._send(400, envelope)


async def test_a_plugins_refusal_never_repeats_the_signing_key(tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMON_TEST_QUIVR_KEY", SIGNING_KEY)
    evidence = await _signed_recall(tmp_path, _RefusingWithTheKey)
    # a refusal whose code had to be scrubbed is no valid envelope: the plugin is unavailable
    assert evidence.output["status"] == "fallback"
    assert evidence.output["diagnostic"]["code"] == "retrieval_plugin_unavailable"
    assert len(evidence.items) == 3
    assert SIGNING_KEY not in json.dumps(evidence.model_dump(mode="json"))


async def test_document_search_is_ranked_too(tmp_path, ranker_server):
    import mnemon_source_documents as documents

    scope = {"scope": {"user_id": "ada", "workspace": "w1"}}
    runner = MemoryCompositionRunner()
    try:
        await runner.mount(
            documents, instance_id="docs", config={"data_dir": str(tmp_path / "docs")}
        )
        await runner.mount(
            quivr,
            instance_id="quivr",
            config={"manifest": str(MANIFEST), "endpoint": ranker_server()},
        )
        turn = await runner.begin_turn(scope)
        for title, body in [
            ("Gardening", "Tomatoes need sun. Water daily."),
            ("Sauce", "Cook the tomatoes slowly; tomatoes, tomatoes."),
            ("Bikes", "Nothing about that here."),
        ]:
            await turn.execute_action("source:docs/create", {"title": title, "body": body}, allow)
        await turn.release()
        turn = await runner.begin_turn(scope)
        try:
            evidence = await turn.execute_route("source:docs/search", {"query": "tomatoes"})
        finally:
            await turn.release()
    finally:
        await runner.dispose()
    assert evidence.output["status"] == "ranked"
    assert [item.provenance["title"] for item in evidence.items] == ["Sauce", "Gardening"]
    assert evidence.items[0].metadata["ranker_score"] > evidence.items[1].metadata["ranker_score"]
