"""One configuration system: a model declares it; reader, form fields and schema derive from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StrictInt,
    ValidationError,
    model_validator,
)

from mnemon import DefinitionError, InstallError
from mnemon.sdk import (
    ConfigPath,
    Configuration,
    PluginContext,
    SourceKeys,
    StrategyDefinition,
    StringList,
    Text,
    Textarea,
    configuration_fields,
    configuration_schema,
    define_memory_plugin,
    define_memory_strategy,
    define_strategy_configuration,
    define_view_extension,
    install_memory,
    read_configuration,
)
from mnemon_testing import MemoryCompositionRunner
from tests.kit import select_all


class Configured(Configuration):
    """A configurable Strategy's settings."""

    resident_source_keys: SourceKeys | None = Field(default=None, title="Resident Sources")
    instruction: Textarea | None = None
    """Guidance for the model."""
    depth: StrictInt = Field(default=3, ge=1, le=10)
    strict: StrictBool = False
    tags: StringList = ()


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
        self.calls: list[Any] = []
        self.result = result

    def __call__(self, config: Any) -> Any:
        self.calls.append(config)
        return self.result if self.result is not None else strategy()


def configuration(factory: Factory, model: type[Configuration] = Configured) -> Any:
    return define_strategy_configuration(
        "strategy",
        "configured",
        "Configured",
        "A configurable Strategy.",
        configuration=model,
        create=factory,
    )


# ------------------------------------------------------------------ reading


def test_valid_input_reaches_the_factory_as_a_frozen_model_with_defaults() -> None:
    factory = Factory()
    made = configuration(factory).create(
        {"resident_source_keys": ["source:a"], "instruction": "be brief", "strict": True}
    )
    assert made.type_id == "configured"
    [config] = factory.calls
    assert isinstance(config, Configured)
    assert config.model_dump() == {
        "resident_source_keys": ("source:a",),
        "instruction": "be brief",
        "depth": 3,
        "strict": True,
        "tags": (),
    }
    with pytest.raises(ValidationError, match="frozen"):
        config.depth = 4


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"depth": 11}, r"configured configuration\.depth: must be between 1 and 10$"),
        ({"depth": 0}, "depth: must be between 1 and 10"),
        ({"depth": 2.5}, "depth: must be an integer"),
        ({"depth": True}, "depth: must be an integer"),
        ({"depth": "3"}, "depth: must be an integer"),
        ({"tags": ["a", "a"]}, "tags: items must be unique"),
        ({"tags": ["x"] * 33}, "tags: must hold at most 32 items"),
        ({"tags": [""]}, r"tags\[0\]: must not be empty"),
        ({"tags": ["y" * 501]}, r"tags\[0\]: exceeds 500 characters"),
        ({"tags": [7]}, r"tags\[0\]: must be text"),
        ({"resident_source_keys": "source:a"}, "resident_source_keys: must be a list"),
        ({"instruction": "z" * 4_001}, "instruction: exceeds 4,000 characters"),
        ({"strict": "yes"}, "strict: must be true or false"),
        ({"colour": "red"}, "colour: unknown key$"),
        ({"dpth": 4}, "dpth: unknown key; did you mean 'depth'"),
        ({"depth": float("inf")}, "non-finite number"),
    ],
    ids=["above-max", "below-min", "fractional", "bool-as-number", "numeric-text", "duplicate",
         "too-many", "empty-item", "long-item", "number-item", "string-not-list",
         "oversized-text", "bool-text", "unknown", "misspelt", "infinite"],
)  # fmt: skip
def test_invalid_input_is_rejected_before_the_factory_runs(
    config: dict[str, Any], message: str
) -> None:
    factory = Factory()
    with pytest.raises(DefinitionError, match=message):
        configuration(factory).create(config)
    assert factory.calls == []


def test_errors_never_quote_the_value() -> None:
    with pytest.raises(DefinitionError) as caught:
        configuration(Factory()).validate(
            {"instruction": "tok-SECRET-" * 400, "tags": ["tok-SECRET"] * 2, "depth": 12345}
        )
    message = str(caught.value)
    assert "instruction" in message
    assert "tags" in message
    assert "SECRET" not in message
    assert "12345" not in message


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


class Keys(Configuration):
    source_keys: SourceKeys


def test_a_required_field_must_be_given() -> None:
    factory = Factory()
    required = define_strategy_configuration(
        "strategy-extension", "scoped", "Scoped", "Selects exact keys.", Keys, factory
    )
    with pytest.raises(DefinitionError, match=r"^scoped configuration\.source_keys: required$"):
        required.create({})
    assert factory.calls == []


class Rules(Configuration):
    source_keys: SourceKeys = ()
    writable: SourceKeys = ()
    dsn: SecretStr | None = None

    @model_validator(mode="after")
    def _writable_are_selected(self) -> Rules:
        # a rule across keys, stated first by the key at fault
        for index, key in enumerate(self.writable):
            if key not in self.source_keys:
                raise ValueError(f"writable[{index}]: must be one of source_keys")
        return self


def test_a_rule_across_keys_is_reported_at_the_key_it_names() -> None:
    defined = configuration(Factory(), Rules)
    with pytest.raises(DefinitionError, match=r"^configured configuration\.writable\[1\]: must be"):
        defined.validate({"source_keys": ["source:a"], "writable": ["source:a", "source:b"]})
    assert defined.validate({"source_keys": ["source:a"], "writable": ["source:a"]}).writable == (
        "source:a",
    )


def test_a_secret_is_masked_and_never_quoted() -> None:
    read = configuration(Factory(), Rules).validate({"dsn": "postgres://u:tok-SECRET@h/db"})
    assert "tok-SECRET" not in repr(read)
    assert read.dsn is not None
    assert read.dsn.get_secret_value() == "postgres://u:tok-SECRET@h/db"


class Located(Configuration):
    index: ConfigPath


def test_relative_paths_are_taken_from_the_given_folder() -> None:
    defined = configuration(Factory(), Located)
    assert defined.validate({"index": "data/i.db"}, config_dir="/srv/profile").index == Path(
        "/srv/profile/data/i.db"
    )
    with pytest.raises(DefinitionError, match=r"index: must be an absolute path"):
        defined.validate({"index": "data/i.db"})


class Greeting(Configuration):
    greeting: Text = "hello"
    index: ConfigPath | None = None


class ReadsItsOwnModel:
    """A Strategy that reads its model with `read_configuration(Model, ctx, ...)` itself."""

    memory_plugin = define_memory_plugin(
        "mnemon-test-greeting", "Greeting", "Greets.", ["strategy"], ["strategy.greeting"]
    )

    def __init__(self) -> None:
        self.seen: list[Greeting] = []

    def apply(self, ctx: PluginContext) -> None:
        self.seen.append(read_configuration(Greeting, ctx, subject="greeting"))
        install_memory(ctx, strategies=[strategy("greeting")])


async def test_a_plugin_reads_its_entry_with_the_same_reader(tmp_path: Path) -> None:
    plugin = ReadsItsOwnModel()
    async with MemoryCompositionRunner(config_dir=str(tmp_path)) as runner:
        await runner.mount(plugin, instance_id="greeting", config={"index": "i.db"})
        with pytest.raises(InstallError, match=r"greeting configuration\.greting: unknown key"):
            await runner.mount(plugin, instance_id="other", config={"greting": "hi"})
    assert [(seen.greeting, seen.index) for seen in plugin.seen] == [("hello", tmp_path / "i.db")]


# ------------------------------------------------------------------ definition time


def _model(**fields: Any) -> type[Configuration]:
    return type("Checked", (Configuration,), fields)


@pytest.mark.parametrize(
    ("kind", "model", "message"),
    [
        ("strategy", _model(__annotations__={"n": StrictInt}, n=1), "declares a lower and an upper bound"),
        ("strategy", _model(__annotations__={"n": StrictInt}, n=Field(default=1, ge=1)), "declares a lower and an upper bound"),
        ("strategy", _model(__annotations__={"n": StrictInt}, n=Field(default=3, ge=5, le=1)), "upper bound is below its lower bound"),
        ("strategy", _model(__annotations__={"t": str}, t=Field(default="", ge=1)), "only a number field has bounds"),
        ("strategy", _model(__annotations__={"t": str}, t=Field(default="", json_schema_extra={"x-mnemon-input": "colour"})), r"Checked\.t.*input"),
        ("strategy", _model(__annotations__={"Bad": str}, Bad=""), r"Checked\.Bad.*id"),
        ("strategy", _model(__annotations__={"n": StrictInt}, n=Field(default=9, ge=1, le=3)), r"Checked\.n: the default must be between 1 and 3"),
        ("strategy", _model(__annotations__={"t": StringList}, t=("a", "a")), r"Checked\.t: the default items must be unique"),
        ("strategy", type("Plain", (BaseModel,), {"__annotations__": {"n": int}, "n": 1}), "must be a mnemon.sdk.Configuration subclass"),
        ("strategy", _model(model_config=ConfigDict(frozen=True, extra="allow")), "must refuse unknown keys"),
        ("pipeline", Configured, r"configuration\.kind"),
    ],
    ids=["number-without-bounds", "number-with-one-bound", "inverted-bounds", "bounds-on-text",
         "unknown-input", "bad-id", "invalid-default", "invalid-list-default", "not-a-configuration",
         "extra-allowed", "bad-kind"],
)  # fmt: skip
def test_definitions_are_checked_at_definition_time(
    kind: str, model: type[Configuration], message: str
) -> None:
    with pytest.raises(DefinitionError, match=message):
        define_strategy_configuration(
            kind, "configured", "C", "A configuration.", configuration=model, create=Factory()
        )


# ------------------------------------------------------------------ the schema agrees


_REFUSED = [
    {"depth": 11}, {"depth": 0}, {"depth": 2.5}, {"depth": True}, {"depth": "3"},
    {"tags": ["a", "a"]}, {"tags": ["x"] * 33}, {"tags": [""]}, {"tags": ["y" * 501]},
    {"tags": [7]}, {"resident_source_keys": "source:a"}, {"instruction": "z" * 4_001},
    {"strict": "yes"}, {"strict": 1}, {"colour": "red"}, {"depth": None}, {"tags": None},
]  # fmt: skip
_ACCEPTED = [
    {},
    {"depth": 1, "strict": False, "tags": [f"t{n}" for n in range(32)], "instruction": "z" * 4_000},
    {"resident_source_keys": ["source:a", "source:b"], "depth": 10},
    {"resident_source_keys": None, "instruction": None},
]


DEFINED = configuration(Factory())
SCHEMA = jsonschema.Draft202012Validator(DEFINED.json_schema())


def agree(config: dict[str, Any]) -> bool:
    """Whether the JSON Schema and the reader agree on `config`; returns the verdict."""
    accepted = SCHEMA.is_valid(config)
    try:
        DEFINED.validate(config)
    except DefinitionError:
        assert not accepted, f"the schema accepts what the reader refuses: {config!r}"[:300]
        return False
    assert accepted, f"the schema refuses what the reader accepts: {config!r}"[:300]
    return True


@pytest.mark.parametrize(
    ("config", "accepted"),
    [(config, False) for config in _REFUSED] + [(config, True) for config in _ACCEPTED],
)
def test_the_json_schema_accepts_what_validation_accepts(
    config: dict[str, Any], accepted: bool
) -> None:
    jsonschema.Draft202012Validator.check_schema(configuration(Factory()).json_schema())
    assert agree(config) is accepted


_ITEMS = st.sampled_from(["source:a", "source:b", "", "y" * 500, "y" * 501, 7, None])
_LISTS = st.one_of(
    st.lists(_ITEMS, max_size=4),
    st.lists(st.text(min_size=1, max_size=3), min_size=30, max_size=34, unique=True),
    st.lists(st.text(min_size=1, max_size=3), min_size=30, max_size=34),
)
_ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
# JSON Schema counts 2.0 as an integer; a profile's 2.0 is a float, which the reader refuses
_FRACTIONS = st.floats(-20, 20, allow_nan=False).filter(lambda value: not value.is_integer())
SAMPLES = st.dictionaries(
    st.sampled_from(["resident_source_keys", "instruction", "depth", "strict", "tags", "colour"]),
    st.one_of(
        _ANY,
        _LISTS,
        st.integers(-2, 13),
        _FRACTIONS,
        st.sampled_from(["z" * 4_000, "z" * 4_001]),
    ),
)


@settings(max_examples=400, deadline=None)
@given(SAMPLES)
def test_the_json_schema_and_the_reader_agree_on_generated_samples(
    config: dict[str, Any],
) -> None:
    agree(config)


def test_generated_samples_hold_both_verdicts() -> None:
    # the property above means something only if samples of both kinds are generated
    verdicts: set[bool] = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(SAMPLES)
    def collect(config: dict[str, Any]) -> None:
        verdicts.add(agree(config))

    collect()
    assert verdicts == {True, False}


# ------------------------------------------------------------------ fields and schema


class Everything(Configuration):
    """Every kind of input."""

    source_keys: SourceKeys = Field(title="Sources")
    """Which Sources, in priority order."""
    instruction: Textarea = ""
    title_line: Text = "Memory"
    depth: StrictInt = Field(default=2, ge=1, le=3, description="How deep.")
    timeout: float = Field(default=5.0, gt=0, le=60)
    strict: StrictBool = False
    tags: StringList = ("a",)
    mode: Literal["eager", "routed"] = "eager"
    data_dir: ConfigPath | None = None
    token: SecretStr = SecretStr("tok-SECRET-default")
    provider: dict[str, Any] = Field(default_factory=lambda: {"type": "sqlite"})


def test_fields_derive_from_the_model() -> None:
    fields = {field.id: field for field in configuration_fields(Everything)}
    assert list(fields) == list(Everything.model_fields)
    assert {key: field.input for key, field in fields.items()} == {
        "source_keys": "source-list", "instruction": "textarea", "title_line": "text",
        "depth": "number", "timeout": "number", "strict": "boolean", "tags": "string-list",
        "mode": "choice", "data_dir": "path", "token": "secret", "provider": "json",
    }  # fmt: skip
    keys = fields["source_keys"]
    assert (keys.label, keys.description, keys.required) == (
        "Sources",
        "Which Sources, in priority order.",
        True,
    )
    depth = fields["depth"]
    assert (depth.label, depth.description, depth.default, depth.minimum, depth.maximum) == (
        "Depth",
        "How deep.",
        2,
        1,
        3,
    )
    timeout = fields["timeout"]
    assert (timeout.minimum, timeout.exclusive_minimum, timeout.maximum) == (None, 0, 60)
    assert fields["title_line"].label == "Title line"
    assert fields["title_line"].json_schema["maxLength"] == 4_000
    assert fields["mode"].choices == ("eager", "routed")
    assert fields["provider"].default == {"type": "sqlite"}
    assert fields["tags"].default == ("a",)
    assert not fields["instruction"].required
    # a secret's default is never written out
    assert fields["token"].default is None


def test_the_schema_states_titles_defaults_bounds_and_inputs() -> None:
    schema = configuration_schema(Everything)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "tok-SECRET" not in repr(schema)
    assert schema["description"] == "Every kind of input."
    assert "title" not in schema
    assert schema["required"] == ["source_keys"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["depth"] == {
        "default": 2, "description": "How deep.", "maximum": 3, "minimum": 1, "title": "Depth",
        "type": "integer", "x-mnemon-input": "number",
    }  # fmt: skip
    assert properties["source_keys"] == {
        "description": "Which Sources, in priority order.",
        "items": {"maxLength": 500, "minLength": 1, "type": "string"},
        "maxItems": 32, "title": "Sources", "type": "array", "uniqueItems": True,
        "x-mnemon-input": "source-list",
    }  # fmt: skip
    # a key that may be null says so in its type, beside its input
    assert properties["data_dir"] == {
        "format": "path", "title": "Data dir", "type": ["string", "null"], "x-mnemon-input": "path",
    }  # fmt: skip
    assert properties["provider"]["default"] == {"type": "sqlite"}
    titled = configuration_schema(Everything, title="Everything", description="All of it.")
    assert (titled["title"], titled["description"]) == ("Everything", "All of it.")


def test_a_strategy_schema_carries_its_definition_s_label_and_description() -> None:
    schema = configuration(Factory()).json_schema()
    assert (schema["title"], schema["description"]) == ("Configured", "A configurable Strategy.")
    assert "required" not in schema
    assert schema["properties"]["instruction"]["x-mnemon-input"] == "textarea"
    assert schema["properties"]["instruction"]["description"] == "Guidance for the model."
    assert [field.id for field in configuration(Factory()).fields] == list(Configured.model_fields)
