"""Strategy configuration: checked at definition time and before the factory runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from mnemon import DefinitionError
from mnemon.sdk import (
    StrategyDefinition,
    define_memory_strategy,
    define_strategy_configuration,
    define_view_extension,
)
from tests.kit import select_all

FIELDS = [
    {"id": "resident_source_keys", "label": "Resident Sources", "input": "source-list"},
    {"id": "instruction", "label": "Instruction", "input": "textarea"},
    {"id": "depth", "label": "Depth", "input": "number", "minimum": 1, "maximum": 10, "default": 3},
    {"id": "strict", "label": "Strict", "input": "boolean"},
    {"id": "tags", "label": "Tags", "input": "string-list"},
]


def strategy(type_id: str = "configured") -> StrategyDefinition:
    return define_memory_strategy(
        {
            "type_id": type_id,
            "package_name": "mnemon-test-strategy",
            "supported_source_roles": ["*"],
            "max_sources": 4,
            "max_routes": 4,
            "max_actions": 4,
        },
        lambda request, sources, contributions: select_all(
            request, sources, contributions, type_id=type_id
        ),
    )


class Factory:
    def __init__(self, result: Any = None) -> None:
        self.calls: list[Mapping[str, Any]] = []
        self.result = result

    def __call__(self, config: Mapping[str, Any]) -> Any:
        self.calls.append(config)
        return self.result if self.result is not None else strategy()


def configuration(factory: Factory) -> Any:
    return define_strategy_configuration(
        "strategy", "configured", "Configured", "A configurable Strategy.", FIELDS, factory
    )


def test_valid_input_reaches_the_factory_frozen_with_defaults() -> None:
    factory = Factory()
    made = configuration(factory).create(
        {"resident_source_keys": ["source:a"], "instruction": "be brief", "strict": True}
    )
    assert made.type_id == "configured"
    assert factory.calls == [
        {
            "resident_source_keys": ("source:a",),
            "instruction": "be brief",
            "depth": 3,
            "strict": True,
        }
    ]
    with pytest.raises(TypeError):
        factory.calls[0]["depth"] = 4  # type: ignore[index]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"depth": 11}, "depth: must be between 1 and 10"),
        ({"depth": 0}, "depth: must be between 1 and 10"),
        ({"depth": 2.5}, "depth: must be an integer"),
        ({"depth": True}, "depth: must be an integer"),
        ({"tags": ["a", "a"]}, "tags: items must be unique"),
        ({"tags": ["x"] * 33}, "tags: must hold at most 32 items"),
        ({"tags": [""]}, "tags: item 0 must be a non-empty string"),
        ({"tags": ["y" * 501]}, "tags: item 0 exceeds 500 characters"),
        ({"resident_source_keys": "source:a"}, "resident_source_keys: must be a list"),
        ({"instruction": "z" * 4_001}, "instruction: exceeds 4,000 characters"),
        ({"strict": "yes"}, "strict: must be true or false"),
        ({"colour": "red"}, "colour: unknown key"),
        ({"depth": float("inf")}, "non-finite number"),
    ],
    ids=["above-max", "below-min", "fractional", "bool-as-number", "duplicate", "too-many",
         "empty-item", "long-item", "string-not-list", "oversized-text", "bool-text", "unknown",
         "infinite"],
)  # fmt: skip
def test_invalid_input_is_rejected_before_the_factory_runs(
    config: dict[str, Any], message: str
) -> None:
    factory = Factory()
    with pytest.raises(DefinitionError, match=message):
        configuration(factory).create(config)
    assert factory.calls == []


def test_a_factory_returning_the_wrong_contribution_is_rejected() -> None:
    wrong_type = Factory(strategy("other"))
    with pytest.raises(DefinitionError, match="must return the strategy 'configured'"):
        configuration(wrong_type).create({})
    extension = define_view_extension(
        "configured", "mnemon-test-strategy", "projection", lambda request: {}
    )
    wrong_kind = Factory(extension)
    with pytest.raises(DefinitionError, match="must return the strategy"):
        configuration(wrong_kind).create({})


def test_a_required_field_must_be_given() -> None:
    required = define_strategy_configuration(
        "strategy-extension",
        "scoped",
        "Scoped",
        "Selects exact keys.",
        [{"id": "source_keys", "label": "Keys", "input": "source-list", "required": True}],
        Factory(),
    )
    with pytest.raises(DefinitionError, match=r"scoped configuration\.source_keys: required"):
        required.create({})


@pytest.mark.parametrize(
    ("kind", "fields", "message"),
    [
        ("strategy", [{"id": "n", "label": "N", "input": "number"}], "declares minimum and maximum"),
        ("strategy", [{"id": "n", "label": "N", "input": "number", "minimum": 5, "maximum": 1}], "must not be below minimum"),
        ("strategy", [{"id": "t", "label": "T", "input": "text", "minimum": 1}], "only a number field has bounds"),
        ("strategy", [{"id": "t", "label": "T", "input": "colour"}], r"fields\[0\]\.input"),
        ("strategy", [{"id": "Bad", "label": "T", "input": "text"}], r"fields\[0\]\.id"),
        ("strategy", [{"id": "t", "label": "T", "input": "text"}] * 2, "duplicate field id"),
        ("strategy", [{"id": "n", "label": "N", "input": "number", "minimum": 1, "maximum": 3, "default": 9}], "default: must be between 1 and 3"),
        ("pipeline", [], r"configuration\.kind"),
    ],
    ids=["number-without-bounds", "inverted-bounds", "bounds-on-text", "unknown-input", "bad-id",
         "duplicate-field", "invalid-default", "bad-kind"],
)  # fmt: skip
def test_definitions_are_checked_at_definition_time(
    kind: str, fields: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(DefinitionError, match=message):
        define_strategy_configuration(
            kind, "configured", "C", "A configuration.", fields, Factory()
        )


# every case of the invalid-input table, except the non-finite number JSON cannot carry
_REFUSED = [
    {"depth": 11}, {"depth": 0}, {"depth": 2.5}, {"depth": True}, {"tags": ["a", "a"]},
    {"tags": ["x"] * 33}, {"tags": [""]}, {"tags": ["y" * 501]},
    {"resident_source_keys": "source:a"}, {"instruction": "z" * 4_001}, {"strict": "yes"},
    {"colour": "red"},
]  # fmt: skip
_ACCEPTED = [
    {},
    {"depth": 1, "strict": False, "tags": [f"t{n}" for n in range(32)], "instruction": "z" * 4_000},
    {"resident_source_keys": ["source:a", "source:b"], "depth": 10},
]


@pytest.mark.parametrize(
    ("config", "accepted"),
    [(config, False) for config in _REFUSED] + [(config, True) for config in _ACCEPTED],
)
def test_the_json_schema_accepts_what_validation_accepts(
    config: dict[str, Any], accepted: bool
) -> None:
    import jsonschema

    defined = configuration(Factory())
    schema = defined.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema.Draft202012Validator(schema).is_valid(config) is accepted
    if accepted:
        defined.validate(config)
    else:
        with pytest.raises(DefinitionError):
            defined.validate(config)


def test_the_json_schema_states_labels_defaults_and_required_fields() -> None:
    required = define_strategy_configuration(
        "strategy-extension",
        "scoped",
        "Scoped",
        "Selects exact keys.",
        [
            {"id": "source_keys", "label": "Keys", "input": "source-list", "required": True},
            {
                "id": "depth",
                "label": "Depth",
                "input": "number",
                "minimum": 1,
                "maximum": 3,
                "default": 2,
                "description": "How deep.",
            },
        ],
        Factory(),
    )
    schema = required.json_schema()
    assert schema["title"] == "Scoped"
    assert schema["description"] == "Selects exact keys."
    assert schema["required"] == ["source_keys"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["depth"] == {
        "type": "integer", "minimum": 1, "maximum": 3, "title": "Depth", "description": "How deep.", "default": 2,
    }  # fmt: skip
    assert "required" not in configuration(Factory()).json_schema()
