"""The author SDK: plugin descriptors, Source and Strategy definitions and their protocols."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, TypeAlias

from pydantic import Field, Strict, StringConstraints, model_validator

from ._configuration import Configuration, read_values
from ._errors import DefinitionError
from ._forms import ConfigurationField, configuration_fields, configuration_schema
from ._json import freeze_json, unique
from ._models import (
    CapabilityId,
    ComposeRequest,
    Evidence,
    EvidenceLimits,
    ExtensionContribution,
    FactsRequest,
    Id,
    JsonObject,
    MaintenancePlan,
    MaintenanceRequest,
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
    "MaintenancePolicy",
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

    A runtime whose configuration changes the scope ids it partitions by (the manifest's
    `partition_keys`) has its own `partition_keys` attribute, a list of `Scope` field names,
    read once when it is created and checked like the manifest's.
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


class MaintenancePolicy(Protocol):
    """A Strategy's pure maintenance policy: a plan for the request, in the core's terms.

    No I/O, clock, randomness or secrets: the host calls it twice and refuses two different
    plans. It never writes; the host executes the plan it returns.
    """

    def __call__(self, request: MaintenanceRequest) -> MaintenancePlan | Mapping[str, Any]:
        """The plan for `request`: records to archive, tasks to create, or a refusal."""
        ...


@dataclass(frozen=True, slots=True)
class StrategyDefinition:
    """A validated Strategy type: its manifest, pure `compose`, optional policies.

    `create_turn` makes a turn's read policy; `maintain` is its pure maintenance policy.
    """

    manifest: StrategyManifest
    compose: ComposeFunction
    create_turn: TurnFactory | None = None
    maintain: MaintenancePolicy | None = None

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
    *,
    maintain: MaintenancePolicy | None = None,
) -> StrategyDefinition:
    """Define a Strategy type from its manifest, its pure `compose` and optional policies.

    `create_turn` makes a turn's read policy; `maintain` is a pure maintenance policy the host
    consults when a Source refuses a write of a View this Strategy composed (a write past a
    cap) and when an operator runs maintenance: it answers a `MaintenancePlan`, which the host
    alone executes. A Strategy without one gets no automatic maintenance.

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
    if maintain is not None:
        if not callable(maintain):
            raise DefinitionError("maintain: must be callable or None")
        if inspect.iscoroutinefunction(maintain) or inspect.iscoroutinefunction(
            getattr(maintain, "__call__", None)  # noqa: B004 - a callable object's own method
        ):
            raise DefinitionError(
                "maintain: a maintenance policy must be a plain function (def), not async def: "
                "it is pure and never waits"
            )
    return StrategyDefinition(checked, compose, create_turn, maintain)


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


@dataclass(frozen=True, slots=True)
class StrategyConfiguration:
    """A configurable Strategy or View extension: its model, and a factory run on valid input.

    `configuration` is the `Configuration` model an entry's configuration is read as; `fields`
    are its form fields (`configuration_fields`), `json_schema()` its JSON Schema with this
    definition's label and description.
    """

    kind: Literal["strategy", "strategy-extension"]
    type_id: str
    label: str
    description: str
    configuration: type[Configuration]
    fields: tuple[ConfigurationField, ...]
    factory: Callable[[Any], Any]

    def validate(self, config: Mapping[str, Any] | None, *, config_dir: str | None = None) -> Any:
        """Read `config` as the configuration model and return the model instance.

        It is read as `read_configuration` reads a Source's: defaults filled in, errors
        reading `<type id> configuration.<key>: <rule>`, never quoting a value. Relative
        `ConfigPath` values are taken from `config_dir` (the entry's `ctx.config_dir`).

        Raises:
            DefinitionError: naming the configuration key at fault.
        """
        subject = f"{self.type_id} configuration"
        values = freeze_json({} if config is None else config, what=subject, error=DefinitionError)
        if not isinstance(values, Mapping):
            raise DefinitionError(f"{subject}: must be a JSON object")
        return read_values(self.configuration, values, config_dir=config_dir, subject=self.type_id)

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of what `validate` accepts: for a manifest's `config_schema`.

        It is `configuration_schema(configuration)` titled with this definition's label and
        described with its description.
        """
        return configuration_schema(
            self.configuration, title=self.label, description=self.description
        )

    def create(
        self, config: Mapping[str, Any] | None = None, *, config_dir: str | None = None
    ) -> Any:
        """Validate `config`, then run the factory on the model instance and check what it made.

        Raises:
            DefinitionError: the configuration is invalid (nothing ran), or the factory
                returned something other than the declared Strategy or extension.
        """
        values = self.validate(config, config_dir=config_dir)
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


MAX_FIELDS = 64


def define_strategy_configuration(
    kind: str,
    type_id: str,
    label: str,
    description: str,
    configuration: type[Configuration],
    create: Callable[[Any], Any],
) -> StrategyConfiguration:
    """Define how a Strategy (or View extension) is configured: by a `Configuration` model.

    `create(config)` on the result reads the entry's configuration as `configuration` (the
    error form of `read_configuration`), then calls the factory `create` with the model
    instance, and checks it made the declared contribution. The model's form fields are
    checked now: a number needs both bounds, a default must keep its own rules.

    Raises:
        DefinitionError: naming the argument, or the model's key, at fault.
    """
    header = validate_model(
        _ConfigurationHeader,
        {"kind": kind, "type_id": type_id, "label": label, "description": description},
        subject="configuration",
        error=DefinitionError,
    )
    if not (isinstance(configuration, type) and issubclass(configuration, Configuration)):
        raise DefinitionError("configuration: must be a mnemon.sdk.Configuration subclass")
    if configuration.model_config.get("extra") != "forbid":
        raise DefinitionError(
            f"configuration: {configuration.__name__} must refuse unknown keys (extra='forbid')"
        )
    fields = configuration_fields(configuration)
    if len(fields) > MAX_FIELDS:
        raise DefinitionError(f"configuration: at most {MAX_FIELDS} keys, not {len(fields)}")
    if not callable(create):
        raise DefinitionError("create: must be callable")
    return StrategyConfiguration(
        header.kind,
        header.type_id,
        header.label,
        header.description,
        configuration,
        fields,
        create,
    )
