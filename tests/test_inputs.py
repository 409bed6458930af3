"""Bounded inputs: oversized route, action and management inputs are refused before any work."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon import (
    ActionError,
    DefinitionError,
    ManagementError,
    ManagementRequest,
    MemoryHost,
    RouteError,
)
from mnemon._json import freeze_json, json_size_exceeds
from mnemon._schema import input_problems
from tests.kit import fake_source, strategy_plugin
from tests.test_management import ledger_plugin

MILLION = list(range(1_000_000))  # about 6.9 MB of JSON


async def open_turn(**host: Any) -> tuple[MemoryHost, Any, Any]:
    memory = MemoryHost(**host)
    source, probe = fake_source()
    await memory.mount(source, instance_id="a")
    await memory.mount(strategy_plugin(), instance_id="strategy")
    return memory, await memory.begin_turn(), probe


async def test_an_oversized_route_input_is_refused_before_the_source_runs() -> None:
    memory, turn, probe = await open_turn()
    async with memory:
        with pytest.raises(RouteError) as caught:
            await turn.execute_route("source:a/lookup", {"query": MILLION})
        assert caught.value.code == "input-too-large"
        assert str(caught.value) == (
            "route 'source:a/lookup' input: larger than 262144 bytes of JSON "
            "(the host's max_input_bytes)"
        )
        assert probe.queries == []
        # the refusal spent nothing: the route still has its calls
        assert len((await turn.execute_route("source:a/lookup", {"query": "x"})).items) == 1


async def test_an_oversized_action_input_is_refused_before_authorization() -> None:
    memory, turn, probe = await open_turn()
    asked: list[str] = []

    def authorize(offer: Any) -> bool:
        asked.append(offer.id)
        return True

    async with memory:
        with pytest.raises(ActionError) as caught:
            await turn.execute_action("source:a/store", {"blob": "x" * 300_000}, authorize)
        assert caught.value.code == "input-too-large"
        assert caught.value.receipt is None  # nothing was attempted
        assert asked == []
        assert probe.mutations == []


async def test_the_limit_is_a_host_setting() -> None:
    memory, turn, probe = await open_turn(max_input_bytes=2048)
    async with memory:
        await turn.execute_route("source:a/lookup", {"query": "q" * 150})  # under the schema's 200
        with pytest.raises(ActionError, match="larger than 2048 bytes") as caught:
            await turn.execute_action("source:a/store", {"x": "y" * 2100}, lambda offer: True)
        assert caught.value.code == "input-too-large"
        assert len(probe.queries) == 1


@pytest.mark.parametrize("value", [0, 1023, 64 * 1024 * 1024 + 1, 2.5, True, "256k"])
def test_an_invalid_limit_names_the_setting(value: object) -> None:
    with pytest.raises(DefinitionError, match=r"^max_input_bytes: must be an integer from 1024"):
        MemoryHost(max_input_bytes=value)  # type: ignore[arg-type]


async def test_reconfigure_changes_the_limit_for_new_turns() -> None:
    memory, turn, _ = await open_turn()
    async with memory:
        await memory.reconfigure(max_input_bytes=1024)
        later = await memory.begin_turn()
        with pytest.raises(ActionError, match="larger than 1024 bytes"):
            await later.execute_action("source:a/store", {"x": "y" * 1100}, lambda offer: True)
        # the turn opened before keeps its generation's limit: the input reaches the schema
        with pytest.raises(ActionError) as caught:
            await turn.execute_action("source:a/store", {"x": "y" * 1100}, lambda offer: True)
        assert caught.value.code == "invalid-input"


async def test_an_oversized_management_input_is_refused() -> None:
    store: dict[str, list[str]] = {}
    async with MemoryHost() as memory:
        await memory.mount(ledger_plugin(store), instance_id="ledger")
        await memory.mount(strategy_plugin(), instance_id="strategy")
        client = memory.management_client("source:ledger", {"user_id": "u1"})
        revision = await client.revision()
        with pytest.raises(ManagementError) as caught:
            await client.mutate(
                "set", {"text": "z" * 300_000}, confirmed=True, expected_revision=revision
            )
        assert caught.value.code == "input-too-large"
        with pytest.raises(ManagementError, match="larger than 262144 bytes"):
            await memory.execute_management(
                {"source_key": "source:ledger", "operation": "show", "input": {"x": MILLION}}
            )
        assert store == {}


async def test_a_management_request_built_by_the_caller_is_still_measured() -> None:
    # the host's clients measure an input once, before copying it; a request the caller
    # built (and pydantic copied) never was, so the engine measures it
    store: dict[str, list[str]] = {}
    async with MemoryHost(max_input_bytes=4096) as memory:
        await memory.mount(ledger_plugin(store), instance_id="ledger")
        await memory.mount(strategy_plugin(), instance_id="strategy")
        client = memory.management_client("source:ledger", {"user_id": "u1"})
        request = ManagementRequest(
            source_key="source:ledger",
            operation="set",
            input={"text": "z" * 5_000},
            scope={"user_id": "u1"},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        with pytest.raises(ManagementError, match="larger than 4096 bytes") as caught:
            await memory.execute_management(request)
        assert caught.value.code == "input-too-large"
        with pytest.raises(ManagementError, match="larger than 4096 bytes"):
            await client.mutate(
                "set",
                {"text": "z" * 5_000},
                confirmed=True,
                expected_revision=request.expected_revision,
            )
        assert store == {}


async def test_a_shared_string_or_a_cycle_cannot_inflate_the_work() -> None:
    memory, turn, probe = await open_turn()
    big = "b" * 100_000
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    async with memory:
        with pytest.raises(RouteError) as caught:
            await turn.execute_route("source:a/lookup", {"query": [big] * 100_000})
        assert caught.value.code == "input-too-large"
        with pytest.raises(RouteError, match=r"cycle at \$\.query\[0\]") as caught:
            await turn.execute_route("source:a/lookup", {"query": cyclic})
        assert caught.value.code == "invalid-input"
        assert probe.queries == []


async def test_only_the_first_few_schema_problems_are_checked_and_named() -> None:
    memory, turn, _ = await open_turn()
    wide = {f"k{i}": i for i in range(5_000)}
    async with memory:
        with pytest.raises(RouteError) as caught:
            await turn.execute_route("source:a/lookup", wide)
        assert caught.value.code == "invalid-input"
        # one additionalProperties problem names the extras; it never quotes a value
        assert str(caught.value).count("unsupported property") == 1


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(
        alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters='"\\')
    ),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(alphabet="abcdefé", max_size=5), children, max_size=5)
    ),
    max_leaves=30,
)


@given(value=JSON, slack=st.integers(min_value=-3, max_value=3))
def test_the_size_walk_agrees_with_compact_json(value: Any, slack: int) -> None:
    size = len(orjson.dumps(value))
    limit = max(size + slack, 0)
    assert json_size_exceeds(value, limit) == (size > limit)


@pytest.mark.parametrize(
    "value",
    [
        {"tags": []},
        {"tags": ["a"], "entities": ["Ada Lovelace", "Bo"]},
        {"memories": [{"text": "x", "tags": ["t", "u"], "entities": []}] * 3},
        {"mixed": ["a", 1, None, ["b"], {"c": "d"}, "é"]},
        {"deep": [[["a"]], []]},
    ],
)
def test_the_size_walk_counts_lists_of_labels_exactly(value: Any) -> None:
    # lists inside objects are counted where they are met: the count must not change
    size = len(orjson.dumps(value))
    for limit in range(max(size - 4, 0), size + 4):
        assert json_size_exceeds(value, limit) == (size > limit), limit


ARRAYS = {
    "type": "object",
    "properties": {
        "ids": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "uniqueItems": True},
        "pair": {"enum": [["a", 1], ["b", 2]]},
        "nested": {"type": "array", "items": {"type": "array", "minItems": 1}},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ({"ids": ["a", "b"], "pair": ["b", 2], "nested": [[1], ["x"]]}, []),
        ({"ids": ["a", 7]}, ["property 'ids[1]': fails type \"string\""]),
        ({"ids": ["a", "b", "c", "d"]}, ["property 'ids': fails maxItems 3"]),
        ({"ids": ["a", "a"]}, ["property 'ids': fails uniqueItems"]),
        ({"pair": ["a", 2]}, ['property \'pair\': fails enum [["a",1],["b",2]]']),
        ({"nested": [[]]}, ["property 'nested[0]': fails minItems 1"]),
        ({"ids": "a"}, ["property 'ids': fails type \"array\""]),
    ],
    ids=["valid", "item-type", "too-many", "repeated", "enum", "nested", "not-an-array"],
)
def test_frozen_arrays_are_checked_as_json_arrays(value: Any, problems: list[str]) -> None:
    # inputs reach the schema frozen, arrays as tuples: the same verdict as the plain value
    assert input_problems(ARRAYS, freeze_json(value)) == problems
    assert input_problems(ARRAYS, value) == problems
