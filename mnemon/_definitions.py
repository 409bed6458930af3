"""The author SDK: plugin descriptors, Source and Strategy definitions and their protocols."""

from __future__ import annotations

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
    ExtensionContribution,
    FactsRequest,
    Id,
    JsonObject,
    MutationReceipt,
    MutationRequest,
    PackageName,
    ProjectionRequest,
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
    "MemorySource",
    "PluginDescriptor",
    "PluginRole",
    "ProvidedCapability",
    "SourceDefinition",
    "SourceFactory",
    "StrategyDefinition",
    "ViewExtensionDefinition",
    "define_memory_plugin",
    "define_memory_source",
    "define_memory_strategy",
    "define_view_extension",
]

PluginRole = Literal["source", "strategy", "strategy-extension"]


class ProvidedCapability(WireModel):
    """A capability a plugin provides; `exclusive` forbids a second active provider."""

    id: CapabilityId
    exclusive: Annotated[bool, Strict()] = False


class PluginDescriptor(WireModel):
    """What a plugin is, what it provides and what it requires of others."""

    package_name: PackageName
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
    roles: tuple[PluginRole, ...] = Field(min_length=1)
    provides: tuple[ProvidedCapability, ...] = Field(min_length=1)
    requires: tuple[CapabilityId, ...] = ()

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
    if create_turn is not None and not callable(create_turn):
        raise DefinitionError("create_turn: must be callable or None")
    return StrategyDefinition(checked, compose, create_turn)


# ------------------------------------------------------------------------- View extensions

STANDARD_SLOTS = ("selection", "projection", "capture")


class ExtensionRequest(WireModel):
    """What a View extension's `contribute()` receives for one composition."""

    instance_key: str
    configuration: JsonObject
    request: ComposeRequest
    sources: tuple[SourceCandidate, ...]


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
