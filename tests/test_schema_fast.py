"""The fast check of valid input agrees with jsonschema: what it lets through, jsonschema does.

`input_problems` answers valid input with plain Python checks compiled from a schema of common
keywords and leaves everything else to jsonschema. These tests compare the two on generated
schemas and values, and check that refusals still come from jsonschema, in its words.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon._json import freeze_json
from mnemon._schema import _compiled, _FrozenArrays, input_problems

_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from(["", "a", "ab", "abc", "x-1", "é", "ab\u00e9c"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), inner, max_size=4),
    ),
    max_leaves=12,
)


def _leaf_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(
                st.sampled_from(_TYPES), st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3)
            ),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "pattern": st.sampled_from(["^a", "b", "^[a-z]+$", "\\d"]),
            "enum": st.lists(st.sampled_from(["a", "ab", "x-1"]), min_size=1, max_size=3),
            "const": st.sampled_from(["a", "abc"]),
            "minimum": st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False)),
            "maximum": st.integers(-3, 3),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.floats(-3, 3, allow_nan=False),
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 3),
            "description": st.just("annotation only"),
            "format": st.just("date-time"),
        },
    )


schemas = st.recursive(
    _leaf_schemas(),
    lambda inner: st.one_of(
        st.builds(
            lambda base, props, required, extra: {
                **base,
                "properties": props,
                "required": required,
                **({} if extra is None else {"additionalProperties": extra}),
            },
            _leaf_schemas(),
            st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
            st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=2),
            st.one_of(st.none(), st.booleans(), inner),
        ),
        st.builds(lambda base, items: {**base, "items": items}, _leaf_schemas(), inner),
        st.booleans(),
    ),
    max_leaves=6,
)


@settings(max_examples=600, deadline=None)
@given(schemas, values)
def test_what_the_fast_check_calls_valid_jsonschema_finds_valid(schema: Any, value: Any) -> None:
    check = _compiled(schema)
    if check is None:
        return
    validator = _FrozenArrays(schema)
    for candidate in (value, freeze_json(value)):
        if check(candidate):
            assert not list(validator.iter_errors(candidate)), (schema, candidate)


@settings(max_examples=300, deadline=None)
@given(schemas, values)
def test_input_problems_matches_jsonschema(schema: Any, value: Any) -> None:
    # refused or not exactly as jsonschema alone decides (the fast path never refuses)
    assert (input_problems(schema, value) == []) == (
        not list(_FrozenArrays(schema).iter_errors(value))
    )


def test_a_schema_with_other_keywords_is_left_to_jsonschema() -> None:
    for schema in (
        {"type": "object", "$defs": {}},
        {"anyOf": [{"type": "string"}]},
        {"type": "array", "uniqueItems": True},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"type": "object", "properties": {"a": {"oneOf": [{}]}}},
        {"enum": [1, True]},  # JSON equality of numbers and booleans is jsonschema's
        {"type": "string", "maxLength": 1.5},
    ):
        assert _compiled(schema) is None, schema


def test_values_the_fast_check_does_not_judge_go_to_jsonschema() -> None:
    # 1.0 is an integer and a Decimal a number to jsonschema: no refusal from the fast path
    assert input_problems({"type": "integer"}, 1.0) == []
    assert input_problems({"type": "object", "properties": {"n": {"minimum": 2}}}, {"n": 1.0})
    assert input_problems({"minimum": 2}, Decimal(3)) == []
    assert input_problems({"minimum": 2}, Decimal(1)) == ["fails minimum 2"]
    assert input_problems({"type": "integer"}, True) == ['fails type "integer"']


def test_a_refusal_names_the_property_and_rule_not_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 3}},
        "required": ["text"],
        "additionalProperties": False,
    }
    assert input_problems(schema, {"text": "abc"}) == []
    assert input_problems(schema, {"text": "secret words"}) == [
        "property 'text': fails maxLength 3"
    ]
    assert input_problems(schema, {}) == ["input: 'text' is a required property"]
    assert input_problems(schema, {"text": "a", "other": 1}) == ["unsupported property 'other'"]
    assert input_problems(freeze_json(schema), freeze_json({"text": "abcd"})) == [
        "property 'text': fails maxLength 3"
    ]


_GRID_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    2,
    -1,
    1.5,
    2.0,
    "",
    "a",
    "ab",
    "abc",
    "abcd",
    "x-1",
    "é",
    [],
    ["a"],
    ["a", 1],
    [1, 2, 3, 4],
    {},
    {"a": 1},
    {"a": "x", "b": None},
]
_GRID_SCHEMAS: list[dict[str, Any]] = [
    *({"type": name} for name in _TYPES),
    {"type": ["string", "null"]},
    *({keyword: bound} for keyword in ("minLength", "maxLength") for bound in range(5)),
    *({keyword: bound} for keyword in ("minItems", "maxItems") for bound in range(5)),
    *(
        {keyword: bound}
        for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        for bound in (-1, 0, 1, 1.5, 2)
    ),
    {"pattern": "^a"},
    {"pattern": "b"},
    {"enum": ["a", "abc"]},
    {"const": "ab"},
    {"items": {"type": "string"}},
    {"required": ["a"]},
    {"properties": {"a": {"type": "integer"}}},
    {"properties": {"a": {"type": "string"}}, "additionalProperties": False},
    {"additionalProperties": {"type": "null"}},
]


def test_on_plain_json_the_fast_check_decides_as_jsonschema_does() -> None:
    # exact agreement on every plain value but the one it leaves on purpose (2.0 an integer)
    for schema in _GRID_SCHEMAS:
        check = _compiled(schema)
        assert check is not None, schema
        for value in _GRID_VALUES:
            expected = not list(_FrozenArrays(schema).iter_errors(value))
            if schema.get("type") == "integer" and value == 2.0 and type(value) is float:
                assert expected
                assert not check(value)
                continue
            assert check(value) == expected, (schema, value)
            assert check(freeze_json(value)) == expected, (schema, value)
