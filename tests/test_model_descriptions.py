"""Every field of every public model says what it is, where editors and `help()` look."""

from __future__ import annotations

import pydoc

import pydantic
import pytest

import mnemon.sdk

# the models of both front doors, the host's and the plugin author's
MODELS = sorted(
    {
        getattr(door, name)
        for door in (mnemon, mnemon.sdk)
        for name in door.__all__
        if isinstance(getattr(door, name), type)
        and issubclass(getattr(door, name), pydantic.BaseModel)
    },
    key=lambda model: model.__name__,
)


def test_the_public_sdk_has_models() -> None:
    assert len(MODELS) > 40


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_every_field_has_a_description(model: type[pydantic.BaseModel]) -> None:
    missing = [
        name for name, field in model.model_fields.items() if not (field.description or "").strip()
    ]
    assert not missing, f"{model.__name__} fields without a description: {missing}"


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_help_lists_every_field_with_its_description(model: type[pydantic.BaseModel]) -> None:
    text = " ".join(pydoc.render_doc(model, renderer=pydoc.plaintext).split())
    for name, field in model.model_fields.items():
        description = " ".join((field.description or "").split())
        assert f"{name}: {description}" in text, f"help({model.__name__}) omits {name}"


def test_descriptions_reach_the_json_schema() -> None:
    schema = mnemon.Scope.model_json_schema()
    assert schema["properties"]["user_id"]["description"] == "The user the View is for."
