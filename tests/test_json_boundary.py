"""The JSON boundary: what crosses is checked, copied, frozen and canonical."""

from __future__ import annotations

import copy
import datetime
import enum
import hashlib
import math
import pickle
import re
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

import mnemon.sdk
from mnemon._json import MAX_JSON_DEPTH, FrozenDict, JsonValueError, canonical_json, freeze_json


class _Level(enum.IntEnum):
    LOW = 1


class _Name(str):
    __slots__ = ()


class _Opaque:
    pass


# (value, words the error must contain); every one of these must be refused wherever it sits
REJECTED = [
    pytest.param(float("nan"), "non-finite", id="nan"),
    pytest.param(math.inf, "non-finite", id="positive-infinity"),
    pytest.param(-math.inf, "non-finite", id="negative-infinity"),
    pytest.param(b"bytes", "unsupported type bytes", id="bytes"),
    pytest.param({1, 2}, "unsupported type set", id="set"),
    pytest.param(frozenset({1}), "unsupported type frozenset", id="frozenset"),
    pytest.param(
        datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
        "unsupported type datetime",
        id="datetime",
    ),
    pytest.param(_Opaque(), "unsupported type _Opaque", id="arbitrary-object"),
    pytest.param(_Name("text"), "unsupported type _Name", id="str-subclass"),
    pytest.param(_Level.LOW, "unsupported type _Level", id="int-enum"),
    pytest.param({1: "x"}, "non-string key int", id="int-key"),
    pytest.param({(1, 2): "x"}, "non-string key tuple", id="tuple-key"),
    pytest.param("ok\ud800", "lone surrogate", id="lone-surrogate"),
    pytest.param(2**64, "64-bit", id="int-above-64-bit"),
    pytest.param(-(2**63) - 1, "64-bit", id="int-below-64-bit"),
]

# (how the bad value is embedded, the path the error must name)
PLACEMENTS = [
    pytest.param(lambda value: value, "$", id="top-level"),
    pytest.param(lambda value: {"a": {"b": value}}, "$.a.b", id="in-dict"),
    pytest.param(lambda value: {"a": {"b": [0, value]}}, "$.a.b[1]", id="in-list"),
    pytest.param(lambda value: [value], "$[0]", id="in-top-level-list"),
]


def _at_path(path: str) -> str:
    # the path is the last thing in the message, so `$.a` cannot match `$.a.b`
    return rf"{re.escape(path)}$"


@pytest.mark.parametrize(("value", "reason"), REJECTED)
@pytest.mark.parametrize(("place", "path"), PLACEMENTS)
def test_freeze_json_rejects_value_and_names_path(
    value: object, reason: str, place: Callable[[object], object], path: str
) -> None:
    with pytest.raises(JsonValueError, match=_at_path(path)) as info:
        freeze_json(place(value), what="hints")
    assert info.value.path == path
    assert reason in info.value.reason
    assert str(info.value).startswith("hints: ")


@pytest.mark.parametrize(("value", "reason"), REJECTED)
def test_configuration_digest_rejects_value_with_mnemon_error(value: object, reason: str) -> None:
    with pytest.raises(mnemon.MnemonError, match=_at_path("$.a.b[1]")) as info:
        mnemon.sdk.configuration_digest({"a": {"b": [0, value]}})
    assert isinstance(info.value, ValueError)
    assert reason in str(info.value)


@pytest.mark.parametrize(("value", "reason"), REJECTED)
def test_model_json_field_rejects_value_with_path(value: object, reason: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        mnemon.ReadGrant(source_key="source:a", value={"a": {"b": [0, value]}})
    assert reason in str(info.value)
    assert "$.a.b[1]" in str(info.value)


def test_lone_surrogate_in_key_is_rejected_with_path() -> None:
    with pytest.raises(JsonValueError, match="lone surrogate") as info:
        freeze_json({"ok": {"bad\ud800": 1}})
    assert info.value.path.startswith("$.ok")


def test_configuration_digest_rejects_lone_surrogate_key_with_mnemon_error() -> None:
    with pytest.raises(mnemon.MnemonError, match="lone surrogate"):
        mnemon.sdk.configuration_digest({"bad\ud800": 1})


def test_source_hints_reject_lone_surrogate_key_as_validation_error() -> None:
    with pytest.raises(pydantic.ValidationError, match="lone surrogate"):
        _facts(hints={"bad\ud800": 1})


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="null"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false"),
        pytest.param(0, id="zero"),
        pytest.param(2**64 - 1, id="max-unsigned-64-bit"),
        pytest.param(-(2**63), id="min-signed-64-bit"),
        pytest.param(-1.5e300, id="finite-float"),
        pytest.param("", id="empty-string"),
        pytest.param("é👍🏽\u200d\n", id="non-ascii-string"),
        pytest.param([], id="empty-list"),
        pytest.param({}, id="empty-dict"),
        pytest.param({"a b": [1, "x", None, {"c": 2.5}]}, id="nested"),
    ],
)
def test_freeze_json_accepts_json_values_unchanged(value: object) -> None:
    frozen = freeze_json(value)
    assert canonical_json(frozen) == canonical_json(value)
    if isinstance(value, dict):
        assert type(frozen) is FrozenDict
    elif isinstance(value, list):
        assert type(frozen) is tuple
    else:
        assert type(frozen) is type(value)
        assert frozen == value


def test_freeze_json_keeps_bool_distinct_from_int() -> None:
    assert freeze_json(True) is True
    assert canonical_json(freeze_json({"a": True})) == b'{"a":true}'


def test_tuples_are_json_arrays() -> None:
    assert freeze_json({"a": (1, [2])}) == {"a": (1, (2,))}
    assert mnemon.sdk.configuration_digest({"a": (1, 2)}) == mnemon.sdk.configuration_digest(
        {"a": [1, 2]}
    )


# ------------------------------------------------------------------------- depth


def _nested(containers: int, kind: str) -> Any:
    value: Any = [] if kind == "list" else {}
    for level in range(containers - 1):
        as_list = kind == "list" or (kind == "mixed" and level % 2 == 1)
        value = [value] if as_list else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
def test_nesting_of_48_containers_is_accepted(kind: str) -> None:
    assert MAX_JSON_DEPTH == 48
    value = _nested(48, kind)
    assert freeze_json(value) == freeze_json(copy.deepcopy(value))
    assert mnemon.sdk.configuration_digest(value).startswith("config:")


@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
def test_nesting_of_49_containers_is_rejected(kind: str) -> None:
    with pytest.raises(JsonValueError, match="nesting deeper than 48") as info:
        freeze_json(_nested(49, kind))
    # the 49th container is the one named: 48 steps below the root
    assert info.value.path.count("[") + info.value.path.count(".") == 48
    with pytest.raises(mnemon.MnemonError, match="nesting deeper than 48"):
        mnemon.sdk.configuration_digest(_nested(49, kind))


# ------------------------------------------------------------------------- cycles and sharing


def _self_list() -> object:
    value: list[object] = [1]
    value.append(value)
    return value


def _self_dict() -> object:
    value: dict[str, object] = {"a": 1}
    value["self"] = value
    return value


def _indirect_cycle() -> object:
    outer: dict[str, object] = {"items": []}
    inner = {"back": outer}
    outer["items"] = [{"x": 1}, inner]
    return outer


@pytest.mark.parametrize(
    ("make", "path"),
    [
        pytest.param(_self_list, "$[1]", id="list-contains-itself"),
        pytest.param(_self_dict, "$.self", id="dict-contains-itself"),
        pytest.param(_indirect_cycle, "$.items[1].back", id="indirect-cycle"),
    ],
)
def test_cycles_are_rejected_with_path(make: Callable[[], object], path: str) -> None:
    with pytest.raises(JsonValueError, match=_at_path(path)) as info:
        freeze_json(make())
    assert info.value.reason == "cycle"
    with pytest.raises(mnemon.MnemonError, match="cycle"):
        mnemon.sdk.configuration_digest(make())


def test_shared_subtrees_are_accepted() -> None:
    shared = {"x": [1, 2]}
    frozen = freeze_json({"left": shared, "right": shared, "both": [shared, shared]})
    assert frozen == {"left": {"x": (1, 2)}, "right": {"x": (1, 2)}, "both": ({"x": (1, 2)},) * 2}
    assert canonical_json(frozen) == (
        b'{"both":[{"x":[1,2]},{"x":[1,2]}],"left":{"x":[1,2]},"right":{"x":[1,2]}}'
    )


# ------------------------------------------------------------------------- private copies


def _facts(**changes: object) -> mnemon.sdk.SourceFacts:
    fields: dict[str, object] = {
        "instance_key": "source:a",
        "type_id": "notes",
        "role": "notes",
        "availability": "ready",
    }
    return mnemon.sdk.SourceFacts(**(fields | changes))  # type: ignore[arg-type]


def test_mutating_the_original_after_freezing_changes_nothing() -> None:
    original: dict[str, Any] = {"a": [1, {"b": 2}], "c": {"d": "e"}}
    frozen = freeze_json(original)
    original["a"][1]["b"] = 99
    original["a"].append(3)
    original["c"].clear()
    original["new"] = True
    assert frozen == {"a": (1, {"b": 2}), "c": {"d": "e"}}


def test_mutating_hints_after_building_facts_changes_nothing() -> None:
    hints: dict[str, Any] = {"tags": ["x"], "counts": {"notes": 3}}
    facts = _facts(hints=hints)
    hints["tags"].append("y")
    hints["counts"]["notes"] = 0
    hints["extra"] = 1
    assert facts.hints == {"tags": ("x",), "counts": {"notes": 3}}
    assert facts.model_dump()["hints"] == {"tags": ["x"], "counts": {"notes": 3}}


def test_mutating_grant_value_after_building_grant_changes_nothing() -> None:
    value: dict[str, Any] = {"ids": [1, 2]}
    grant = mnemon.ReadGrant(source_key="source:a", value=value)
    value["ids"].append(3)
    assert grant.value == {"ids": (1, 2)}


def test_mutating_input_schema_after_definition_changes_nothing() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    definition = mnemon.sdk.define_memory_source(
        {
            "type_id": "notes",
            "package_name": "mnemon-notes",
            "role": "notes",
            "capabilities": ["search"],
            "consistency": "exact-snapshot",
            "routes": [
                {"id": "search", "description": "d", "capability": "search", "input_schema": schema}
            ],
        },
        lambda init: None,
    )
    schema["properties"]["q"]["type"] = "integer"
    schema["additionalProperties"] = False
    assert definition.manifest.routes[0].input_schema == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }


# ------------------------------------------------------------------------- frozen copies


def _assign(value: FrozenDict) -> None:
    value["x"] = 1


def _delete(value: FrozenDict) -> None:
    del value["a"]


def _merge_in_place(value: FrozenDict) -> None:
    value |= {"x": 1}


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(_assign, id="setitem"),
        pytest.param(_delete, id="delitem"),
        pytest.param(_merge_in_place, id="in-place-merge"),
        pytest.param(lambda value: value.clear(), id="clear"),
        pytest.param(lambda value: value.pop("a"), id="pop"),
        pytest.param(lambda value: value.popitem(), id="popitem"),
        pytest.param(lambda value: value.setdefault("x", 1), id="setdefault"),
        pytest.param(lambda value: value.update(x=1), id="update"),
    ],
)
def test_frozen_copy_refuses_mutation(mutate: Callable[[FrozenDict], object]) -> None:
    frozen = freeze_json({"a": {"b": 1}})
    nested = frozen["a"]
    with pytest.raises(TypeError, match="frozen"):
        mutate(frozen)
    with pytest.raises(TypeError, match="frozen"):
        mutate(nested)
    assert frozen == {"a": {"b": 1}}


def test_frozen_arrays_are_tuples() -> None:
    frozen = freeze_json({"a": [1, [2]]})
    assert type(frozen["a"]) is tuple
    assert type(frozen["a"][1]) is tuple


def test_model_json_field_refuses_mutation() -> None:
    facts = _facts(hints={"tags": ["x"]})
    with pytest.raises(TypeError, match="frozen"):
        facts.hints["extra"] = 1  # type: ignore[index]
    assert type(facts.hints["tags"]) is tuple


def test_deepcopy_of_frozen_copy_is_plain_and_mutable() -> None:
    frozen = freeze_json({"a": [1, {"b": 2}]})
    thawed = copy.deepcopy(frozen)
    assert type(thawed) is dict
    assert type(thawed["a"]) is list
    assert type(thawed["a"][1]) is dict
    thawed["a"][1]["b"] = 3
    thawed["a"].append(4)
    thawed["new"] = 5
    assert frozen == {"a": (1, {"b": 2})}


def test_pickle_round_trips_frozen_copy() -> None:
    frozen = freeze_json({"a": [1, {"b": 2}], "c": None})
    restored = pickle.loads(pickle.dumps(frozen))
    assert restored == frozen
    assert type(restored) is FrozenDict
    assert type(restored["a"][1]) is FrozenDict
    with pytest.raises(TypeError, match="frozen"):
        restored["x"] = 1


def test_pickle_round_trips_model_with_json_field() -> None:
    facts = _facts(hints={"tags": ["x"]})
    restored = pickle.loads(pickle.dumps(facts))
    assert restored == facts
    with pytest.raises(TypeError, match="frozen"):
        restored.hints["extra"] = 1  # type: ignore[index]


# ------------------------------------------------------------------------- canonical form


def test_canonical_json_sorts_keys_without_whitespace() -> None:
    assert canonical_json(freeze_json({"b": 1, "a": [1, 2]})) == b'{"a":[1,2],"b":1}'
    assert canonical_json({"z": {"y": 1, "x": [{"d": 1, "c": 2}]}}) == (
        b'{"z":{"x":[{"c":2,"d":1}],"y":1}}'
    )


def test_canonical_json_sorts_keys_by_code_point() -> None:
    # U+FFFF < U+10000 by code point, though UTF-16 would put U+10000 first
    value = {"\U00010000": 5, "\uffff": 4, "é": 3, "b": 2, "B": 1}
    expected = '{"B":1,"b":2,"é":3,"\uffff":4,"\U00010000":5}'.encode()
    assert canonical_json(freeze_json(value)) == expected


def test_configuration_digest_is_prefixed_sha256_of_canonical_json() -> None:
    digest = mnemon.sdk.configuration_digest({"b": 1, "a": [1, 2]})
    assert re.fullmatch(r"config:[0-9a-f]{64}", digest)
    assert digest == "config:" + hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()


def test_configuration_digest_ignores_insertion_order() -> None:
    first = {"a": 1, "b": {"c": 2, "d": [3, {"e": 4, "f": 5}]}}
    second = {"b": {"d": [3, {"f": 5, "e": 4}], "c": 2}, "a": 1}
    assert mnemon.sdk.configuration_digest(first) == mnemon.sdk.configuration_digest(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({"a": 1}, {"a": 2}, id="different-number"),
        pytest.param({"a": 1}, {"b": 1}, id="different-key"),
        pytest.param({"a": [1, 2]}, {"a": [2, 1]}, id="array-order"),
        pytest.param({"a": "1"}, {"a": 1}, id="string-vs-number"),
        pytest.param({"a": None}, {}, id="null-vs-missing"),
    ],
)
def test_configuration_digest_differs_for_different_values(first: object, second: object) -> None:
    assert mnemon.sdk.configuration_digest(first) != mnemon.sdk.configuration_digest(second)


def test_configuration_digest_rejects_nan_with_mnemon_error() -> None:
    assert issubclass(JsonValueError, mnemon.MnemonError)
    assert issubclass(JsonValueError, ValueError)
    with pytest.raises(mnemon.MnemonError, match=r"^configuration: non-finite number nan at \$$"):
        mnemon.sdk.configuration_digest(float("nan"))


def test_json_value_error_in_a_definition_becomes_definition_error_with_field() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "default": math.nan}}}
    manifest = {
        "type_id": "notes",
        "package_name": "mnemon-notes",
        "role": "notes",
        "capabilities": ["search"],
        "consistency": "exact-snapshot",
        "routes": [
            {"id": "search", "description": "d", "capability": "search", "input_schema": schema}
        ],
    }
    with pytest.raises(mnemon.DefinitionError) as info:
        mnemon.sdk.define_memory_source(manifest, lambda init: None)
    message = str(info.value)
    assert message.startswith("manifest.routes[0].input_schema: ")
    assert "$.properties.q.default" in message


@pytest.mark.parametrize("size", [0, 1, 2_046, 2_047, 2_048, 4_094, 4_095, 9_000])
def test_content_hash_is_the_sha256_of_the_canonical_json_at_every_size(size: int) -> None:
    # the hash is fed in pieces (so the GIL is kept); the digest must not depend on them
    from mnemon._json import content_hash

    value = {"b": "x" * max(size - 10, 0), "a": [1, "é"]}
    expected = hashlib.sha256(canonical_json(value)).hexdigest()
    assert content_hash(value) == expected


def _labels_at(depth: int, labels: list[Any]) -> Any:
    """A dict `depth` containers deep holding `{"tags": labels}`, so labels is one deeper."""
    value: Any = {"tags": labels}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_a_list_of_plain_strings_in_an_object_is_judged_as_any_list() -> None:
    # the shortcut for labels keeps every rule: depth, exact types, encodable text
    frozen = freeze_json({"tags": ["a", "b"], "none": []})
    assert frozen == {"tags": ("a", "b"), "none": ()}
    assert type(frozen["tags"]) is tuple
    assert freeze_json(_labels_at(47, ["a"]))  # the list is the 48th container
    with pytest.raises(JsonValueError, match="nesting deeper than 48"):
        freeze_json(_labels_at(48, ["a"]))

    class Text(str):
        pass

    with pytest.raises(JsonValueError, match=r"unsupported type Text at \$\.tags\[1\]"):
        freeze_json({"tags": ["a", Text("b")]})
    with pytest.raises(JsonValueError, match=r"lone surrogate at \$\.tags\[0\]"):
        freeze_json({"tags": ["\ud800"]})
    assert freeze_json({"tags": ["é", "a"]}) == {"tags": ("é", "a")}
