"""The `reindex` management contract as `mnemon reindex` and `mnemon import` call it.

Any Source may offer `reindex`; its answers are untrusted: the loop stops when nothing
remains or a call gets nothing done, and an answer that is not a count is refused by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mnemon import ManagementResult, MemoryHost, Scope
from mnemon._cli._options import CommandError
from mnemon._cli._reindex import Reindexed, fill_vectors, reindexable
from mnemon.sdk import (
    FactsRequest,
    ManageRequest,
    ProjectionRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    define_memory_source,
)
from tests.kit import Plugin, strategy_plugin

NOTHING = {"type": "object", "properties": {}, "additionalProperties": False}
MANIFEST = {
    "type_id": "vectored",
    "package_name": "mnemon-test-vectored",
    "role": "memory",
    "capabilities": ["project"],
    "consistency": "exact-snapshot",
    "management": {
        "label": "Vectored",
        "description": "Memories with vectors.",
        "operations": [
            {"id": "reindex", "kind": "mutate", "description": "Embed.", "input_schema": NOTHING}
        ],
    },
}


class Scripted:
    """A Source whose reindex answers the next of a script, then repeats the last one."""

    def __init__(self, init: SourceInit, answers: Sequence[Any]) -> None:
        self.key = init.instance_key
        self.answers = list(answers)
        self.calls = 0

    async def facts(self, request: FactsRequest) -> SourceFacts:
        return SourceFacts(
            instance_key=self.key,
            type_id="vectored",
            role="memory",
            availability="ready",
            revision="r1",
            capabilities=("project",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        return ViewContribution()

    async def manage(self, request: ManageRequest) -> ManagementResult:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return ManagementResult(
            source_key=self.key, operation="reindex", output=answer, revision="r1"
        )


async def _fill(answers: Sequence[Any]) -> tuple[Reindexed, int]:
    made: list[Scripted] = []

    def build(init: SourceInit) -> Scripted:
        made.append(Scripted(init, answers))
        return made[-1]

    host = MemoryHost()
    await host.mount(Plugin(sources=[define_memory_source(MANIFEST, build)]), instance_id="v")
    await host.mount(strategy_plugin(), instance_id="strategy")
    try:
        assert [entry.source_key for entry in reindexable(host)] == ["source:v"]
        tally = Reindexed("source:v")
        await fill_vectors(host, "source:v", Scope(user_id="ada"), tally)
        return tally, made[-1].calls
    finally:
        await host.dispose()


async def test_it_calls_until_nothing_remains() -> None:
    tally, calls = await _fill([{"done": 5, "remaining": 3}, {"done": 3, "remaining": 0}])
    assert (tally.done, tally.remaining, calls) == (8, 0, 2)


async def test_it_stops_when_a_call_gets_nothing_done() -> None:
    tally, calls = await _fill([{"done": 2, "remaining": 5}, {"done": 0, "remaining": 5}])
    assert (tally.done, tally.remaining, calls) == (2, 5, 2)


async def test_a_source_that_does_not_count_is_called_until_it_finds_nothing() -> None:
    tally, calls = await _fill([{"done": 4, "remaining": None}, {"done": 0, "remaining": None}])
    assert (tally.done, tally.remaining, calls) == (4, None, 2)


@pytest.mark.parametrize(
    "answer",
    [{"done": "all of ada's secrets"}, {"done": -1, "remaining": 0}, {"done": 1.5},
     {"done": True, "remaining": 0}, {"done": 1, "remaining": -3}, ["done", 1]],
)  # fmt: skip
async def test_an_answer_that_is_not_a_count_is_refused_by_name(answer: Any) -> None:
    with pytest.raises(CommandError) as caught:
        await _fill([answer])
    assert caught.value.code == "invalid-output"
    assert str(caught.value.message) == (
        "source:v/reindex answered without a count of done and remaining memories"
    )
    assert "secret" not in str(caught.value.message)
