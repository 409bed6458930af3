"""The Provider conformance suite: what every `spaces` Provider author runs on their Provider.

Subclass `ProviderConformance` in a test module named like `Test...`, say how to configure
the Provider on a temporary directory and, optionally, how to damage or stall its upstream;
pytest then runs every check against real adapters (async tests need an anyio runner, such
as anyio's pytest plugin in auto mode)::

    class TestMyProvider(ProviderConformance):
        provider = MY_PROVIDER
        secrets = {"api_key": "not-a-real-key"}

        def configure(self, directory):
            return {"url": start_test_server(directory)}

Checks for a capability the manifest does not declare are skipped, except the one proving
that undeclared methods refuse (`unsupported`) instead of answering with stand-ins. Each
check fails with a message naming the rule the Provider broke. Importing this module does
not import pytest. The `vectors` checks use small spaces (three dimensions) and allow for
vectors kept at half precision (scores within `vector_tolerance` of the rule's value).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NoReturn, TypeVar

import anyio
from pydantic import BaseModel

from mnemon.sdk import DefinitionError, VectorSpace

from ._provider import (
    OPTIONAL_METHODS,
    EntityIndexRequest,
    EntityIndexResult,
    ForgetRequest,
    ForgetResult,
    GetRequest,
    GetResult,
    LinkRequest,
    LinkResult,
    ListRequest,
    ListResult,
    Memory,
    MemoryVectors,
    MissingVectorsRequest,
    MissingVectorsResult,
    ProviderError,
    ProviderInit,
    ProviderStatus,
    RegisterSpaceRequest,
    RegisterSpaceResult,
    RelatedRequest,
    RelatedResult,
    RememberRequest,
    RememberResult,
    SearchRequest,
    SearchResult,
    SegmentVector,
    SpaceProvider,
    SpaceProviderDefinition,
    StatusRequest,
    StoreVectorsRequest,
    StoreVectorsResult,
    VectorSearchRequest,
    get_many,
)

__all__ = ["ProviderConformance", "SeedMemory"]

_M = TypeVar("_M", bound=BaseModel)
PARENT_A = "conformance-parent-a"
PARENT_B = "conformance-parent-b"
TRANSIENT = ("timeout", "unavailable", "rate_limited", "provider_error")
# text that would break a naive FTS or SQL query if it were passed through unquoted
HOSTILE_QUERIES = (
    '"unbalanced quote',
    "NEAR(a b) OR NOT * ^ : -- ;",
    "'); DROP TABLE memories; --",
    "{col}: (x AND",
    "🙂 emoji only 🙂",
)
#: the space the `vectors` checks keep their vectors in
SPACE = VectorSpace(
    id="conformance.toy", version="1", model="toy-3d", dimensions=3, metric="cosine"
)
Vector3 = tuple[float, ...]


def _cosine_score(a: Vector3, b: Vector3) -> float:
    """The rule's score for `cosine`: (1 + similarity) / 2."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return (1.0 + dot / (math.hypot(*a) * math.hypot(*b))) / 2.0


def _dot_score(a: Vector3, b: Vector3) -> float:
    """The rule's score for `dot`: the logistic of the product."""
    return 1.0 / (1.0 + math.exp(-sum(x * y for x, y in zip(a, b, strict=True))))


def _l2_score(a: Vector3, b: Vector3) -> float:
    """The rule's score for `l2`: 1 / (1 + distance)."""
    return 1.0 / (1.0 + math.dist(a, b))


def _segments(memory_id: str, *vectors: Vector3) -> MemoryVectors:
    return MemoryVectors(
        id=memory_id,
        segments=tuple(
            SegmentVector(start=0, end=number + 1, vector=vector)
            for number, vector in enumerate(vectors)
        ),
    )


def _unchecked(memory_id: str, vector: Vector3) -> MemoryVectors:
    """Vectors built without validation: the models refuse non-finite numbers, a Provider too."""
    segment = SegmentVector.model_construct(start=0, end=1, vector=vector)
    return MemoryVectors.model_construct(id=memory_id, segments=(segment,))


def _skip(reason: str) -> NoReturn:
    """Report a check that does not apply to this Provider as skipped, never as passed."""
    import pytest  # only here: importing the suite does not import pytest

    pytest.skip(reason)


@dataclass(frozen=True)
class SeedMemory:
    """One memory the suite puts into a parent before checking reads."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


class ProviderConformance:
    """The checks every Provider must pass; subclass it and fill in the hooks below."""

    #: the Provider definition under test
    provider: ClassVar[SpaceProviderDefinition]
    #: configuration keys holding secrets, with values the suite adds to the configuration
    secrets: ClassVar[Mapping[str, str]] = {}
    #: a credential the suite passes as `ProviderInit.token` (checked like `secrets`)
    token: ClassVar[str | None] = "conformance-token-0b7e4d9a"
    #: how long a call may take on a stalled upstream before it must have failed
    stall_timeout: ClassVar[float] = 5.0
    #: the suite's own guard on every call, so a hanging Provider fails instead of hanging
    call_timeout: ClassVar[float] = 20.0
    #: how many writes run at once in the concurrency check
    concurrent_writers: ClassVar[int] = 24
    #: how far a vector search score may be from the rule's (half-precision storage)
    vector_tolerance: ClassVar[float] = 0.003

    # ------------------------------------------------------------------ hooks

    def configure(self, directory: Path) -> Mapping[str, Any]:
        """Provider configuration (without `type`) keeping its data under `directory`."""
        raise NotImplementedError

    async def seed(
        self,
        adapter: SpaceProvider,
        directory: Path,
        parent: str,
        memories: Sequence[SeedMemory],
    ) -> None:
        """Put `memories` (with their ids) into `parent`; by default through `remember`.

        A Provider that cannot remember overrides this to fill its upstream directly.
        """
        for memory in memories:
            await self._guard(
                adapter.remember(
                    RememberRequest(
                        parent=parent,
                        text=memory.text,
                        tags=memory.tags,
                        entities=memory.entities,
                        memory_id=memory.id,
                    )
                )
            )

    def corrupt(self, directory: Path, configuration: Mapping[str, Any], parent: str) -> bool:
        """Write malformed data into `parent` upstream; return False when not possible."""
        return False

    def stall(
        self, directory: Path, configuration: Mapping[str, Any]
    ) -> AbstractContextManager[Any] | None:
        """A context manager inside which the upstream does not answer writes (or None)."""
        return None

    # ------------------------------------------------------------------ machinery

    def _config(self, directory: Path) -> dict[str, Any]:
        return {**self.configure(directory), **self.secrets}

    def _declares(self, capability: str) -> bool:
        return capability in self.provider.capabilities

    def _init(self, directory: Path) -> ProviderInit:
        return ProviderInit(
            instance_key="source:conformance",
            data_directory=str(directory / "provider-data"),
            configuration=self._config(directory),
            token=self.token,
        )

    @asynccontextmanager
    async def _opened(self, directory: Path) -> AsyncIterator[SpaceProvider]:
        adapter = await self.provider.open(self._init(directory))
        try:
            yield adapter
        finally:
            dispose = getattr(adapter, "dispose", None)
            if callable(dispose):
                with anyio.CancelScope(shield=True):
                    await dispose()

    async def _guard(self, call: Awaitable[Any]) -> Any:
        with anyio.fail_after(self.call_timeout):
            return await call

    async def _refusal(self, call: Awaitable[Any]) -> ProviderError | None:
        """The ProviderError `call` raised, or None when it answered."""
        try:
            await self._guard(call)
        except ProviderError as exc:
            return exc
        return None

    async def _refused_as(self, call: Awaitable[Any], code: str, what: str) -> None:
        """Assert `call` raised a ProviderError with `code`."""
        refusal = await self._refusal(call)
        outcome = "accepted" if refusal is None else repr(refusal.code)
        assert outcome == repr(code), f"{what} must be refused as {code!r}, not {outcome}"

    async def _answer(self, call: Awaitable[Any], model: type[_M], what: str) -> _M:
        value = await self._guard(call)
        assert isinstance(value, model), (
            f"{what} must return a {model.__name__}, not {type(value).__name__}"
        )
        # a model built without validation (model_construct) must still be valid
        return model.model_validate(value.model_dump())

    async def _seed(
        self, adapter: SpaceProvider, directory: Path, parent: str, memories: Sequence[SeedMemory]
    ) -> None:
        await self.seed(adapter, directory, parent, memories)

    def _needs(self, capability: str) -> None:
        if not self._declares(capability):
            _skip(f"the Provider does not declare {capability!r}: nothing of it to check")

    async def _register(self, adapter: Any, space: VectorSpace = SPACE) -> RegisterSpaceResult:
        return await self._answer(
            adapter.register_space(RegisterSpaceRequest(space=space)),
            RegisterSpaceResult,
            "register_space()",
        )

    async def _store_vectors(
        self, adapter: Any, parent: str, *memories: MemoryVectors, space: str = SPACE.key
    ) -> int:
        request = StoreVectorsRequest(parent=parent, space=space, memories=memories)
        result = await self._answer(
            adapter.store_vectors(request), StoreVectorsResult, "store_vectors()"
        )
        return result.stored

    async def _nearest(
        self,
        adapter: Any,
        vector: Vector3,
        *parents: str,
        space: str = SPACE.key,
        limit: int = 8,
    ) -> list[tuple[str, str, float]]:
        """(parent, id, score) of each hit, best first, checked against the search rules."""
        asked = parents or (PARENT_A,)
        request = VectorSearchRequest(parents=asked, space=space, vector=vector, limit=limit)
        result = await self._answer(adapter.vector_search(request), SearchResult, "vector_search()")
        hits = [(hit.memory.parent, hit.memory.id, hit.score) for hit in result.hits]
        assert len(hits) <= limit, "vector_search() returned more hits than the limit"
        assert all(parent in asked for parent, _, _ in hits), (
            "vector_search() returned a memory of a parent that was not asked for"
        )
        scores = [score for _, _, score in hits]
        assert scores == sorted(scores, reverse=True), "vector_search() hits must be best first"
        assert len({(parent, memory) for parent, memory, _ in hits}) == len(hits), (
            "vector_search() returned one memory twice: a memory is scored by its best segment"
        )
        return hits

    async def _missing(
        self, adapter: Any, parent: str, *, space: str = SPACE.key, limit: int = 100
    ) -> tuple[list[str], int | None]:
        request = MissingVectorsRequest(parent=parent, space=space, limit=limit)
        result = await self._answer(
            adapter.missing_vectors(request), MissingVectorsResult, "missing_vectors()"
        )
        assert all(memory.parent == parent for memory in result.memories), (
            "missing_vectors() listed a memory of another parent"
        )
        return [memory.id for memory in result.memories], result.remaining

    def _scored(
        self,
        hits: Sequence[tuple[str, str, float]],
        expected: Sequence[tuple[str, float]],
        rule: str,
    ) -> None:
        """Assert the hits are `expected` (id, score), in order, each score as the rule says."""
        got = [memory for _, memory, _ in hits]
        assert got == [memory for memory, _ in expected], (
            f"{rule}: vector_search() must rank {[m for m, _ in expected]}, got {got}"
        )
        for (_, memory, score), (_, wanted) in zip(hits, expected, strict=True):
            assert abs(score - wanted) <= self.vector_tolerance, (
                f"{rule}: {memory} must score {wanted:.3f}, got {score:.3f}"
            )

    # ------------------------------------------------------------------ checks

    async def test_undeclared_capabilities_refuse(self, tmp_path: Path) -> None:
        """Undeclared methods raise `unsupported`; they never answer with stand-ins.

        A query-only Provider must not make up a browse list from search results, links
        from recency, or an entity index from text.
        """
        calls: dict[str, Callable[[SpaceProvider], Awaitable[Any]]] = {
            "search": lambda a: a.search(SearchRequest(parents=(PARENT_A,), query="anything")),
            "list": lambda a: a.list(ListRequest(parent=PARENT_A)),
            "remember": lambda a: a.remember(RememberRequest(parent=PARENT_A, text="refused")),
            "get": lambda a: a.get(GetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
            "forget": lambda a: a.forget(ForgetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
            "link": lambda a: a.link(  # type: ignore[attr-defined]
                LinkRequest(parent=PARENT_A, source_id="m-1", target_id="m-2")
            ),
            "related": lambda a: a.related(RelatedRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
            "entity_index": lambda a: a.entity_index(EntityIndexRequest(parent=PARENT_A)),  # type: ignore[attr-defined]
        }
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "anything at all")])
            for capability, call in calls.items():
                if self._declares(capability):
                    continue
                if capability in OPTIONAL_METHODS and getattr(adapter, capability, None) is None:
                    continue
                refusal = await self._refusal(call(adapter))
                if refusal is None:
                    raise AssertionError(
                        f"undeclared capability {capability!r} answered instead of refusing"
                    )
                assert refusal.code == "unsupported", (
                    f"undeclared {capability}() must raise 'unsupported', not {refusal.code!r}"
                )

    async def test_status_reports_health_and_true_counts(self, tmp_path: Path) -> None:
        """Status is ready on a working store; counts, when given, are exact per parent."""
        async with self._opened(tmp_path) as adapter:
            status = await self._answer(
                adapter.status(StatusRequest(parents=(PARENT_A, PARENT_B))),
                ProviderStatus,
                "status()",
            )
            assert status.availability == "ready", f"a fresh store is {status.availability}"
            if status.capabilities is not None:
                extra = set(status.capabilities) - set(self.provider.capabilities)
                assert not extra, f"status() claims undeclared capabilities {sorted(extra)}"
            await self._seed(
                adapter,
                tmp_path,
                PARENT_A,
                [SeedMemory("m-1", "first counted memory"), SeedMemory("m-2", "second one")],
            )
            status = await self._answer(
                adapter.status(StatusRequest(parents=(PARENT_A, PARENT_B), count=True)),
                ProviderStatus,
                "status(count=True)",
            )
            counts = {item.parent: item.memories for item in status.namespaces}
            assert set(counts) <= {PARENT_A, PARENT_B}, "status() reported parents not asked for"
            if counts.get(PARENT_A) is not None:
                assert counts[PARENT_A] == 2, f"parent A holds 2 memories, not {counts[PARENT_A]}"
            if counts.get(PARENT_B) is not None:
                assert counts[PARENT_B] == 0, f"parent B holds nothing, not {counts[PARENT_B]}"

    async def test_search_finds_what_was_stored(self, tmp_path: Path) -> None:
        """Search finds a stored memory, best first, within the limit and the parents asked."""
        self._needs("search")
        seeded = [
            SeedMemory("m-1", "The user prefers green tea with breakfast", tags=("drinks",)),
            SeedMemory("m-2", "The deployment runs on Kubernetes in the Frankfurt region"),
            SeedMemory("m-3", "Green paint was chosen for the kitchen walls"),
        ]
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, seeded)
            await self._seed(adapter, tmp_path, PARENT_B, [SeedMemory("m-9", "green tea too")])
            result = await self._answer(
                adapter.search(SearchRequest(parents=(PARENT_A,), query="green tea", limit=2)),
                SearchResult,
                "search()",
            )
            ids = [hit.memory.id for hit in result.hits]
            assert ids[:1] == ["m-1"], f"the best match for 'green tea' is m-1, got {ids}"
            assert len(ids) <= 2, "search() returned more hits than the limit"
            assert all(hit.memory.parent == PARENT_A for hit in result.hits), (
                "search() returned a memory of a parent that was not asked for"
            )
            scores = [hit.score for hit in result.hits]
            assert scores == sorted(scores, reverse=True), "hits must be best first"
            for query in HOSTILE_QUERIES:
                request = SearchRequest(parents=(PARENT_A,), query=query)
                refusal = await self._refusal(
                    self._answer(adapter.search(request), SearchResult, f"search({query!r})")
                )
                assert refusal is None or refusal.code == "invalid_payload", (
                    f"search({query!r}) may refuse as invalid_payload, not {refusal.code!r}"
                )

    async def test_list_returns_exactly_what_was_stored(self, tmp_path: Path) -> None:
        """Paging through a parent yields every stored memory once, newest first, nothing else."""
        self._needs("list")
        seeded = [SeedMemory(f"m-{index}", f"listed memory number {index}") for index in range(5)]
        async with self._opened(tmp_path) as adapter:
            empty = await self._answer(
                adapter.list(ListRequest(parent=PARENT_A)), ListResult, "list()"
            )
            assert not empty.memories, "list() of an empty parent must be empty"
            await self._seed(adapter, tmp_path, PARENT_A, seeded)
            await self._seed(adapter, tmp_path, PARENT_B, [SeedMemory("m-9", "elsewhere")])
            seen: list[Memory] = []
            cursor = None
            for _ in range(10):
                page = await self._answer(
                    adapter.list(ListRequest(parent=PARENT_A, limit=2, cursor=cursor)),
                    ListResult,
                    "list()",
                )
                assert len(page.memories) <= 2, "list() returned more than the limit"
                seen.extend(page.memories)
                cursor = page.next_cursor
                if cursor is None:
                    break
            ids = [memory.id for memory in seen]
            assert sorted(ids) == sorted(memory.id for memory in seeded), (
                f"list() must return exactly the stored memories once, got {ids}"
            )
            assert all(memory.parent == PARENT_A for memory in seen)
            stamps = [memory.created_at for memory in seen]
            assert stamps == sorted(stamps, reverse=True), "list() must be newest first"

    async def test_a_repeated_idempotency_key_stores_once(self, tmp_path: Path) -> None:
        """The same key in one parent returns the first memory; in another parent it is new."""
        self._needs("remember")
        async with self._opened(tmp_path) as adapter:
            requests = [
                RememberRequest(parent=parent, text=text, idempotency_key="key-1")
                for parent, text in (
                    (PARENT_A, "first write"),
                    (PARENT_A, "second write, same key"),
                    (PARENT_B, "same key, other parent"),
                )
            ]
            first, second, other = [
                await self._answer(adapter.remember(request), RememberResult, "remember()")
                for request in requests
            ]
            assert first.created, "a new key must store"
            assert not second.created, "a repeated key must not store again"
            assert second.memory.id == first.memory.id, "a repeated key returns the first memory"
            assert second.memory.text == "first write"
            assert other.created, "an idempotency key in another parent is another memory"
            assert other.memory.parent == PARENT_B
            if self._declares("list"):
                page = await self._answer(
                    adapter.list(ListRequest(parent=PARENT_A)), ListResult, "list()"
                )
                assert len(page.memories) == 1, "a repeated key created a duplicate"

    async def test_get_many_answers_each_request_from_its_parent(self, tmp_path: Path) -> None:
        """`get_many` gives one result per request, in order, each from the parent it names."""
        self._needs("get")
        async with self._opened(tmp_path) as adapter:
            await self._seed(
                adapter,
                tmp_path,
                PARENT_A,
                [SeedMemory("m-1", "alpha one"), SeedMemory("m-2", "alpha two")],
            )
            await self._seed(adapter, tmp_path, PARENT_B, [SeedMemory("m-1", "bravo one")])
            asked = [
                (PARENT_B, "m-1"),
                (PARENT_A, "m-2"),
                (PARENT_A, "m-404"),
                (PARENT_B, "m-2"),
                (PARENT_A, "m-1"),
                (PARENT_A, "m-2"),
            ]
            results = await self._guard(
                get_many(adapter, [GetRequest(parent=p, id=i) for p, i in asked])
            )
            assert len(results) == len(asked), "get_many() must answer every request"
            found = []
            for result in results:
                assert isinstance(result, GetResult), "get_many() must return GetResults"
                memory = GetResult.model_validate(result.model_dump()).memory
                found.append(None if memory is None else (memory.parent, memory.id, memory.text))
            assert found == [
                (PARENT_B, "m-1", "bravo one"),
                (PARENT_A, "m-2", "alpha two"),
                None,
                None,
                (PARENT_A, "m-1", "alpha one"),
                (PARENT_A, "m-2", "alpha two"),
            ], "get_many() must answer each id from its own parent, in the order asked"

    async def test_links_are_never_fabricated(self, tmp_path: Path) -> None:
        """`related` returns only links someone made, in both directions, and drops forgotten."""
        self._needs("related")
        seeded = [SeedMemory(f"m-{index}", f"memory number {index}") for index in range(1, 4)]
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, seeded)
            for memory in seeded:
                found = await self._answer(
                    adapter.related(RelatedRequest(parent=PARENT_A, id=memory.id)),  # type: ignore[attr-defined]
                    RelatedResult,
                    "related()",
                )
                assert not found.related, f"related() made up links for unlinked {memory.id}"
            missing = await self._refusal(
                adapter.related(RelatedRequest(parent=PARENT_A, id="missing"))  # type: ignore[attr-defined]
            )
            assert missing is not None, "related() of a missing memory must raise not_found"
            assert missing.code == "not_found", f"related() of a missing id: {missing.code!r}"
            if not self._declares("link"):
                return
            made = await self._answer(
                adapter.link(  # type: ignore[attr-defined]
                    LinkRequest(parent=PARENT_A, source_id="m-1", target_id="m-2", relation="cites")
                ),
                LinkResult,
                "link()",
            )
            assert made.created
            outgoing = await self._answer(
                adapter.related(RelatedRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                RelatedResult,
                "related()",
            )
            incoming = await self._answer(
                adapter.related(RelatedRequest(parent=PARENT_A, id="m-2")),  # type: ignore[attr-defined]
                RelatedResult,
                "related()",
            )
            unlinked = await self._answer(
                adapter.related(RelatedRequest(parent=PARENT_A, id="m-3")),  # type: ignore[attr-defined]
                RelatedResult,
                "related()",
            )
            assert [(r.memory.id, r.relation, r.direction) for r in outgoing.related] == [
                ("m-2", "cites", "outgoing")
            ]
            assert [(r.memory.id, r.direction) for r in incoming.related] == [("m-1", "incoming")]
            assert not unlinked.related, "related() made up a link for m-3"
            for bad in (("m-1", "missing"), ("m-1", "m-1")):
                refusal = await self._refusal(
                    adapter.link(  # type: ignore[attr-defined]
                        LinkRequest(parent=PARENT_A, source_id=bad[0], target_id=bad[1])
                    )
                )
                assert refusal is not None, f"link{bad} must be refused"
                assert refusal.code in ("not_found", "invalid_payload"), refusal.code
            if self._declares("forget"):
                await self._guard(adapter.forget(ForgetRequest(parent=PARENT_A, id="m-2")))  # type: ignore[attr-defined]
                after = await self._answer(
                    adapter.related(RelatedRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                    RelatedResult,
                    "related()",
                )
                assert not after.related, "a forgotten memory is still linked"

    async def test_parents_with_the_same_child_ids_are_isolated(self, tmp_path: Path) -> None:
        """Two parents holding the same memory ids never see or change each other's data."""
        ours = [
            SeedMemory("m-1", "alpha apple orchard", entities=("Alice",)),
            SeedMemory("m-2", "alpha second note"),
        ]
        theirs = [
            SeedMemory("m-1", "bravo banana plantation", entities=("Bob",)),
            SeedMemory("m-2", "bravo second note"),
        ]
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, ours)
            await self._seed(adapter, tmp_path, PARENT_B, theirs)
            if self._declares("search"):
                leaked = await self._answer(
                    adapter.search(SearchRequest(parents=(PARENT_A,), query="bravo banana")),
                    SearchResult,
                    "search()",
                )
                assert not leaked.hits, "search() in parent A found parent B's memories"
            if self._declares("get"):
                got = await self._answer(
                    adapter.get(GetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                    GetResult,
                    "get()",
                )
                assert got.memory is not None, "get() in parent A lost its m-1"
                assert got.memory.text == "alpha apple orchard", (
                    "get() in parent A returned another parent's m-1"
                )
            if self._declares("list"):
                page = await self._answer(
                    adapter.list(ListRequest(parent=PARENT_A)), ListResult, "list()"
                )
                assert sorted(memory.text for memory in page.memories) == sorted(
                    memory.text for memory in ours
                ), "list() in parent A shows parent B's memories"
            if self._declares("entity_index"):
                index = await self._answer(
                    adapter.entity_index(EntityIndexRequest(parent=PARENT_A)),  # type: ignore[attr-defined]
                    EntityIndexResult,
                    "entity_index()",
                )
                assert [entity.name for entity in index.entities] == ["Alice"]
            if self._declares("link") and self._declares("related"):
                await self._guard(
                    adapter.link(  # type: ignore[attr-defined]
                        LinkRequest(parent=PARENT_A, source_id="m-1", target_id="m-2")
                    )
                )
                other = await self._answer(
                    adapter.related(RelatedRequest(parent=PARENT_B, id="m-1")),  # type: ignore[attr-defined]
                    RelatedResult,
                    "related()",
                )
                assert not other.related, "a link made in parent A shows in parent B"
            if self._declares("forget"):
                gone = await self._answer(
                    adapter.forget(ForgetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                    ForgetResult,
                    "forget()",
                )
                assert gone.forgotten
                if self._declares("search"):
                    kept = await self._answer(
                        adapter.search(SearchRequest(parents=(PARENT_B,), query="banana")),
                        SearchResult,
                        "search()",
                    )
                    assert [hit.memory.id for hit in kept.hits] == ["m-1"], (
                        "forgetting m-1 in parent A removed parent B's m-1"
                    )
                if self._declares("get"):
                    kept_b = await self._answer(
                        adapter.get(GetRequest(parent=PARENT_B, id="m-1")),  # type: ignore[attr-defined]
                        GetResult,
                        "get()",
                    )
                    assert kept_b.memory is not None, "forget in parent A deleted parent B's m-1"

    async def test_malformed_upstream_data_is_never_returned(self, tmp_path: Path) -> None:
        """Malformed rows upstream are skipped or refused with a ProviderError, never passed on."""
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "apple good row")])
            if not self.corrupt(tmp_path, self._config(tmp_path), PARENT_A):
                _skip("corrupt() does not damage the upstream: define it to run this check")
            reads: list[tuple[str, Callable[[], Awaitable[Any]], type[BaseModel]]] = []
            if self._declares("search"):
                reads.append(
                    (
                        "search",
                        lambda: adapter.search(SearchRequest(parents=(PARENT_A,), query="apple")),
                        SearchResult,
                    )
                )
            if self._declares("list"):
                reads.append(
                    ("list", lambda: adapter.list(ListRequest(parent=PARENT_A)), ListResult)
                )
            if self._declares("entity_index"):
                reads.append(
                    (
                        "entity_index",
                        lambda: adapter.entity_index(EntityIndexRequest(parent=PARENT_A)),  # type: ignore[attr-defined]
                        EntityIndexResult,
                    )
                )
            if self._declares("related"):
                reads.append(
                    (
                        "related",
                        lambda: adapter.related(RelatedRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                        RelatedResult,
                    )
                )
            for name, call, model in reads:
                try:
                    await self._answer(call(), model, f"{name}() over malformed data")
                except ProviderError:
                    continue
                except AssertionError:
                    raise
                except Exception as exc:
                    raise AssertionError(
                        f"{name}() over malformed upstream data raised {type(exc).__name__}; "
                        "it must skip the bad data or raise ProviderError"
                    ) from exc
            if self._declares("search"):
                found = await self._answer(
                    adapter.search(SearchRequest(parents=(PARENT_A,), query="good")),
                    SearchResult,
                    "search()",
                )
                assert [hit.memory.id for hit in found.hits] == ["m-1"], (
                    "malformed upstream data hid the good memory"
                )

    async def test_a_stalled_upstream_times_out_and_writes_nothing(self, tmp_path: Path) -> None:
        """A write on a stalled upstream fails in time with a transient code, storing nothing."""
        self._needs("remember")
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "before the stall")])
            stalled = self.stall(tmp_path, self._config(tmp_path))
            if stalled is None:
                _skip("stall() gives no stalled upstream: define it to run this check")
            marker = f"stalled-{uuid.uuid4().hex[:12]}"
            with stalled:
                started = anyio.current_time()
                refusal: ProviderError | None = None
                try:
                    with anyio.fail_after(self.stall_timeout):
                        await adapter.remember(RememberRequest(parent=PARENT_A, text=marker))
                except TimeoutError:
                    raise AssertionError(
                        f"remember() on a stalled upstream did not fail within "
                        f"{self.stall_timeout:g} s"
                    ) from None
                except ProviderError as exc:
                    refusal = exc
                assert refusal is not None, "remember() succeeded while the upstream was stalled"
                assert refusal.code in TRANSIENT, (
                    f"a stalled write must fail with a transient code, not {refusal.code!r}"
                )
                assert refusal.retryable, "a stalled write's error must be retryable"
                assert anyio.current_time() - started < self.stall_timeout
            if self._declares("search"):
                found = await self._answer(
                    adapter.search(SearchRequest(parents=(PARENT_A,), query=marker)),
                    SearchResult,
                    "search()",
                )
                assert not found.hits, "the write that timed out was stored anyway"
            after = await self._answer(
                adapter.remember(RememberRequest(parent=PARENT_A, text="after the stall")),
                RememberResult,
                "remember()",
            )
            assert after.created, "the Provider did not recover after the stall"

    async def test_credentials_never_appear(self, tmp_path: Path) -> None:
        """Secrets stay out of reprs, results and errors, including refused configuration."""
        hidden = [*self.secrets.values(), *([self.token] if self.token else [])]
        if not hidden:
            return
        seen: list[str] = []
        init = self._init(tmp_path)
        seen += [repr(init), str(init)]
        async with self._opened(tmp_path) as adapter:
            seen += [repr(adapter), str(adapter)]
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "a plain memory")])
            calls: list[Callable[[], Awaitable[Any]]] = [
                lambda: adapter.status(StatusRequest(parents=(PARENT_A,), count=True)),
                lambda: adapter.search(SearchRequest(parents=(PARENT_A,), query="plain")),
                lambda: adapter.list(ListRequest(parent=PARENT_A)),
                lambda: adapter.list(ListRequest(parent=PARENT_A, cursor="not-a-cursor")),
            ]
            for name, request in (
                ("get", GetRequest(parent=PARENT_A, id="missing")),
                ("related", RelatedRequest(parent=PARENT_A, id="missing")),
                ("link", LinkRequest(parent=PARENT_A, source_id="m-1", target_id="missing")),
                ("forget", ForgetRequest(parent=PARENT_A, id="missing")),
                ("register_space", RegisterSpaceRequest(space=SPACE)),
                (
                    "store_vectors",
                    StoreVectorsRequest(
                        parent=PARENT_A, space=SPACE.key, memories=(_segments("m-1", (1.0, 0.0)),)
                    ),
                ),
                (
                    "vector_search",
                    VectorSearchRequest(
                        parents=(PARENT_A,), space="unknown.space@1", vector=(1.0,)
                    ),
                ),
                ("missing_vectors", MissingVectorsRequest(parent=PARENT_A, space=SPACE.key)),
            ):
                method = getattr(adapter, name, None)
                if method is not None:
                    calls.append(partial(method, request))
            for call in calls:
                try:
                    seen.append(repr(await self._guard(call())))
                except Exception as exc:
                    seen += [repr(exc), str(exc), repr(exc.args)]
        broken = {**self._config(tmp_path), "conformance-unknown-key": True}
        try:
            await self.provider.open(
                ProviderInit(
                    instance_key="source:conformance",
                    data_directory=str(tmp_path / "provider-data"),
                    configuration=broken,
                    token=self.token,
                )
            )
        except DefinitionError as exc:
            seen.append(str(exc))
        else:
            raise AssertionError("an unknown configuration key must be refused (DefinitionError)")
        everything = "\n".join(seen)
        for secret in hidden:
            assert secret not in everything, "a credential leaked into a repr, result or error"

    async def test_concurrent_writes_lose_nothing(self, tmp_path: Path) -> None:
        """Many writes at once: every one is stored, under its own id."""
        self._needs("remember")
        markers = [f"concurrent-{index}-{uuid.uuid4().hex[:8]}" for index in range(24)]
        markers = markers[: self.concurrent_writers]
        ids: dict[str, str] = {}
        async with self._opened(tmp_path) as adapter:

            async def write(marker: str) -> None:
                stored = await self._answer(
                    adapter.remember(RememberRequest(parent=PARENT_A, text=marker)),
                    RememberResult,
                    "remember()",
                )
                ids[marker] = stored.memory.id

            async with anyio.create_task_group() as group:
                for marker in markers:
                    group.start_soon(write, marker)
            assert len(set(ids.values())) == len(markers), "two writes got the same id"
            if self._declares("get"):
                for marker, memory_id in ids.items():
                    got = await self._answer(
                        adapter.get(GetRequest(parent=PARENT_A, id=memory_id)),  # type: ignore[attr-defined]
                        GetResult,
                        "get()",
                    )
                    assert got.memory is not None, "a write was lost"
                    assert got.memory.text == marker, "a write came back changed"
            if self._declares("search"):
                for marker in markers:
                    found = await self._answer(
                        adapter.search(SearchRequest(parents=(PARENT_A,), query=marker)),
                        SearchResult,
                        "search()",
                    )
                    assert any(hit.memory.text == marker for hit in found.hits), (
                        f"{marker} was written but search() cannot find it"
                    )

    async def test_data_survives_reopening(self, tmp_path: Path) -> None:
        """What was stored is there again after the adapter is disposed and made anew."""
        async with self._opened(tmp_path) as adapter:
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "durable quartz")])
        async with self._opened(tmp_path) as adapter:
            if self._declares("search"):
                found = await self._answer(
                    adapter.search(SearchRequest(parents=(PARENT_A,), query="quartz")),
                    SearchResult,
                    "search()",
                )
                assert [hit.memory.id for hit in found.hits] == ["m-1"], "data did not survive"
            if self._declares("list"):
                page = await self._answer(
                    adapter.list(ListRequest(parent=PARENT_A)), ListResult, "list()"
                )
                assert [memory.id for memory in page.memories] == ["m-1"]

    async def test_forget_removes_every_trace(self, tmp_path: Path) -> None:
        """A forgotten memory is gone from get, search, list and the entity index."""
        if not self._declares("forget"):
            return
        async with self._opened(tmp_path) as adapter:
            await self._seed(
                adapter,
                tmp_path,
                PARENT_A,
                [
                    SeedMemory("m-1", "ephemeral zircon", entities=("Zed",)),
                    SeedMemory("m-2", "lasting quartz"),
                ],
            )
            first = await self._answer(
                adapter.forget(ForgetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                ForgetResult,
                "forget()",
            )
            again = await self._answer(
                adapter.forget(ForgetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                ForgetResult,
                "forget()",
            )
            assert first.forgotten
            assert not again.forgotten
            if self._declares("get"):
                got = await self._answer(
                    adapter.get(GetRequest(parent=PARENT_A, id="m-1")),  # type: ignore[attr-defined]
                    GetResult,
                    "get()",
                )
                assert got.memory is None, "get() still returns a forgotten memory"
            if self._declares("search"):
                found = await self._answer(
                    adapter.search(SearchRequest(parents=(PARENT_A,), query="zircon")),
                    SearchResult,
                    "search()",
                )
                assert not found.hits, "search() still finds a forgotten memory"
            if self._declares("list"):
                page = await self._answer(
                    adapter.list(ListRequest(parent=PARENT_A)), ListResult, "list()"
                )
                assert [memory.id for memory in page.memories] == ["m-2"]
            if self._declares("entity_index"):
                index = await self._answer(
                    adapter.entity_index(EntityIndexRequest(parent=PARENT_A)),  # type: ignore[attr-defined]
                    EntityIndexResult,
                    "entity_index()",
                )
                assert not index.entities, "the entity index still counts a forgotten memory"

    async def test_entity_index_counts_mentions(self, tmp_path: Path) -> None:
        """Each entity is counted once per memory mentioning it, most mentioned first."""
        if not self._declares("entity_index"):
            return
        async with self._opened(tmp_path) as adapter:
            await self._seed(
                adapter,
                tmp_path,
                PARENT_A,
                [
                    SeedMemory("m-1", "one", entities=("Ada Lovelace", "Analytical Engine")),
                    SeedMemory("m-2", "two", entities=("Ada Lovelace",)),
                    SeedMemory("m-3", "three", entities=("Charles Babbage",)),
                ],
            )
            index = await self._answer(
                adapter.entity_index(EntityIndexRequest(parent=PARENT_A)),  # type: ignore[attr-defined]
                EntityIndexResult,
                "entity_index()",
            )
            counted = [(entity.name, entity.memories) for entity in index.entities]
            assert counted[0] == ("Ada Lovelace", 2), f"most mentioned first, got {counted}"
            assert sorted(counted[1:]) == [("Analytical Engine", 1), ("Charles Babbage", 1)]
            prefixed = await self._answer(
                adapter.entity_index(EntityIndexRequest(parent=PARENT_A, prefix="char")),  # type: ignore[attr-defined]
                EntityIndexResult,
                "entity_index(prefix)",
            )
            assert [entity.name for entity in prefixed.entities] == ["Charles Babbage"]

    # ------------------------------------------------------------------ vectors

    async def test_a_vector_space_is_registered_once_and_never_changes(
        self, tmp_path: Path
    ) -> None:
        """Registering a space again changes nothing; its identity never takes another model."""
        self._needs("vectors")
        async with self._opened(tmp_path) as adapter:
            assert (await self._register(adapter)).registered, (
                "register_space() of a new space must say registered=True"
            )
            assert not (await self._register(adapter)).registered, (
                "registering the same space again must change nothing (registered=False)"
            )
            for field, value in (("model", "another-model"), ("dimensions", 4), ("metric", "dot")):
                changed = SPACE.model_copy(update={field: value})
                await self._refused_as(
                    adapter.register_space(RegisterSpaceRequest(space=changed)),  # type: ignore[attr-defined]
                    "space_changed",
                    f"the identity {SPACE.key} registered again with another {field}",
                )
            bumped = SPACE.model_copy(update={"version": "2", "model": "another-model"})
            assert (await self._register(adapter, bumped)).registered, (
                "a new version of a space is a new space: it must register"
            )
            # the refused registrations changed nothing: the space keeps three dimensions
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "kept")])
            stored = await self._store_vectors(adapter, PARENT_A, _segments("m-1", (1.0, 0.0, 0.0)))
            assert stored == 1, "a refused registration must leave the space as it was"

    async def test_vector_search_ranks_memories_by_their_best_segment(self, tmp_path: Path) -> None:
        """Nearest first, each memory once, scored by its best segment as `(1 + cos) / 2`."""
        self._needs("vectors")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(
                adapter,
                tmp_path,
                PARENT_A,
                [SeedMemory(f"m-{name}", f"points {name}") for name in ("east", "north", "both")]
                + [SeedMemory("m-none", "has no vectors at all")],
            )
            east, north = (1.0, 0.0, 0.0), (0.0, 2.0, 0.0)
            both = ((0.0, 0.0, 1.0), (0.6, 0.8, 0.0), (-1.0, 0.0, 0.0))
            stored = await self._store_vectors(
                adapter,
                PARENT_A,
                _segments("m-east", east),
                _segments("m-north", north),
                _segments("m-both", *both),
            )
            assert stored == 3, f"store_vectors() of 3 memories must say stored=3, not {stored}"
            query = (1.0, 0.25, 0.0)
            hits = await self._nearest(adapter, query)
            self._scored(
                hits,
                [
                    ("m-east", _cosine_score(east, query)),
                    ("m-both", max(_cosine_score(v, query) for v in both)),
                    ("m-north", _cosine_score(north, query)),
                ],
                "cosine, best segment, memories without vectors not searched",
            )
            top = await self._nearest(adapter, (0.0, 0.0, 3.0), limit=1)
            self._scored(top, [("m-both", 1.0)], "the limit, and a segment found exactly")

    async def test_vector_scores_follow_the_space_metric(self, tmp_path: Path) -> None:
        """`dot` scores the logistic of the product, `l2` 1 / (1 + distance); both in [0, 1]."""
        self._needs("vectors")
        vectors = {
            "m-short": (1.0, 0.0, 0.0),
            "m-long": (2.5, 0.0, 0.0),
            "m-back": (-1.0, 0.0, 0.0),
        }
        query = (1.0, 0.0, 0.0)
        async with self._opened(tmp_path) as adapter:
            await self._seed(
                adapter, tmp_path, PARENT_A, [SeedMemory(m, f"vector {m}") for m in vectors]
            )
            for metric, score in (("dot", _dot_score), ("l2", _l2_score)):
                space = SPACE.model_copy(update={"id": f"conformance.{metric}", "metric": metric})
                await self._register(adapter, space)
                await self._store_vectors(
                    adapter,
                    PARENT_A,
                    *(_segments(m, v) for m, v in vectors.items()),
                    space=space.key,
                )
                expected = sorted(
                    ((m, score(v, query)) for m, v in vectors.items()), key=lambda e: -e[1]
                )
                hits = await self._nearest(adapter, query, space=space.key)
                self._scored(hits, expected, f"metric {metric}")

    async def test_a_parent_never_sees_another_parents_vectors(self, tmp_path: Path) -> None:
        """Vectors are searched and stored within the parents named, even under shared ids."""
        self._needs("vectors")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "alpha")])
            await self._seed(
                adapter,
                tmp_path,
                PARENT_B,
                [SeedMemory("m-1", "bravo"), SeedMemory("m-b", "bravo only")],
            )
            await self._store_vectors(adapter, PARENT_A, _segments("m-1", (1.0, 0.0, 0.0)))
            await self._store_vectors(adapter, PARENT_B, _segments("m-1", (0.0, 1.0, 0.0)))
            mine = await self._nearest(adapter, (0.0, 1.0, 0.0), PARENT_A)
            self._scored(mine, [("m-1", 0.5)], "parent A searched alone sees only its own m-1")
            both = await self._nearest(adapter, (0.0, 1.0, 0.0), PARENT_A, PARENT_B)
            assert [(p, m) for p, m, _ in both] == [(PARENT_B, "m-1"), (PARENT_A, "m-1")], (
                "a search of two parents must score each m-1 by its own parent's vectors"
            )
            stored = await self._store_vectors(adapter, PARENT_A, _segments("m-b", (1.0, 0.0, 0.0)))
            assert stored == 0, (
                "store_vectors() in parent A kept vectors for a memory only parent B holds"
            )
            theirs = await self._nearest(adapter, (1.0, 0.0, 0.0), PARENT_B)
            self._scored(theirs, [("m-1", 0.5)], "parent B gained vectors stored in parent A")

    async def test_forgetting_a_memory_forgets_its_vectors(self, tmp_path: Path) -> None:
        """A forgotten memory leaves the search; remembered again under its id, it has none."""
        self._needs("vectors")
        self._needs("forget")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(
                adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "kept"), SeedMemory("m-2", "gone")]
            )
            await self._store_vectors(
                adapter,
                PARENT_A,
                _segments("m-1", (1.0, 0.0, 0.0)),
                _segments("m-2", (0.0, 1.0, 0.0)),
            )
            await self._guard(adapter.forget(ForgetRequest(parent=PARENT_A, id="m-2")))  # type: ignore[attr-defined]
            hits = await self._nearest(adapter, (0.0, 1.0, 0.0))
            assert [m for _, m, _ in hits] == ["m-1"], "vector_search() still finds a forgotten m-2"
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-2", "new text")])
            missing, _ = await self._missing(adapter, PARENT_A)
            assert missing == ["m-2"], (
                "a memory remembered again under a forgotten id must start without vectors: "
                f"the forgotten memory's vectors were kept (missing_vectors() says {missing})"
            )
            hits = await self._nearest(adapter, (0.0, 1.0, 0.0))
            assert [m for _, m, _ in hits] == ["m-1"], (
                "the forgotten m-2's vectors were found again under its new memory"
            )

    async def test_missing_vectors_lists_the_oldest_first_with_a_true_count(
        self, tmp_path: Path
    ) -> None:
        """Memories without vectors in the space, oldest first; a stored one leaves the list."""
        self._needs("vectors")
        other = SPACE.model_copy(update={"id": "conformance.other"})
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._register(adapter, other)
            for number in range(1, 6):  # one at a time: each is older than the next
                await self._seed(
                    adapter, tmp_path, PARENT_A, [SeedMemory(f"m-{number}", f"memory {number}")]
                )
            await self._store_vectors(adapter, PARENT_A, _segments("m-2", (1.0, 0.0, 0.0)))
            # vectors of another space are not vectors of this one
            await self._store_vectors(
                adapter, PARENT_A, _segments("m-3", (1.0, 0.0, 0.0)), space=other.key
            )
            first, remaining = await self._missing(adapter, PARENT_A, limit=2)
            assert first == ["m-1", "m-3"], (
                "missing_vectors() must list the oldest memories without vectors first, "
                f"got {first}"
            )
            assert remaining in (None, 4), f"4 memories lack vectors, remaining says {remaining}"
            await self._store_vectors(adapter, PARENT_A, _segments("m-1", (0.0, 1.0, 0.0)))
            after, remaining = await self._missing(adapter, PARENT_A)
            assert after == ["m-3", "m-4", "m-5"], (
                f"a memory given vectors must leave missing_vectors(), got {after}"
            )
            assert remaining in (None, 3), f"3 memories lack vectors, remaining says {remaining}"
            nobody, remaining = await self._missing(adapter, PARENT_B)
            assert nobody == [], "missing_vectors() of an empty parent must be empty"
            assert remaining in (None, 0), "an empty parent has no memory waiting for vectors"
            hits = await self._nearest(adapter, (1.0, 0.0, 0.0), space=other.key)
            assert [m for _, m, _ in hits] == ["m-3"], (
                "a space's search must see only that space's vectors"
            )

    async def test_storing_vectors_again_replaces_them(self, tmp_path: Path) -> None:
        """A memory's vectors in a space are replaced whole, never added to."""
        self._needs("vectors")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "rewritten")])
            await self._store_vectors(
                adapter, PARENT_A, _segments("m-1", (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
            )
            await self._store_vectors(adapter, PARENT_A, _segments("m-1", (0.0, 0.0, 1.0)))
            old = await self._nearest(adapter, (1.0, 0.0, 0.0))
            self._scored(old, [("m-1", 0.5)], "store_vectors() must replace earlier segments")
            new = await self._nearest(adapter, (0.0, 0.0, 1.0))
            self._scored(new, [("m-1", 1.0)], "the replacing vector is searched")
            missing, _ = await self._missing(adapter, PARENT_A)
            assert missing == [], "a memory with replaced vectors still has vectors"

    async def test_vectors_of_a_memory_forgotten_meanwhile_are_skipped(
        self, tmp_path: Path
    ) -> None:
        """Vectors for a memory the parent no longer holds are skipped; the others are kept."""
        self._needs("vectors")
        self._needs("forget")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(
                adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "kept"), SeedMemory("m-2", "gone")]
            )
            await self._guard(adapter.forget(ForgetRequest(parent=PARENT_A, id="m-2")))  # type: ignore[attr-defined]
            stored = await self._store_vectors(
                adapter,
                PARENT_A,
                _segments("m-2", (0.0, 1.0, 0.0)),
                _segments("m-1", (1.0, 0.0, 0.0)),
                _segments("m-404", (0.0, 1.0, 0.0)),
            )
            assert stored == 1, (
                f"vectors of forgotten or unknown memories must be skipped (stored={stored})"
            )
            hits = await self._nearest(adapter, (0.0, 1.0, 0.0))
            assert [m for _, m, _ in hits] == ["m-1"], "vectors of a forgotten memory were kept"
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-2", "back again")])
            missing, _ = await self._missing(adapter, PARENT_A)
            assert missing == ["m-2"], "vectors of a forgotten memory were kept for its id"

    async def test_bad_vectors_are_refused_and_nothing_is_stored(self, tmp_path: Path) -> None:
        """Wrong sizes, non-finite numbers and unregistered spaces are `invalid_payload`.

        The request models already refuse non-finite numbers; the Provider must refuse them
        too, in a request built without validation (`model_construct`).
        """
        self._needs("vectors")
        good = _segments("m-1", (1.0, 0.0, 0.0))
        bad: list[tuple[str, str, MemoryVectors]] = [
            ("an unregistered space", "never.registered@1", _segments("m-2", (0.0, 1.0, 0.0))),
            ("too few dimensions", SPACE.key, _segments("m-2", (0.0, 1.0))),
            ("too many dimensions", SPACE.key, _segments("m-2", (0.0, 1.0, 0.0, 0.0))),
            ("a NaN", SPACE.key, _unchecked("m-2", (0.0, math.nan, 0.0))),
            ("an infinity", SPACE.key, _unchecked("m-2", (0.0, 0.0, -math.inf))),
            ("a bad second segment", SPACE.key, _segments("m-2", (0.0, 1.0, 0.0), (1.0, 0.0))),
        ]
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(
                adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "one"), SeedMemory("m-2", "two")]
            )
            for what, space, memory in bad:
                request = StoreVectorsRequest.model_construct(
                    parent=PARENT_A, space=space, memories=(good, memory)
                )
                await self._refused_as(
                    adapter.store_vectors(request),  # type: ignore[attr-defined]
                    "invalid_payload",
                    f"store_vectors() with {what}",
                )
                missing, _ = await self._missing(adapter, PARENT_A)
                assert missing == ["m-1", "m-2"], (
                    f"store_vectors() refused for {what} must store nothing of the request"
                )
            for what, vector, space in (
                ("a query of the wrong size", (1.0, 0.0), SPACE.key),
                ("a NaN query", (math.nan, 0.0, 0.0), SPACE.key),
                ("an unregistered space", (1.0, 0.0, 0.0), "never.registered@1"),
            ):
                search = VectorSearchRequest.model_construct(
                    parents=(PARENT_A,), space=space, vector=vector, limit=8
                )
                await self._refused_as(
                    adapter.vector_search(search),  # type: ignore[attr-defined]
                    "invalid_payload",
                    f"vector_search() with {what}",
                )
            missing_request = MissingVectorsRequest(parent=PARENT_A, space="never.registered@1")
            await self._refused_as(
                adapter.missing_vectors(missing_request),  # type: ignore[attr-defined]
                "invalid_payload",
                "missing_vectors() of an unregistered space",
            )

    async def test_vectors_survive_reopening(self, tmp_path: Path) -> None:
        """Registered spaces and stored vectors are there again after the adapter is made anew."""
        self._needs("vectors")
        async with self._opened(tmp_path) as adapter:
            await self._register(adapter)
            await self._seed(adapter, tmp_path, PARENT_A, [SeedMemory("m-1", "durable")])
            await self._store_vectors(adapter, PARENT_A, _segments("m-1", (0.0, 1.0, 0.0)))
        async with self._opened(tmp_path) as adapter:
            assert not (await self._register(adapter)).registered, (
                "a registered space did not survive reopening"
            )
            hits = await self._nearest(adapter, (0.0, 1.0, 0.0))
            self._scored(hits, [("m-1", 1.0)], "stored vectors must survive reopening")
