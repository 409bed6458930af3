"""Bulk ingest through the management plane: `import`, one result per memory."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mnemon_source_spaces import ProviderError, RememberRequest, RememberResult
from spaces_kit import ADA, KEY, open_spaces
from spaces_test_provider import MemoryProvider, memory_provider
from test_spaces import WithProviders

from mnemon import ManagementError
from mnemon_testing import MemoryCompositionRunner


async def _import(runner: Any, memories: list[Any], space: str = "memories") -> Any:
    client = runner.management_client(KEY, ADA)
    revision = await client.revision()
    result = await client.mutate(
        "import", {"space": space, "memories": memories}, confirmed=True, expected_revision=revision
    )
    return result.output


async def _texts(runner: Any) -> list[str]:
    texts: list[str] = []
    cursor = None
    client = runner.management_client(KEY, ADA)
    while True:
        payload: dict[str, Any] = {"space": "memories", "limit": 100}
        if cursor:
            payload["cursor"] = cursor
        page = await client.read("list", payload)
        texts += [memory["text"] for memory in page["memories"]]
        cursor = page["next_cursor"]
        if not cursor:
            return texts


async def test_an_import_stores_many_with_one_committed_result_each(tmp_path: Path) -> None:
    async with await open_spaces(tmp_path) as runner:
        memories = [{"text": f"bee fact {index}", "tags": ["bees"]} for index in range(300)]
        output = await _import(runner, memories)
        assert [r["index"] for r in output["results"]] == list(range(300))
        assert {r["completion"] for r in output["results"]} == {"committed"}
        assert (output["stored"], output["replayed"], output["refused"]) == (300, 0, 0)
        stored = await _texts(runner)
    # listed newest first: the last of the batch is the newest
    assert stored == [f"bee fact {index}" for index in reversed(range(300))]


async def test_keys_replay_in_and_across_batches_and_a_changed_memory_is_refused(
    tmp_path: Path,
) -> None:
    async with await open_spaces(tmp_path) as runner:
        first = await _import(
            runner,
            [
                {"text": "Ada keeps bees", "idempotency_key": "k1"},
                {"text": "Ada keeps bees", "idempotency_key": "k1"},
            ],
        )
        assert [r.get("replayed") for r in first["results"]] == [False, True]
        assert first["results"][0]["id"] == first["results"][1]["id"]
        again = await _import(
            runner,
            [
                {"text": "Ada keeps bees", "idempotency_key": "k1"},
                {"text": "Ada keeps wasps", "idempotency_key": "k1"},
                {"text": "Ada sells honey", "idempotency_key": "k2"},
            ],
        )
        outcomes = [(r["completion"], r.get("replayed"), r.get("code")) for r in again["results"]]
        assert outcomes == [
            ("committed", True, None),
            ("refused", None, "idempotency-conflict"),
            ("committed", False, None),
        ]
        assert sorted(await _texts(runner)) == ["Ada keeps bees", "Ada sells honey"]


async def test_invalid_or_oversized_memories_are_refused_alone_with_a_code(
    tmp_path: Path,
) -> None:
    secret = "the vault code is 4412"
    async with await open_spaces(tmp_path) as runner:
        output = await _import(
            runner,
            [
                {"text": "kept one"},
                {"text": secret + "x" * 8_000},
                {"text": secret + "\x00"},
                {"text": "kept two", "colour": "red"},
                "not an object",
                {"text": "kept three", "tags": ["ok"], "entities": ["Ada"]},
                {"text": "   "},
                {"text": "bad tags", "tags": "bees"},
            ],
        )
        codes = [(r["index"], r["completion"], r.get("code")) for r in output["results"]]
        assert codes == [
            (0, "committed", None),
            (1, "refused", "too-large"),
            (2, "refused", "invalid-item"),
            (3, "refused", "invalid-item"),
            (4, "refused", "invalid-item"),
            (5, "committed", None),
            (6, "refused", "invalid-item"),
            (7, "refused", "invalid-item"),
        ]
        messages = " ".join(r.get("message", "") for r in output["results"])
        assert "colour: unknown key" in messages
        assert "4412" not in messages  # a refusal names the field, never the memory's text
        assert sorted(await _texts(runner)) == ["kept one", "kept three"]


async def test_a_store_that_syncs_less_says_accepted_not_committed(tmp_path: Path) -> None:
    provider = {"type": "sqlite", "synchronous": "normal"}
    async with await open_spaces(tmp_path, provider=provider) as runner:
        output = await _import(runner, [{"text": "maybe durable"}])
    assert output["results"][0]["completion"] == "accepted"


class FailingBatches(MemoryProvider):
    """Stores a batch whole, or fails before storing any of it when one memory says so."""

    async def remember_many(self, requests: list[RememberRequest]) -> list[RememberResult]:
        if any("disk full" in request.text for request in requests):
            raise ProviderError("unavailable", "the store went away")
        return [await self.remember(request) for request in requests]


async def test_a_failed_batch_reports_no_result_and_keeps_earlier_batches(
    tmp_path: Path,
) -> None:
    plugin = WithProviders(memory_provider(kind=FailingBatches))
    async with await open_spaces(tmp_path, plugin=plugin, provider={"type": "memory"}) as runner:
        await _import(runner, [{"text": "first batch"}])
        with pytest.raises(ManagementError) as failed:
            await _import(runner, [{"text": "second batch"}, {"text": "disk full"}])
        assert "results" not in str(failed.value)
        assert await _texts(runner) == ["first batch"]


def _wait_for_rows(path: Path, count: int) -> None:
    """Poll the store until it holds `count` memories (the per-test timeout ends a hang)."""
    while True:
        with sqlite3.connect(path) as connection:
            if connection.execute("SELECT count(*) FROM memories").fetchone()[0] >= count:
                return
        time.sleep(0.01)


async def test_an_import_past_the_deadline_is_finished_by_running_it_again_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    provider = {"type": "sqlite", "path": str(path), "busy_timeout_ms": 10_000}
    memories = [{"text": f"late note {i}", "idempotency_key": f"late-{i}"} for i in range(50)]
    runner = MemoryCompositionRunner(source_timeout=1.0)
    async with await open_spaces(tmp_path, runner=runner, provider=provider) as runner:
        await _import(runner, [{"text": "first", "idempotency_key": "first"}])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process is writing: the batch must wait
        try:
            with pytest.raises(ManagementError) as late:
                await _import(runner, memories)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert (late.value.code, late.value.retryable) == ("timeout", True)
        assert "late note" not in str(late.value)
        # the batch the caller gave up on is stored once the store is free ...
        await anyio.to_thread.run_sync(_wait_for_rows, path, 1 + len(memories))
        # ... and the same import again replays every memory of it, writing none twice
        again = await _import(runner, memories)
        stored = await _texts(runner)
    assert (again["stored"], again["replayed"], again["refused"]) == (0, 50, 0)
    assert {r["completion"] for r in again["results"]} == {"committed"}
    assert sorted(stored) == sorted(["first", *(m["text"] for m in memories)])


async def test_a_key_another_space_holds_is_refused_there(tmp_path: Path) -> None:
    spaces = [{"name": "home", "writable": True}, {"name": "work", "writable": True}]
    async with await open_spaces(tmp_path, spaces=spaces) as runner:
        home = await _import(
            runner, [{"text": f"note {i}", "idempotency_key": f"k{i}"} for i in range(40)], "home"
        )
        assert home["stored"] == 40
        work = await _import(
            runner,
            [
                {"text": "note 3", "idempotency_key": "k3"},
                {"text": "fresh", "idempotency_key": "k-new"},
                {"text": "note 39", "idempotency_key": "k39"},
            ],
            "work",
        )
    outcomes = [(r["completion"], r.get("code")) for r in work["results"]]
    assert outcomes == [
        ("refused", "idempotency-conflict"),
        ("committed", None),
        ("refused", "idempotency-conflict"),
    ]


_LABEL_CHARACTERS = st.one_of(
    st.sampled_from(list(" aZ9-~")),  # mostly what labels are made of
    st.sampled_from(list("\t\n\x1f\x7f\xa0é\u2028\u3000")),
)


@given(st.lists(st.text(alphabet=_LABEL_CHARACTERS, max_size=7), max_size=3))
@example([" a"])
@example(["a "])
@example(["a  b"])
@example(["abcdef"])
@example(["a\tb"])
def test_labels_are_checked_as_the_one_rule_does_fast_path_or_not(values: list[str]) -> None:
    # the plain-label shortcut gives what collapsing whitespace and the text rule give
    from mnemon_source_spaces import _inputs

    from mnemon.sdk import SourceError, check_memory_text

    expected: list[str] | str = []
    for index, value in enumerate(values):
        try:
            label = check_memory_text(
                " ".join(value.split()),
                max_characters=5,
                single_line=True,
                field=f"tags[{index}]",
            )
        except SourceError as exc:
            expected = str(exc)
            break
        assert isinstance(expected, list)
        if label not in expected:
            expected.append(label)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(_inputs._LABEL_CHARACTERS, "tags", 5)
            got: list[str] | str = list(_inputs.checked_labels(values, "tags"))
    except SourceError as exc:
        got = str(exc)
    assert got == expected
