"""The author SDK: plugin descriptors, Source and Strategy definitions and their protocols."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, TypeAlias

from pydantic import Field, Strict, StringConstraints, model_validator

from ._errors import DefinitionError
from ._json import unique
from ._models import (
    CapabilityId,
    ComposeRequest,
    Evidence,
    EvidenceLimits,
    ExtensionContribution,
    FactsRequest,
    Id,
    JsonObject,
    JsonValue,
    MutationReceipt,
    MutationRequest,
    PackageName,
    PolicyRequest,
    ProjectionRequest,
    ProvidedCapability,
    QueryRequest,
    SourceCandidate,
    SourceFacts,
    SourceInit,
    SourceManifest,
    StrategyManifest,
    ViewContribution,
    ViewSpec,
    WireModel,
    validate_model,
)

__all__ = [
    "ComposeFunction",
    "ConfigurationField",
    "MemorySource",
    "PluginDescriptor",
    "PluginRole",
    "ProvidedCapability",
    "RouteReader",
    "SourceDefinition",
    "SourceFactory",
    "StrategyConfiguration",
    "StrategyDefinition",
    "StrategyTurn",
    "ViewExtensionDefinition",
    "define_memory_plugin",
    "define_memory_source",
    "define_memory_strategy",
    "define_strategy_configuration",
    "define_view_extension",
]

PluginRole = Literal["source", "strategy", "strategy-extension", "embedder"]


class PluginDescriptor(WireModel):
    """What a plugin is, what it provides and what it requires of others."""

    package_name: PackageName
    """The plugin's distribution."""
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    """The plugin's name for people."""
    description: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
    """What the plugin does, in a sentence."""
    roles: tuple[PluginRole, ...] = Field(min_length=1)
    """What it contributes: `source`, `strategy`, `strategy-extension`, `embedder`."""
    provides: tuple[ProvidedCapability, ...] = Field(min_length=1)
    """The capabilities it provides to the activation graph."""
    requires: tuple[CapabilityId, ...] = ()
    """The capabilities it needs from other plugins."""

    @model_validator(mode="after")
    def _check_graph(self) -> PluginDescriptor:
        if not unique(self.roles):
            raise ValueError("roles: duplicate role")
        if not unique(item.id for item in self.provides):
            raise ValueError("provides: duplicate capability")
        if not unique(self.requires):
            raise ValueError("requires: duplicate capability")
        provided = {item.id for item in self.provides}
        for requirement in self.requires:
            if requirement in provided:
                raise ValueError(
                    f"requires: a plugin may not require what it provides ({requirement!r})"
                )
        return self


def define_memory_plugin(
    package_name: str,
    label: str,
    description: str,
    roles: Iterable[str],
    provides: Iterable[str | Mapping[str, Any] | ProvidedCapability],
    requires: Iterable[str] = (),
) -> PluginDescriptor:
    """Define a plugin descriptor: the node this plugin adds to the activation graph.

    `provides` items are capability ids or `{"id": ..., "exclusive": bool}`.

    Raises:
        DefinitionError: naming the field at fault.
    """
    listed = _listed(provides)
    provided = (
        listed
        if isinstance(listed, str)
        else [{"id": item} if isinstance(item, str) else item for item in listed]
    )
    return validate_model(
        PluginDescriptor,
        {
            "package_name": package_name,
            "label": label,
            "description": description,
            "roles": _listed(roles),
            "provides": provided,
            "requires": _listed(requires),
        },
        subject="plugin",
        error=DefinitionError,
    )


def _listed(items: Iterable[Any]) -> Any:
    # a bare string is a common slip for a one-item list: keep it as is so validation names it
    return items if isinstance(items, str) else list(items)


# ------------------------------------------------------------------------- Sources


class MemorySource(Protocol):
    """The runtime a Source factory returns.

    Required: `facts` and `project`. A Source with routes implements
    `query(request: QueryRequest) -> Evidence`; with actions,
    `mutate(request: MutationRequest) -> MutationReceipt`; with a management descriptor,
    `manage(request)`; and any Source may implement `dispose()`, called once after its
    generation drains. All of them are coroutines.
    """

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Report cheap, read-only facts for one request."""
        ...

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Project memory for a selected Source: fragments and a read grant."""
        ...


class QueryingSource(MemorySource, Protocol):
    """A Source that serves route reads."""

    async def query(self, request: QueryRequest) -> Evidence:
        """Read through a pinned grant."""
        ...


class MutatingSource(MemorySource, Protocol):
    """A Source that accepts writes."""

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Perform one authorized write and say how far it got."""
        ...


SourceFactory: TypeAlias = Callable[[SourceInit], "MemorySource | Awaitable[MemorySource]"]


@dataclass(frozen=True, slots=True)
class SourceDefinition:
    """A validated Source type: its manifest and the factory making runtimes."""

    manifest: SourceManifest
    create: SourceFactory

    @property
    def type_id(self) -> str:
        """The Source type id."""
        return self.manifest.type_id

    @property
    def package_name(self) -> str:
        """The distribution that ships this Source."""
        return self.manifest.package_name


def define_memory_source(
    manifest: SourceManifest | Mapping[str, Any], create: SourceFactory
) -> SourceDefinition:
    """Define a Source type from its manifest and factory.

    Raises:
        DefinitionError: naming the manifest field at fault, or when `create` is not callable.
    """
    checked = validate_model(SourceManifest, manifest, subject="manifest", error=DefinitionError)
    if not callable(create):
        raise DefinitionError("create: a Source factory must be callable")
    return SourceDefinition(checked, create)


# ------------------------------------------------------------------------- Strategies

ComposeFunction: TypeAlias = Callable[
    [ComposeRequest, tuple[SourceCandidate, ...], tuple[ExtensionContribution, ...]],
    "ViewSpec | Mapping[str, Any]",
]
TurnFactory: TypeAlias = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class StrategyDefinition:
    """A validated Strategy type: its manifest, pure `compose`, optional turn policy."""

    manifest: StrategyManifest
    compose: ComposeFunction
    create_turn: TurnFactory | None = None

    @property
    def type_id(self) -> str:
        """The Strategy type id."""
        return self.manifest.type_id

    @property
    def package_name(self) -> str:
        """The distribution that ships this Strategy."""
        return self.manifest.package_name


def define_memory_strategy(
    manifest: StrategyManifest | Mapping[str, Any],
    compose: ComposeFunction,
    create_turn: TurnFactory | None = None,
) -> StrategyDefinition:
    """Define a Strategy type from its manifest, its pure `compose` and an optional policy.

    Raises:
        DefinitionError: naming the manifest field at fault, or a non-callable function.
    """
    checked = validate_model(StrategyManifest, manifest, subject="manifest", error=DefinitionError)
    if not callable(compose):
        raise DefinitionError("compose: a Strategy's compose must be callable")
    if inspect.iscoroutinefunction(compose) or inspect.iscoroutinefunction(
        getattr(compose, "__call__", None)  # noqa: B004 - a callable object's own method
    ):
        raise DefinitionError(
            "compose: a Strategy's compose must be a plain function (def), not async def: "
            "it is pure and never waits"
        )
    if create_turn is not None and not callable(create_turn):
        raise DefinitionError("create_turn: must be callable or None")
    return StrategyDefinition(checked, compose, create_turn)


# ------------------------------------------------------------------------- View extensions

STANDARD_SLOTS = ("selection", "projection", "capture")


class ExtensionRequest(WireModel):
    """What a View extension's `contribute()` receives for one composition."""

    instance_key: str
    """The extension's instance key."""
    configuration: JsonObject
    """The extension entry's frozen configuration."""
    request: ComposeRequest
    """The composition request."""
    sources: tuple[SourceCandidate, ...]
    """The Sources the Strategy will see."""


ContributeFunction: TypeAlias = Callable[[ExtensionRequest], Any]


@dataclass(frozen=True, slots=True)
class ViewExtensionDefinition:
    """A validated View extension: one slot, one pure `contribute` function."""

    type_id: str
    package_name: str
    slot: str
    contribute: ContributeFunction
    strategy_type_id: str = "*"


class _ExtensionHeader(WireModel):
    type_id: Id
    package_name: PackageName
    slot: Id
    strategy_type_id: Annotated[
        str, Strict(), StringConstraints(pattern=r"^(\*|[a-z][a-z0-9-]{0,127})$")
    ]


def define_view_extension(
    type_id: str,
    package_name: str,
    slot: str,
    contribute: ContributeFunction,
    strategy_type_id: str = "*",
) -> ViewExtensionDefinition:
    """Define a View extension that fills one slot of a Strategy (or of any, with `*`).

    Standard slots: `selection`, `projection`, `capture`; other slot names belong to the
    Strategy that declares them.

    Raises:
        DefinitionError: naming the field at fault.
    """
    header = validate_model(
        _ExtensionHeader,
        {
            "type_id": type_id,
            "package_name": package_name,
            "slot": slot,
            "strategy_type_id": strategy_type_id,
        },
        subject="extension",
        error=DefinitionError,
    )
    if header.strategy_type_id == "*" and header.slot not in STANDARD_SLOTS:
        raise DefinitionError(
            f"extension.slot: {slot!r} is not a standard slot, so the extension must name the "
            "Strategy that declares it (strategy_type_id)"
        )
    if not callable(contribute):
        raise DefinitionError("contribute: must be callable")
    return ViewExtensionDefinition(
        header.type_id, header.package_name, header.slot, contribute, header.strategy_type_id
    )


# ------------------------------------------------------------------------- turn policies


class RouteReader(Protocol):
    """The `read` a turn policy receives: bound to one route and its grant.

    It revalidates `input`, may only narrow `limits`, counts against the route's
    `max_calls`, and is dead once the policy returns.
    """

    async def __call__(
        self,
        input: Mapping[str, Any] | None = None,
        limits: EvidenceLimits | Mapping[str, Any] | None = None,
    ) -> Evidence:
        """Read through the pinned grant and return normalized evidence."""
        ...

    def sibling(self, route_id: str) -> RouteReader:
        """A reader of another route of the same View, to answer this one from several.

        `route_id` is a View-wide id, of a route the model sees (`View.routes`) or of one
        pinned for the policy alone (`View.policy_routes`). The sibling reads through that
        route's own grant, within that route's own ceilings, counts against that route's
        `max_calls`, has no input of its own (pass `input`), and dies with this reader.
        Evidence the policy returns still answers the route the model called: say in each
        item's provenance which Source it came from.

        Raises:
            RouteError: `unknown-route` when the View pins no such route; `contract` once
                the policy has returned.
        """
        ...


class StrategyTurn(Protocol):
    """A Strategy's per-turn read policy, made by `create_turn(view)` once per turn."""

    async def query(self, request: PolicyRequest, read: RouteReader) -> Evidence:
        """Answer one route execution: read, replay, dedupe, admit or drop results."""
        ...


# ------------------------------------------------------------------------- configuration

ConfigurationInput = Literal["number", "text", "textarea", "string-list", "source-list", "boolean"]
TEXT_LIMIT = 4_000
LIST_LIMIT = 32
LIST_ITEM_LIMIT = 500


class ConfigurationField(WireModel):
    """One configuration input of a Strategy or View extension."""

    id: Annotated[str, Strict(), StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    """The configuration key (`source_keys`, `max_projection_characters`)."""
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    """The field's label in a form."""
    input: ConfigurationInput
    """The kind of input: number, text, textarea, string-list, source-list or boolean."""
    description: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)] | None
    ) = None
    """Help text for the field."""
    required: Annotated[bool, Strict()] = False
    """Whether a value must be given."""
    default: JsonValue = None
    """The value used when none is given."""
    minimum: Annotated[int, Strict()] | None = None
    """The smallest number allowed (number fields only)."""
    maximum: Annotated[int, Strict()] | None = None
    """The largest number allowed (number fields only)."""

    @model_validator(mode="after")
    def _check_bounds(self) -> ConfigurationField:
        if self.input == "number":
            if self.minimum is None or self.maximum is None:
                raise ValueError("minimum: a number field declares minimum and maximum")
            if self.minimum > self.maximum:
                raise ValueError("maximum: must not be below minimum")
        elif self.minimum is not None or self.maximum is not None:
            raise ValueError("minimum: only a number field has bounds")
        if self.default is not None:
            problem = _field_problem(self, self.default)
            if problem is not None:
                raise ValueError(f"default: {problem}")
        return self


def _string_list_problem(value: Any) -> str | None:
    if not isinstance(value, list | tuple):
        return "must be a list of strings"
    if len(value) > LIST_LIMIT:
        return f"must hold at most {LIST_LIMIT} items"
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            return f"item {index} must be a non-empty string"
        if len(item) > LIST_ITEM_LIMIT:
            return f"item {index} exceeds {LIST_ITEM_LIMIT} characters"
    if len(set(value)) != len(value):
        return "items must be unique"
    return None


def _field_problem(field: ConfigurationField, value: Any) -> str | None:
    """Why `value` does not fit `field`, or None."""
    kind = field.input
    if kind == "number":
        if type(value) is not int:
            return "must be an integer"
        low, high = field.minimum, field.maximum
        if low is not None and high is not None and not low <= value <= high:
            return f"must be between {field.minimum} and {field.maximum}"
        return None
    if kind in ("text", "textarea"):
        if not isinstance(value, str):
            return "must be text"
        if len(value) > TEXT_LIMIT:
            return f"exceeds {TEXT_LIMIT:,} characters"
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    return _string_list_problem(value)


def _field_schema(field: ConfigurationField) -> dict[str, Any]:
    """The JSON Schema of one field: the rules `_field_problem` applies, stated as a schema."""
    schema: dict[str, Any]
    if field.input == "number":
        schema = {"type": "integer", "minimum": field.minimum, "maximum": field.maximum}
    elif field.input in ("text", "textarea"):
        schema = {"type": "string", "maxLength": TEXT_LIMIT}
    elif field.input == "boolean":
        schema = {"type": "boolean"}
    else:
        schema = {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": LIST_ITEM_LIMIT},
            "maxItems": LIST_LIMIT,
            "uniqueItems": True,
        }
    schema["title"] = field.label
    if field.description is not None:
        schema["description"] = field.description
    if field.default is not None:
        schema["default"] = field.default
    return schema


@dataclass(frozen=True, slots=True)
class StrategyConfiguration:
    """A configurable Strategy or View extension: fields, and a factory run on valid input."""

    kind: Literal["strategy", "strategy-extension"]
    type_id: str
    label: str
    description: str
    fields: tuple[ConfigurationField, ...]
    factory: Callable[[Mapping[str, Any]], Any]

    def validate(self, config: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """Check `config` against the fields and return it frozen, with defaults filled in.

        Raises:
            DefinitionError: naming the configuration key at fault.
        """
        from ._json import freeze_json

        subject = f"{self.type_id} configuration"
        values = freeze_json({} if config is None else config, what=subject, error=DefinitionError)
        if not isinstance(values, Mapping):
            raise DefinitionError(f"{subject}: must be a JSON object")
        known = {field.id: field for field in self.fields}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise DefinitionError(f"{subject}.{unknown[0]}: unknown key")
        checked: dict[str, Any] = {}
        for field in self.fields:
            if field.id not in values:
                if field.required:
                    raise DefinitionError(f"{subject}.{field.id}: required")
                if field.default is not None:
                    checked[field.id] = field.default
                continue
            problem = _field_problem(field, values[field.id])
            if problem is not None:
                raise DefinitionError(f"{subject}.{field.id}: {problem}")
            checked[field.id] = values[field.id]
        return freeze_json(checked)  # type: ignore[no-any-return]

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of what `validate` accepts: for a manifest's `config_schema`.

        Each field is a property titled by its label, with its description, default and
        bounds; unknown keys are refused, as `validate` refuses them.
        """
        properties = {field.id: _field_schema(field) for field in self.fields}
        schema: dict[str, Any] = {
            "type": "object",
            "title": self.label,
            "description": self.description,
            "properties": properties,
            "additionalProperties": False,
        }
        required = [field.id for field in self.fields if field.required]
        if required:
            schema["required"] = required
        return schema

    def create(self, config: Mapping[str, Any] | None = None) -> Any:
        """Validate `config`, then run the factory and check it made the declared contribution.

        Raises:
            DefinitionError: the configuration is invalid (nothing ran), or the factory
                returned something other than the declared Strategy or extension.
        """
        values = self.validate(config)
        produced = self.factory(values)
        expected = StrategyDefinition if self.kind == "strategy" else ViewExtensionDefinition
        if not isinstance(produced, expected) or produced.type_id != self.type_id:
            raise DefinitionError(
                f"{self.type_id} configuration: the factory must return the {self.kind} "
                f"{self.type_id!r} it declares"
            )
        return produced


class _ConfigurationHeader(WireModel):
    kind: Literal["strategy", "strategy-extension"]
    type_id: Id
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
    fields: tuple[ConfigurationField, ...] = Field(max_length=64)

    @model_validator(mode="after")
    def _check_unique(self) -> _ConfigurationHeader:
        if not unique(field.id for field in self.fields):
            raise ValueError("fields: duplicate field id")
        return self


def define_strategy_configuration(
    kind: str,
    type_id: str,
    label: str,
    description: str,
    fields: Iterable[ConfigurationField | Mapping[str, Any]],
    create: Callable[[Mapping[str, Any]], Any],
) -> StrategyConfiguration:
    """Define how a Strategy (or View extension) is configured.

    `create(config)` on the result validates input before the factory runs: integers within
    their bounds, lists of at most 32 unique non-empty strings of at most 500 characters,
    text of at most 4,000 characters, no unknown keys.

    Raises:
        DefinitionError: naming the field at fault.
    """
    header = validate_model(
        _ConfigurationHeader,
        {
            "kind": kind,
            "type_id": type_id,
            "label": label,
            "description": description,
            "fields": _listed(fields),
        },
        subject="configuration",
        error=DefinitionError,
    )
    if not callable(create):
        raise DefinitionError("create: must be callable")
    return StrategyConfiguration(
        header.kind, header.type_id, header.label, header.description, header.fields, create
    )
