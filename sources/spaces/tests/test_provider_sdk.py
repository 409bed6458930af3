"""The Provider SDK: definitions, models, adapters, and the Provider suite on test Providers.

The suite runs on a full in-memory Provider and on a query-only one; lying Providers show
that each suite check can fail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    Memory,
    ProviderError,
    ProviderInit,
    RememberRequest,
    SearchHit,
    SearchResult,
    SpaceProvider,
    SpaceProviderDefinition,
    SqliteProvider,
    VectorSearchRequest,
    define_space_provider,
)
from mnemon_source_spaces.testing import ProviderConformance, SeedMemory
from pydantic import ValidationError
from spaces_test_provider import ALL, LeakyRepr, MemoryProvider, memory_provider

from mnemon import DefinitionError, SourceError

MANIFEST = {
    "type_id": "memory",
    "package_name": "spaces-tests",
    "label": "Test",
    "description": "A test Provider.",
    "capabilities": ["search"],
}


# ------------------------------------------------------------------------- definitions


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type_id": "Bad Type"}, "provider manifest.type_id"),
        ({"capabilities": ["search", "teleport"]}, "provider manifest.capabilities.1"),
        ({"capabilities": ["search", "search"]}, "duplicate capability"),
        ({"capabilities": []}, "provider manifest.capabilities"),
        ({"extra": True}, "provider manifest.extra"),
    ],
    ids=["type-id", "unknown-capability", "duplicate", "empty", "unknown-field"],
)
def test_a_bad_manifest_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        define_space_provider({**MANIFEST, **change}, lambda init: None)


def test_the_factory_must_be_callable() -> None:
    with pytest.raises(DefinitionError, match="create: a Provider factory must be callable"):
        define_space_provider(MANIFEST, "not callable")  # type: ignore[arg-type]


class _NoGet:
    async def status(self, request: Any) -> Any: ...
    async def search(self, request: Any) -> Any: ...
    async def list(self, request: Any) -> Any: ...
    async def remember(self, request: Any) -> Any: ...


async def test_an_adapter_lacking_a_declared_method_is_refused(tmp_path: Path) -> None:
    lying = define_space_provider(
        {**MANIFEST, "capabilities": ["search", "get"]}, lambda i: _NoGet()
    )
    with pytest.raises(DefinitionError, match=r"declares 'get' but the adapter has no get\(\)"):
        await lying.open(ProviderInit(instance_key="k", data_directory=str(tmp_path)))
    missing = define_space_provider(MANIFEST, lambda init: object())
    with pytest.raises(DefinitionError, match=r"the adapter has no status\(\)"):
        await missing.open(ProviderInit(instance_key="k", data_directory=str(tmp_path)))


def test_models_are_frozen_strict_and_json_safe() -> None:
    memory = Memory(parent="p", id="m-1", text="hello", created_at="2024-01-01T00:00:00+00:00")
    with pytest.raises(ValidationError):
        memory.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        Memory.model_validate({**memory.model_dump(), "extra": 1})
    with pytest.raises(ValidationError, match="time zone"):
        Memory.model_validate({**memory.model_dump(), "created_at": "2024-01-01T00:00:00"})
    with pytest.raises(ValidationError):
        Memory.model_validate({**memory.model_dump(), "parent": "has spaces"})
    with pytest.raises(ValidationError):
        SearchHit(memory=memory, score=float("nan"))
    with pytest.raises(ValidationError):
        SearchHit(memory=memory, score=1.5)
    with pytest.raises(ValidationError):
        RememberRequest(parent="p", text="x" * 64_001)
    assert orjson.loads(orjson.dumps(SearchHit(memory=memory, score=0.5).model_dump()))


@pytest.mark.parametrize(
    "configuration",
    [{"bad": {1, 2}}, {"bad": float("inf")}, {"bad": b"bytes"}, {1: "non-string key"}],
    ids=["set", "infinity", "bytes", "key"],
)
def test_provider_configuration_must_be_json(configuration: dict[Any, Any]) -> None:
    with pytest.raises(ValidationError):
        ProviderInit(instance_key="k", data_directory="/tmp", configuration=configuration)


def test_provider_init_never_shows_its_secrets() -> None:
    init = ProviderInit(
        instance_key="k",
        data_directory="/tmp",
        configuration={"api_key": "config-secret-1"},
        token="token-secret-2",
    )
    shown = repr(init) + str(init)
    assert "config-secret-1" not in shown
    assert "token-secret-2" not in shown


def test_provider_errors_keep_a_code_and_a_retry_class() -> None:
    assert ProviderError("timeout").retryable
    assert ProviderError("unavailable").retryable
    assert not ProviderError("unsupported").retryable
    assert ProviderError("not_found").kind == "terminal"
    assert isinstance(ProviderError("forbidden"), SourceError)
    assert ProviderError("forbidden").kind == "access"


def test_the_sqlite_manifest_declares_everything_it_implements() -> None:
    # everything the test Provider implements, and vectors
    assert set(SQLITE_PROVIDER.capabilities) == {*ALL, "vectors"}


async def test_a_provider_declaring_vectors_has_all_four_vector_methods(tmp_path: Path) -> None:
    class Lexical:
        async def status(self, request: Any) -> Any: ...
        async def search(self, request: Any) -> Any: ...
        async def list(self, request: Any) -> Any: ...
        async def remember(self, request: Any) -> Any: ...
        async def register_space(self, request: Any) -> Any: ...
        async def store_vectors(self, request: Any) -> Any: ...
        async def vector_search(self, request: Any) -> Any: ...

    half = define_space_provider(
        {**MANIFEST, "capabilities": ["search", "list", "remember", "vectors"]},
        lambda init: Lexical(),
    )
    init = ProviderInit(instance_key="k", data_directory=str(tmp_path))
    with pytest.raises(DefinitionError, match=r"declares 'vectors' but .* no missing_vectors"):
        await half.open(init)


async def test_sqlite_configuration_is_validated(tmp_path: Path) -> None:
    for configuration, message in (
        ({"path": "relative.sqlite3"}, "path: must be an absolute file path"),
        ({"busy_timeout_ms": 0}, "busy_timeout_ms"),
        ({"synchronous": "off"}, "synchronous"),
        ({"colour": "red"}, "colour: unknown key"),
        ({"token": 5}, "token: must be a string"),
    ):
        with pytest.raises(DefinitionError, match=message):
            await SQLITE_PROVIDER.open(
                ProviderInit(
                    instance_key="k", data_directory=str(tmp_path), configuration=configuration
                )
            )


# ------------------------------------------------------------------------- the suite


class TestMemoryProvider(ProviderConformance):
    """The in-memory Provider the Source tests use is itself a conforming Provider."""

    provider = memory_provider()
    secrets: ClassVar[Mapping[str, str]] = {"token": "memory-secret-value"}

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json")}


def _seed_file(path: Path, parent: str, memories: Sequence[SeedMemory]) -> None:
    data = json.loads(path.read_text()) if path.exists() else {"memories": {}, "links": []}
    rows = data["memories"].setdefault(parent, [])
    for memory in memories:
        rows.append(
            {
                "parent": parent,
                "id": memory.id,
                "text": memory.text,
                "tags": list(memory.tags),
                "entities": list(memory.entities),
                "created_at": datetime.now(UTC).isoformat(),
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class QueryOnly(ProviderConformance):
    provider = memory_provider(["search"], type_id="query-only")

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json")}

    async def seed(
        self, adapter: SpaceProvider, directory: Path, parent: str, memories: Sequence[SeedMemory]
    ) -> None:
        # a query-only Provider cannot remember: fill its upstream directly
        _seed_file(directory / "memory.json", parent, memories)


class TestQueryOnlyProvider(QueryOnly):
    """A query-only Provider conforms: it searches, and refuses everything else."""


# ------------------------------------------------------------------------- liars


class _FabricatingQueryOnly(QueryOnly):
    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json"), "fabricate": True}


class _FabricatingLinks(ProviderConformance):
    provider = memory_provider()

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json"), "fabricate": True}


class _LeakyParents(ProviderConformance):
    provider = memory_provider()

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json"), "leak": True}


class _LeakyRepr(ProviderConformance):
    provider = memory_provider(kind=LeakyRepr)

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json")}


class _Forgetful(ProviderConformance):
    """Claims to store but keeps nothing: every write is lost."""

    class Adapter(MemoryProvider):
        def _save(self, data: dict[str, Any]) -> None:
            return None

    provider = memory_provider(kind=Adapter)

    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "memory.json")}


def _lying_sqlite(type_id: str, vector_search: Any) -> SpaceProviderDefinition:
    """The SQLite Provider with its vector search replaced by `vector_search(adapter, request)`."""

    def create(init: ProviderInit) -> SqliteProvider:
        adapter = SQLITE_PROVIDER.create(init)
        assert isinstance(adapter, SqliteProvider)

        async def search(request: VectorSearchRequest) -> SearchResult:
            return await vector_search(adapter, request)

        adapter.vector_search = search  # type: ignore[method-assign]
        return adapter

    manifest = SQLITE_PROVIDER.manifest.model_copy(update={"type_id": type_id})
    return define_space_provider(manifest, create)


async def _every_parent(adapter: SqliteProvider, request: VectorSearchRequest) -> SearchResult:
    wide = request.model_copy(update={"parents": ("conformance-parent-a", "conformance-parent-b")})
    return await SqliteProvider.vector_search(adapter, wide)


async def _raw_cosine(adapter: SqliteProvider, request: VectorSearchRequest) -> SearchResult:
    found = await SqliteProvider.vector_search(adapter, request)
    return SearchResult(
        hits=tuple(
            hit.model_copy(update={"score": max(0.0, 2 * hit.score - 1)}) for hit in found.hits
        )
    )


class _SqliteLiar(ProviderConformance):
    def configure(self, directory: Path) -> Mapping[str, Any]:
        return {"path": str(directory / "store.sqlite3")}


class _VectorsOfEveryParent(_SqliteLiar):
    provider = _lying_sqlite("every-parent", _every_parent)


class _RawCosineScores(_SqliteLiar):
    provider = _lying_sqlite("raw-cosine", _raw_cosine)


@pytest.mark.parametrize(
    ("suite", "check", "message"),
    [
        (
            _FabricatingQueryOnly,
            "test_undeclared_capabilities_refuse",
            "undeclared capability 'list' answered",
        ),
        (_FabricatingLinks, "test_links_are_never_fabricated", "made up links"),
        (
            _LeakyParents,
            "test_parents_with_the_same_child_ids_are_isolated",
            "found parent B's memories",
        ),
        (_LeakyParents, "test_search_finds_what_was_stored", "not asked for"),
        (_LeakyRepr, "test_credentials_never_appear", "credential leaked"),
        (_Forgetful, "test_data_survives_reopening", "data did not survive"),
        (_Forgetful, "test_concurrent_writes_lose_nothing", "a write was lost"),
        (
            _VectorsOfEveryParent,
            "test_a_parent_never_sees_another_parents_vectors",
            "a parent that was not asked for",
        ),
        (
            _RawCosineScores,
            "test_vector_search_ranks_memories_by_their_best_segment",
            "m-east must score 0.985",
        ),
    ],
    ids=[
        "fabricated-list",
        "fabricated-links",
        "leaky-isolation",
        "leaky-search",
        "leaky-repr",
        "lost-data",
        "lost-writes",
        "vectors-of-every-parent",
        "raw-cosine-scores",
    ],
)
async def test_the_suite_catches_a_lying_provider(
    tmp_path: Path, suite: type[ProviderConformance], check: str, message: str
) -> None:
    with pytest.raises(AssertionError, match=message):
        await getattr(suite(), check)(tmp_path)


async def test_a_check_that_does_not_apply_is_skipped_with_its_reason(tmp_path: Path) -> None:
    suite = QueryOnly()
    with pytest.raises(pytest.skip.Exception, match="does not declare 'list'"):
        await suite.test_list_returns_exactly_what_was_stored(tmp_path)
    with pytest.raises(pytest.skip.Exception, match=r"corrupt\(\) does not damage"):
        await suite.test_malformed_upstream_data_is_never_returned(tmp_path / "corrupt")
