"""The Provider SDK: how a store of memories plugs into the `spaces` Source.

A Provider is a manifest (what it can do, declared truthfully) and a factory that makes an
adapter from configuration. The Source mounts the adapter itself and keeps it private; every
request names the `parent` namespace the Source derived, so a Provider never sees scope ids.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, TypeAlias

from pydantic import Field, Strict, StringConstraints, ValidationError, field_validator

from mnemon.sdk import DefinitionError, SourceError, VectorSpace

from ._wire import (
    EntityName,
    FrozenModel,
    Limit,
    MemoryId,
    Parent,
    Relation,
    TagName,
    Timestamp,
    json_object,
)

__all__ = [
    "OPTIONAL_METHODS",
    "PROVIDER_CAPABILITIES",
    "REQUIRED_METHODS",
    "VECTOR_METHODS",
    "EntityCount",
    "EntityIndexRequest",
    "EntityIndexResult",
    "ForgetRequest",
    "ForgetResult",
    "GetRequest",
    "GetResult",
    "LinkRequest",
    "LinkResult",
    "ListRequest",
    "ListResult",
    "Memory",
    "MemoryVectors",
    "MissingVectorsRequest",
    "MissingVectorsResult",
    "NamespaceStatus",
    "ProviderCapability",
    "ProviderError",
    "ProviderInit",
    "ProviderStatus",
    "RegisterSpaceRequest",
    "RegisterSpaceResult",
    "RelatedMemory",
    "RelatedRequest",
    "RelatedResult",
    "RememberRequest",
    "RememberResult",
    "SearchHit",
    "SearchRequest",
    "SearchResult",
    "SegmentVector",
    "SpaceProvider",
    "SpaceProviderDefinition",
    "SpaceProviderManifest",
    "StatusRequest",
    "StoreVectorsRequest",
    "StoreVectorsResult",
    "VectorSearchRequest",
    "check_adapter",
    "define_space_provider",
    "get_many",
    "remember_many",
]

ProviderCapability = Literal[
    "search", "list", "remember", "get", "forget", "link", "related", "entity_index", "vectors"
]
PROVIDER_CAPABILITIES: tuple[ProviderCapability, ...] = (
    "search",
    "list",
    "remember",
    "get",
    "forget",
    "link",
    "related",
    "entity_index",
    "vectors",
)
#: methods every adapter has; one whose capability is not declared raises `unsupported`
REQUIRED_METHODS = ("status", "search", "list", "remember")
#: methods an adapter has exactly when it declares the capability of the same name
OPTIONAL_METHODS = ("get", "forget", "link", "related", "entity_index")
#: the methods of the `vectors` capability: an adapter declaring it has all four
VECTOR_METHODS = ("register_space", "store_vectors", "vector_search", "missing_vectors")
#: the most segments one memory keeps vectors for (an embedder cuts a long text in windows)
MAX_MEMORY_SEGMENTS = 1_024
MAX_PROVIDER_TEXT = 64_000
MAX_QUERY = 1_000
MAX_PARENTS = 32

_CODE_KINDS: dict[str, Literal["transient", "access", "terminal", "degraded"]] = {
    "unsupported": "terminal",
    "not_found": "terminal",
    "unavailable": "transient",
}


class ProviderError(SourceError):
    """An error a Provider raises on purpose: a stable code, a retry class, a message.

    Codes: `unsupported` (the capability is not declared), `not_found`, `invalid_payload`,
    `timeout`, `rate_limited`, `provider_error`, `unavailable`, `unauthorized`, `forbidden`,
    `schema_mismatch`. The `spaces` Source passes on only the code, never the message, so a
    message may help a developer but must still never carry a credential.
    """

    def __init__(self, code: str, message: str = "", *, kind: Any = None) -> None:
        super().__init__(code, message, kind=kind or _CODE_KINDS.get(code))


# ------------------------------------------------------------------------- manifest


class SpaceProviderManifest(FrozenModel):
    """What a Provider type is and what it can do; capabilities are declared truthfully."""

    type_id: Annotated[str, Strict(), StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,63}$")]
    package_name: Annotated[
        str,
        Strict(),
        StringConstraints(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$"),
    ]
    label: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
    capabilities: tuple[ProviderCapability, ...] = Field(min_length=1)

    @field_validator("capabilities")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("duplicate capability")
        return value


class ProviderInit(FrozenModel):
    """What a Provider factory receives: its configuration and where it may keep data.

    `configuration` is the Source's `provider` object without `type`; `token` is the
    credential given as the Source's top-level `provider_token`. Neither is ever shown.
    """

    instance_key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]
    data_directory: Annotated[str, Strict(), StringConstraints(min_length=1)]
    configuration: dict[str, Any] = Field(default_factory=dict, repr=False)
    token: Annotated[str, Strict()] | None = Field(default=None, repr=False)

    @field_validator("configuration", mode="before")
    @classmethod
    def _json(cls, value: Any) -> dict[str, Any]:
        return json_object(value)


# ------------------------------------------------------------------------- data


class Memory(FrozenModel):
    """One stored memory as a Provider returns it."""

    parent: Parent
    id: MemoryId
    text: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_PROVIDER_TEXT)]
    tags: tuple[TagName, ...] = Field(default=(), max_length=64)
    entities: tuple[EntityName, ...] = Field(default=(), max_length=64)
    created_at: Timestamp


class NamespaceStatus(FrozenModel):
    """What a Provider knows about one parent: how many memories it holds, if it knows."""

    parent: Parent
    memories: Annotated[int, Strict(), Field(ge=0)] | None = None


class StatusRequest(FrozenModel):
    """Ask for the Provider's health and, with `count`, per-parent counts."""

    parents: tuple[Parent, ...] = Field(default=(), max_length=MAX_PARENTS)
    count: Annotated[bool, Strict()] = False


class ProviderStatus(FrozenModel):
    """A Provider's health; `capabilities` (when given) narrows the manifest's right now."""

    availability: Literal["ready", "degraded", "unavailable"]
    reason: (
        Annotated[str, Strict(), StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,127}$")] | None
    ) = None
    capabilities: tuple[ProviderCapability, ...] | None = None
    namespaces: tuple[NamespaceStatus, ...] = ()


class SearchRequest(FrozenModel):
    """Find memories in `parents` relevant to `query`, best first."""

    parents: tuple[Parent, ...] = Field(min_length=1, max_length=MAX_PARENTS)
    query: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_QUERY)]
    limit: Limit = 8


class SearchHit(FrozenModel):
    """One search result: the memory and a relevance `score` in [0, 1] (1 is best)."""

    memory: Memory
    score: Annotated[float, Field(ge=0.0, le=1.0)]


class SearchResult(FrozenModel):
    """Search results, best first."""

    hits: tuple[SearchHit, ...] = ()


class ListRequest(FrozenModel):
    """Page through one parent's memories, newest first."""

    parent: Parent
    limit: Limit = 20
    cursor: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] | None = None


class ListResult(FrozenModel):
    """One page of memories and the cursor of the next page, if any."""

    memories: tuple[Memory, ...] = ()
    next_cursor: Annotated[str, Strict(), StringConstraints(max_length=200)] | None = None


class RememberRequest(FrozenModel):
    """Store one memory under `parent`.

    A repeated `idempotency_key` (or an existing `memory_id`) in the same parent stores
    nothing and returns the memory already there.
    """

    parent: Parent
    text: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_PROVIDER_TEXT)]
    tags: tuple[TagName, ...] = Field(default=(), max_length=64)
    entities: tuple[EntityName, ...] = Field(default=(), max_length=64)
    idempotency_key: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] | None
    ) = None
    memory_id: MemoryId | None = None


class RememberResult(FrozenModel):
    """The stored memory; `created` is False when an existing one was returned.

    `durable` says whether the write is known to survive power loss when this returns; a
    Provider that only guarantees less (a crash-safe but unsynced write, an asynchronous
    replica) says False, and the Source's receipt then says `accepted`, not `committed`.
    """

    memory: Memory
    created: Annotated[bool, Strict()]
    durable: Annotated[bool, Strict()] = True


class GetRequest(FrozenModel):
    """Fetch one memory of `parent` by id."""

    parent: Parent
    id: MemoryId


class GetResult(FrozenModel):
    """The memory, or None when `parent` holds no memory with that id."""

    memory: Memory | None = None


class ForgetRequest(FrozenModel):
    """Delete one memory of `parent`, with its entities and links."""

    parent: Parent
    id: MemoryId


class ForgetResult(FrozenModel):
    """Whether a memory was deleted (False: there was none); `durable` as for remember."""

    forgotten: Annotated[bool, Strict()]
    durable: Annotated[bool, Strict()] = True


class LinkRequest(FrozenModel):
    """Link two memories of one parent with a relation."""

    parent: Parent
    source_id: MemoryId
    target_id: MemoryId
    relation: Relation = "related"


class LinkResult(FrozenModel):
    """Whether a new link was stored (False: it existed already); `durable` as for remember."""

    created: Annotated[bool, Strict()]
    durable: Annotated[bool, Strict()] = True


class RelatedRequest(FrozenModel):
    """The memories linked to one memory of `parent`."""

    parent: Parent
    id: MemoryId
    limit: Limit = 8


class RelatedMemory(FrozenModel):
    """A memory linked to the one asked about, with the link's relation and direction."""

    memory: Memory
    relation: Relation
    direction: Literal["outgoing", "incoming"]


class RelatedResult(FrozenModel):
    """Linked memories, most recently linked first; never links nobody made."""

    related: tuple[RelatedMemory, ...] = ()


class EntityIndexRequest(FrozenModel):
    """The entities named in one parent's memories, most mentioned first."""

    parent: Parent
    prefix: Annotated[str, Strict(), StringConstraints(max_length=128)] | None = None
    limit: Limit = 20


class EntityCount(FrozenModel):
    """One entity and how many memories mention it."""

    name: EntityName
    memories: Annotated[int, Strict(), Field(ge=1)]


class EntityIndexResult(FrozenModel):
    """Entities, most mentioned first.

    `complete` says whether the counts stand on every memory of the parent; a Provider whose
    index covers only part of it (a service's page size) says False, and the board marks
    its Entities page partial.
    """

    entities: tuple[EntityCount, ...] = ()
    complete: Annotated[bool, Strict()] = True


# ------------------------------------------------------------------------- vectors

SpaceKey = Annotated[str, Strict(), StringConstraints(min_length=3, max_length=97)]
Vector = tuple[Annotated[float, Strict()], ...]


class RegisterSpaceRequest(FrozenModel):
    """Make the store keep vectors of `space` (its identity is `space.key`, `id@version`).

    Registering again with the same model, dimensions and metric changes nothing; the same
    identity with another of them is refused (`ProviderError("space_changed")`): the store's
    vectors of that space would no longer be comparable.
    """

    space: VectorSpace


class RegisterSpaceResult(FrozenModel):
    """Whether the space was new to the store (False: it was registered already, the same)."""

    registered: Annotated[bool, Strict()]


class SegmentVector(FrozenModel):
    """One segment of a memory's text (`start`..`end` in code points) and its vector."""

    start: Annotated[int, Strict(), Field(ge=0)]
    end: Annotated[int, Strict(), Field(ge=0)]
    vector: Vector


class MemoryVectors(FrozenModel):
    """The vectors of one memory in one space: one per segment."""

    id: MemoryId
    segments: tuple[SegmentVector, ...] = Field(min_length=1, max_length=MAX_MEMORY_SEGMENTS)


class StoreVectorsRequest(FrozenModel):
    """Keep the vectors of some of `parent`'s memories in the registered space `space`.

    A memory's vectors replace any it had in that space; a memory the parent no longer holds
    (forgotten meanwhile) is skipped.
    """

    parent: Parent
    space: SpaceKey
    memories: tuple[MemoryVectors, ...] = Field(min_length=1, max_length=1_000)


class StoreVectorsResult(FrozenModel):
    """How many memories' vectors were stored; `durable` as for remember."""

    stored: Annotated[int, Strict(), Field(ge=0)]
    durable: Annotated[bool, Strict()] = True


class VectorSearchRequest(FrozenModel):
    """The memories of `parents` whose vectors in `space` are nearest to `vector`, best first.

    Each memory is scored by its best segment; `score` is in [0, 1] (for `cosine`,
    `(1 + similarity) / 2`). Memories without vectors in the space are not searched.
    """

    parents: tuple[Parent, ...] = Field(min_length=1, max_length=MAX_PARENTS)
    space: SpaceKey
    vector: Vector = Field(min_length=1, max_length=4_096)
    limit: Limit = 8


class MissingVectorsRequest(FrozenModel):
    """Memories of `parent` with no vectors yet in `space`, oldest first (for catching up)."""

    parent: Parent
    space: SpaceKey
    limit: Annotated[int, Strict(), Field(ge=1, le=1_000)] = 100


class MissingVectorsResult(FrozenModel):
    """Memories still without vectors; `remaining` counts all of them, when the store knows."""

    memories: tuple[Memory, ...] = ()
    remaining: Annotated[int, Strict(), Field(ge=0)] | None = None


# ------------------------------------------------------------------------- adapter


class SpaceProvider(Protocol):
    """What a Provider adapter implements; every method is a coroutine.

    Required: `status`, `search`, `list`, `remember`. When the manifest does not declare
    `search`, `list` or `remember`, that method raises `ProviderError("unsupported")` and
    returns nothing, never a stand-in. Optional, present exactly when declared:
    `get(GetRequest) -> GetResult`, `forget(ForgetRequest) -> ForgetResult`,
    `link(LinkRequest) -> LinkResult`, `related(RelatedRequest) -> RelatedResult`,
    `entity_index(EntityIndexRequest) -> EntityIndexResult`; with `vectors`, all of
    `register_space(RegisterSpaceRequest) -> RegisterSpaceResult`,
    `store_vectors(StoreVectorsRequest) -> StoreVectorsResult`,
    `vector_search(VectorSearchRequest) -> SearchResult` and
    `missing_vectors(MissingVectorsRequest) -> MissingVectorsResult`. Any adapter may have
    `dispose()`, which the Source calls once when it is disposed. Batch forms are optional
    too (see `remember_many` and `get_many`): `remember_many(requests)` when it declares
    `remember`, `get_many(requests)` when it declares `get`.
    """

    async def status(self, request: StatusRequest) -> ProviderStatus:
        """Report health cheaply; called for every turn's facts."""
        ...

    async def search(self, request: SearchRequest) -> SearchResult:
        """Return the memories of `request.parents` most relevant to the query."""
        ...

    async def list(self, request: ListRequest) -> ListResult:
        """Return one page of a parent's memories, newest first."""
        ...

    async def remember(self, request: RememberRequest) -> RememberResult:
        """Store one memory; `durable=False` in the result if it may not survive power loss."""
        ...


async def remember_many(
    provider: SpaceProvider, requests: Sequence[RememberRequest]
) -> list[RememberResult]:
    """Store many memories through `provider`: one result per request, in order.

    An adapter with its own `remember_many(requests)` stores the batch its own way (the
    SQLite Provider: one transaction, one fsync); any other gets one `remember` per request,
    so every Provider takes a batch. Idempotency keys are honoured either way.

    Raises:
        ProviderError: from the adapter; with its own batch nothing of it was stored, one by
            one the requests before the failing one were.
    """
    batch = getattr(provider, "remember_many", None)
    if callable(batch):
        return await _one_result_each("remember_many", batch, requests)
    return [await provider.remember(request) for request in requests]


async def get_many(provider: SpaceProvider, requests: Sequence[GetRequest]) -> list[GetResult]:
    """Fetch many memories by id through `provider`: one result per request, in order.

    The requests may name different parents; each is answered from its own parent only (a
    memory of another parent with the same id is not the one asked for). An adapter with its
    own `get_many(requests)` answers the batch its own way (the SQLite Provider: one query
    per parent and 500 ids); any other gets one `get` per request.

    Raises:
        ProviderError: `unsupported` when the adapter has no `get`; from the adapter; a
            result count that differs from the requests (`provider_error`).
    """
    if not requests:
        return []
    batch = getattr(provider, "get_many", None)
    if callable(batch):
        return await _one_result_each("get_many", batch, requests)
    get = getattr(provider, "get", None)
    if not callable(get):
        raise ProviderError("unsupported", "the Provider cannot fetch memories by id")
    return [await get(request) for request in requests]


async def _one_result_each(name: str, batch: Any, requests: Sequence[Any]) -> list[Any]:
    """An adapter's own batch answer, refused unless it has one result per request.

    Raises:
        ProviderError: from the adapter; `provider_error` for a count that differs.
    """
    results = list(await batch(list(requests)))
    if len(results) != len(requests):
        raise ProviderError(
            "provider_error",
            f"{name}: the adapter returned a result count that differs from the requests",
        )
    return results


ProviderFactory: TypeAlias = Callable[[ProviderInit], "SpaceProvider | Awaitable[SpaceProvider]"]


@dataclass(frozen=True, slots=True)
class SpaceProviderDefinition:
    """A validated Provider type: its manifest and the factory making adapters."""

    manifest: SpaceProviderManifest
    create: ProviderFactory

    @property
    def type_id(self) -> str:
        """The Provider type id, as configured in `provider.type`."""
        return self.manifest.type_id

    @property
    def capabilities(self) -> frozenset[str]:
        """The capabilities the manifest declares."""
        return frozenset(self.manifest.capabilities)

    async def open(self, init: ProviderInit) -> SpaceProvider:
        """Make an adapter and check it has the methods its manifest promises.

        Raises:
            DefinitionError: the configuration was refused (the factory's own message), or
                the adapter lacks a method its manifest declares.
        """
        made = self.create(init)
        adapter = await made if inspect.isawaitable(made) else made
        check_adapter(self.manifest, adapter)
        return adapter


def define_space_provider(
    manifest: SpaceProviderManifest | Mapping[str, Any], create: ProviderFactory
) -> SpaceProviderDefinition:
    """Define a Provider type from its manifest and adapter factory.

    `create(init)` validates `init.configuration`, raising `mnemon.DefinitionError` as
    `"<key>: <problem>"` (never quoting a value), and returns the adapter without doing I/O.

    Raises:
        DefinitionError: naming the manifest field at fault, or a non-callable factory.
    """
    if not isinstance(manifest, SpaceProviderManifest):
        try:
            manifest = SpaceProviderManifest.model_validate(manifest)
        except ValidationError as exc:
            raise DefinitionError(_describe(exc, "provider manifest")) from None
    if not callable(create):
        raise DefinitionError("create: a Provider factory must be callable")
    return SpaceProviderDefinition(manifest, create)


def check_adapter(manifest: SpaceProviderManifest, adapter: object) -> None:
    """Check that `adapter` has every method `manifest` promises.

    Raises:
        DefinitionError: naming the missing method.
    """
    declared = set(manifest.capabilities)
    for name in REQUIRED_METHODS:
        if not callable(getattr(adapter, name, None)):
            raise DefinitionError(f"provider {manifest.type_id!r}: the adapter has no {name}()")
    for name in OPTIONAL_METHODS:
        if name in declared and not callable(getattr(adapter, name, None)):
            raise DefinitionError(
                f"provider {manifest.type_id!r}: declares {name!r} but the adapter has no {name}()"
            )
    if "vectors" in declared:
        for name in VECTOR_METHODS:
            if not callable(getattr(adapter, name, None)):
                raise DefinitionError(
                    f"provider {manifest.type_id!r}: declares 'vectors' but the adapter has no "
                    f"{name}()"
                )


def _describe(exc: ValidationError, subject: str) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    path = subject + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    )
    return f"{path}: {error['msg'].removeprefix('Value error, ')}"
