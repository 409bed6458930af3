"""Every field of every public model says what it is, where editors and `help()` look."""

from __future__ import annotations

import pydoc
from typing import Annotated, ClassVar

import pydantic
import pytest
from pydantic import Field

import mnemon.sdk
from mnemon.sdk import Configuration, configuration_schema

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


# --------------------------------------------------------- a plugin author's own models


class Ranking(Configuration):
    """The first of two models of one name in this module."""

    depth: int = 3
    """How deep the first one ranks."""


FIRST_RANKING = Ranking


class Ranking(Configuration):  # type: ignore[no-redef]
    """The second model of that name: its fields are its own."""

    depth: int = Field(default=5, ge=1)
    """How deep the second one ranks."""

    width: Annotated[int, Field(ge=1)] = 2
    """How wide it ranks."""

    described: int = Field(default=1, description="Said in the field itself.")
    """Not this docstring: a description given in the field wins."""

    plain: int = 0
    unit: ClassVar[str] = "items"
    """A class variable: no field, no description."""


def test_a_configurations_docstrings_describe_its_fields_in_its_schema() -> None:
    properties = configuration_schema(Ranking)["properties"]
    assert properties["depth"]["description"] == "How deep the second one ranks."
    assert properties["width"]["description"] == "How wide it ranks."
    assert properties["described"]["description"] == "Said in the field itself."
    assert "description" not in properties["plain"]
    assert "unit" not in properties
    assert configuration_schema(FIRST_RANKING)["properties"]["depth"]["description"] == (
        "How deep the first one ranks."
    )
    # the constraints given beside them still hold
    with pytest.raises(pydantic.ValidationError):
        Ranking.model_validate({"width": 0})


def test_a_model_defined_in_a_function_is_described_too() -> None:
    class Local(Configuration):
        size: int = 1
        """How big it is,
        over two lines."""

    assert Local.model_fields["size"].description == "How big it is,\nover two lines."
    assert Local.model_json_schema()["properties"]["size"]["description"] == (
        "How big it is,\nover two lines."
    )


def test_a_model_that_builds_at_once_still_gets_its_descriptions_in_its_schema() -> None:
    class Eager(Configuration):
        model_config = pydantic.ConfigDict(defer_build=False)

        size: int = 1
        """How big it is."""

    assert Eager.model_json_schema()["properties"]["size"]["description"] == "How big it is."
