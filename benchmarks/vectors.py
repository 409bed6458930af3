"""Benchmark recall by meaning at scale on the SQLite Provider: latency, ingest, storage.

Run from the repository root::

    .venv/bin/python benchmarks/vectors.py            # full run: 10,000 and 100,000 memories
    .venv/bin/python benchmarks/vectors.py --quick    # a smoke run: 1,000 and 10,000
    .venv/bin/python benchmarks/vectors.py --check    # exit 1 when a target fails
    .venv/bin/python benchmarks/vectors.py --runs 3   # judged by the medians of 3 full runs

It needs `mnemon_embedder_minilm` (and numpy): queries and ingested memories are encoded by
the real model. What is measured, on the asyncio backend, in one partition (one user's
space) that grows from the small size to the large one:

- **recall latency**: the `recall` route (limit 10) through a real `MemoryHost` turn, once
  with recall by meaning switched off (`vectors = "off"`: keywords only, the baseline) and
  once with MiniLM installed beside the Source (keywords and meaning fused), p50 and p95
  over seeded queries. Beside them, the parts: one query encoding (`embed_query`), the
  Provider's keyword `search()` and its `vector_search()`, also each right after a new memory
  and its vectors were written (the search then reads what changed, not the partition).
  The target: hybrid p95 at most the keyword-only p95, plus one query encoding's p95, plus
  2 ms.
- **ingest with embeddings**, into a fresh store: the Source's management `import` in
  batches of 1,000 with MiniLM installed, then its `reindex` until nothing waits (what
  `mnemon import` runs), in memories/s, beside the embedder's own rate: the same texts
  encoded with `segment_and_embed` in batches of its `max_batch`, with nothing stored, each
  batch just before it is imported (so a change of load falls on both alike).
- **storage**: the bytes the vectors add per memory (the store's size after a checkpoint,
  with and without them) beside the vector's own size (384 float16 values, 768 bytes).

Texts and queries are the synthetic corpus of `spaces.py` (made-up words, Zipf-distributed).
The stored vectors of the large partition are synthetic too (encoding 100,000 texts with the
model would take minutes and measure nothing more): unit vectors drawn around 2,000 centres
in a 48-dimensional subspace, with noise, the way sentence embeddings crowd a few directions.
A query's vector is the model's encoding of its text, so the search does the real work.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_spaces as spaces
from mnemon_source_spaces import (
    SQLITE_PROVIDER,
    MemoryVectors,
    ProviderInit,
    RegisterSpaceRequest,
    RememberRequest,
    SearchRequest,
    SegmentVector,
    StoreVectorsRequest,
    VectorSearchRequest,
)
from spaces import KEY, SCOPE, SPACE, AllRoutes, Corpus, Latency, _parent, load, timed
from targets import Check, add_options, repeat, report

import mnemon.sdk

BACKEND = "asyncio"
SEED = 20_261_202
ROUTE = f"{KEY}/recall"
LIMIT = 10
#: what recall by meaning may add to keyword recall beyond one query encoding
MAX_ADDED_MS = 2.0
#: ingest with embeddings against the embedder's own batch rate
MIN_INGEST_SHARE = 0.8
INGEST_BATCH = 1_000
VECTOR_BATCH = 1_000
CENTRES = 2_000
SUBSPACE = 48


@dataclass(frozen=True)
class Plan:
    """Sizes, queries and ingest of one run."""

    sizes: tuple[int, ...]
    queries: int
    warmup: int
    ingest: int


FULL = Plan(sizes=(10_000, 100_000), queries=300, warmup=30, ingest=3_000)
QUICK = Plan(sizes=(1_000, 10_000), queries=60, warmup=10, ingest=300)


@dataclass(frozen=True)
class Row:
    """The latency figures at one size."""

    size: int
    kind: str  # how the partition's vectors are searched: exact or approximate
    lexical: Latency  # the recall route, keywords only
    hybrid: Latency  # the recall route, keywords and meaning
    encoding: Latency  # one embed_query
    search: Latency  # the Provider's keyword search
    vector: Latency  # the Provider's vector search
    after_write: Latency  # the same, each right after a memory and its vectors were written


def unavailable() -> str | None:
    """Why this benchmark cannot run here, or None."""
    for module in ("numpy", "mnemon_embedder_minilm"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'mnemon-runtime[standard]')"
    return None


def minilm() -> tuple[Any, mnemon.sdk.Embedding, mnemon.sdk.VectorSpace]:
    """The MiniLM runtime, an `Embedding` over it, and its space."""
    from mnemon_embedder_minilm import MINILM, SPACE_ID

    runtime = MINILM.create({})
    embedding = mnemon.sdk.Embedding([(MINILM.manifest, runtime)])
    return runtime, embedding, embedding.space(SPACE_ID)


def synthetic_vectors(count: int, dimensions: int, seed: int) -> Any:
    """`count` unit vectors crowded around a few directions, as sentence embeddings are."""
    import numpy as np

    generator = np.random.default_rng(seed)
    basis = np.linalg.qr(generator.standard_normal((dimensions, SUBSPACE)))[0].T
    centres = generator.standard_normal((CENTRES, SUBSPACE)).astype(np.float32)
    latent = centres[generator.integers(0, CENTRES, count)]
    latent += 0.35 * generator.standard_normal((count, SUBSPACE)).astype(np.float32)
    vectors = latent @ basis.astype(np.float32)
    vectors += 0.02 * generator.standard_normal((count, dimensions)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


async def store_vectors(
    adapter: Any, parent: str, space: mnemon.sdk.VectorSpace, first: int, count: int
) -> None:
    """Give memories `bench-{first}`.. their synthetic vectors, through the Provider."""
    vectors = synthetic_vectors(count, space.dimensions, SEED + first)
    for start in range(0, count, VECTOR_BATCH):
        memories = tuple(
            MemoryVectors(
                id=f"bench-{first + index}",
                segments=(SegmentVector(start=0, end=1, vector=tuple(vectors[index].tolist())),),
            )
            for index in range(start, min(start + VECTOR_BATCH, count))
        )
        await adapter.store_vectors(
            StoreVectorsRequest(parent=parent, space=space.key, memories=memories)
        )


def store_config(directory: Path, store: Path, **extra: Any) -> dict[str, Any]:
    return {
        "data_dir": str(directory),
        "provider": {"type": "sqlite", "path": str(store)},
        **extra,
    }


async def indexed(adapter: Any, parent: str, space: mnemon.sdk.VectorSpace, vector: Any) -> str:
    """How the partition is searched, once any index it gets is built (off the request path)."""
    request = VectorSearchRequest(parents=(parent,), space=space.key, vector=vector, limit=10)
    started = time.perf_counter()
    await adapter.vector_search(request)
    while (kind := str(await adapter.vector_search_kind(parent, space.key))) == "indexing":
        await anyio.sleep(0.5)
        await adapter.vector_search(request)
    if kind == "approximate":
        print(f"  the HNSW index was built in {time.perf_counter() - started:.1f} s")
    return kind


async def searches_after_writes(
    adapter: Any, parent: str, space: mnemon.sdk.VectorSpace, vectors: Sequence[Any]
) -> Latency:
    """Vector searches, each right after one new memory and its vectors were written."""
    samples = []
    for number, vector in enumerate(vectors):
        stored = await adapter.remember(
            RememberRequest(parent=parent, text=f"written between searches {number}")
        )
        memory = MemoryVectors(
            id=stored.memory.id, segments=(SegmentVector(start=0, end=1, vector=vector),)
        )
        await adapter.store_vectors(
            StoreVectorsRequest(parent=parent, space=space.key, memories=(memory,))
        )
        request = VectorSearchRequest(parents=(parent,), space=space.key, vector=vector, limit=40)
        started = time.perf_counter()
        await adapter.vector_search(request)
        samples.append(time.perf_counter() - started)
    return Latency(tuple(samples))


async def route_latency(host: mnemon.MemoryHost, queries: Sequence[str], warmup: int) -> Latency:
    async def read(query: str) -> None:
        async with host.turn(scope=SCOPE) as turn:
            await turn.execute_route(ROUTE, {"query": query, "limit": LIMIT})

    for query in queries[:warmup]:
        await read(query)
    return await timed([lambda query=query: read(query) for query in queries[warmup:]])


async def measure(
    directory: Path,
    store: Path,
    size: int,
    queries: Sequence[str],
    plan: Plan,
    embedding: mnemon.sdk.Embedding,
    space: mnemon.sdk.VectorSpace,
) -> Row:
    """Every latency figure at the store's current size."""
    import mnemon_embedder_minilm

    measured = queries[plan.warmup :]
    # kept open to the end: the Sources below share its cache of the file, index included
    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            data_directory=str(directory), configuration={"path": str(store)}, instance_key=KEY
        )
    )
    try:
        parent = _parent()
        vectors = [await embedding.embed_query(space.id, query) for query in measured]
        kind = await indexed(adapter, parent, space, vectors[0])
        search = await timed(
            [
                lambda query=query: adapter.search(
                    SearchRequest(parents=(parent,), query=query, limit=LIMIT)
                )
                for query in measured
            ]
        )
        vector = await timed(
            [
                lambda v=v: adapter.vector_search(
                    VectorSearchRequest(parents=(parent,), space=space.key, vector=v, limit=40)
                )
                for v in vectors
            ]
        )
        after_write = await searches_after_writes(adapter, parent, space, vectors[::4])
        encoding = await timed(
            [lambda query=query: embedding.embed_query(space.id, query) for query in measured]
        )
        async with mnemon.MemoryHost() as host:
            config = store_config(directory, store, vectors="off")
            await host.mount(spaces, instance_id="spaces", config=config)
            await host.mount(AllRoutes(), instance_id="strategy")
            lexical = await route_latency(host, queries, plan.warmup)
        async with mnemon.MemoryHost() as host:
            await host.mount(mnemon_embedder_minilm, instance_id="minilm")
            config = store_config(directory, store)
            await host.mount(spaces, instance_id="spaces", config=config)
            await host.mount(AllRoutes(), instance_id="strategy")
            hybrid = await route_latency(host, queries, plan.warmup)
    finally:
        await adapter.dispose()
    return Row(size, kind, lexical, hybrid, encoding, search, vector, after_write)


@dataclass(frozen=True)
class Ingest:
    """Ingest with embeddings against the embedder's own rate, in memories per second."""

    count: int
    encoder: float
    product: float


async def ingest(
    folder: Path, corpus: Corpus, count: int, embedding: mnemon.sdk.Embedding
) -> Ingest:
    """The embedder's own batch rate beside management import + reindex, batch by batch.

    Each batch of `INGEST_BATCH` texts is first encoded alone, then imported with its
    vectors into a fresh store (the import embeds after its write; `reindex` gives what is
    left), so a change of the machine's load falls on both figures alike.
    """
    import mnemon_embedder_minilm
    from mnemon_embedder_minilm import SPACE_ID

    texts = [corpus.memory()[0] for _ in range(count)]
    size = embedding.max_batch(SPACE_ID)
    encoding = importing = 0.0
    store = folder / "ingest.sqlite3"
    async with mnemon.MemoryHost() as host:
        await host.mount(mnemon_embedder_minilm, instance_id="minilm")
        await host.mount(spaces, instance_id="spaces", config=store_config(folder, store))
        await host.mount(AllRoutes(), instance_id="strategy")
        client = host.management_client(KEY, SCOPE)

        async def mutate(operation: str, payload: dict[str, Any]) -> Any:
            revision = await client.revision()
            result = await client.mutate(
                operation, payload, confirmed=True, expected_revision=revision
            )
            return result.output

        await mutate("reindex", {})  # loads the model, untimed
        for first in range(0, count, INGEST_BATCH):
            batch = texts[first : first + INGEST_BATCH]
            started = time.perf_counter()
            for start in range(0, len(batch), size):
                parts = [
                    {"key": str(start + offset), "text": text}
                    for offset, text in enumerate(batch[start : start + size])
                ]
                await embedding.segment_and_embed(
                    {
                        "idempotency_key": f"rate-{first}-{start}",
                        "parts": parts,
                        "spaces": [SPACE_ID],
                    }
                )
            encoding += time.perf_counter() - started
            started = time.perf_counter()
            memories = [
                {"text": text, "idempotency_key": f"ingest-{first + offset}"}
                for offset, text in enumerate(batch)
            ]
            await mutate("import", {"space": SPACE, "memories": memories})
            while (left := await mutate("reindex", {}))["remaining"] and left["done"]:
                pass
            importing += time.perf_counter() - started
            if left["remaining"]:
                raise RuntimeError("the import left memories without vectors")
    return Ingest(count, count / encoding, count / importing)


def checkpointed_size(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
    finally:
        connection.close()
    return path.stat().st_size


def print_rows(rows: Sequence[Row]) -> None:
    print()
    print(f"Recall latency (limit {LIMIT}; ms)      p50      p95")
    for row in rows:
        for name, latency in (
            ("recall, keywords only (baseline)", row.lexical),
            ("recall, keywords and meaning", row.hybrid),
            ("  query encoding (MiniLM)", row.encoding),
            ("  Provider keyword search", row.search),
            (f"  Provider vector search (40, {row.kind})", row.vector),
            ("  the same, right after a write", row.after_write),
        ):
            print(f"  {row.size:>9,}  {name:<40} {latency.p50:7.2f}  {latency.p95:7.2f}")
        bound = row.lexical.p95 + row.encoding.p95 + MAX_ADDED_MS
        print(f"  {row.size:>9,}  {'bound for hybrid p95':<40} {'':7}  {bound:7.2f}")


async def run(plan: Plan) -> list[Check]:
    """Run every measurement, print its figures, and return the targets' checks."""
    print(
        f"mnemon vectors benchmark: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}), SQLite {sqlite3.sqlite_version}; {plan.queries} queries per "
        f"size; load average {os.getloadavg()[0]:.1f}"
    )
    runtime, embedding, space = minilm()
    corpus = Corpus(SEED)
    rows = []
    try:
        await embedding.embed_query(space.id, "warm up")  # loads the model, untimed
        with tempfile.TemporaryDirectory(prefix="mnemon-bench-vectors-") as folder:
            directory = Path(folder)
            store = directory / "spaces.sqlite3"
            parent = _parent()
            loaded = 0
            words_only = 0
            for size in plan.sizes:
                load(store, parent, corpus, size - loaded)
                words_only = checkpointed_size(store)
                adapter: Any = await SQLITE_PROVIDER.open(
                    ProviderInit(
                        data_directory=folder, configuration={"path": str(store)}, instance_key=KEY
                    )
                )
                try:
                    await adapter.register_space(RegisterSpaceRequest(space=space))
                    started = time.perf_counter()
                    await store_vectors(adapter, parent, space, loaded, size - loaded)
                    seconds = time.perf_counter() - started
                finally:
                    await adapter.dispose()
                print(
                    f"loaded {size - loaded:,} memories and their vectors "
                    f"({seconds:.1f} s for the vectors); store now {size:,}"
                )
                loaded = size
                queries = [query for query, _ in corpus.queries(plan.queries + plan.warmup, SEED)]
                rows.append(await measure(directory, store, size, queries, plan, embedding, space))
            with_vectors = checkpointed_size(store)
            ingest_folder = directory / "ingest"
            ingest_folder.mkdir()
            bulk = await ingest(ingest_folder, corpus, plan.ingest, embedding)
    finally:
        dispose = getattr(runtime, "dispose", None)
        if dispose is not None:
            dispose()
    print_rows(rows)
    print()
    print(f"Ingest of {bulk.count:,} memories with their vectors (MiniLM on this machine)")
    print(f"  baseline: MiniLM segment_and_embed alone       {bulk.encoder:8,.0f} memories/s")
    print(
        f"  management import + reindex (mnemon import)    {bulk.product:8,.0f} memories/s  "
        f"({bulk.product / bulk.encoder:.2f}x the embedder's own rate)"
    )
    large = plan.sizes[-1]
    per_memory = (with_vectors - words_only) / large
    own = space.dimensions * 2
    print()
    print(
        f"Storage at {large:,} memories: vectors add {per_memory:,.0f} bytes per memory; "
        f"the vector itself is {own:,} bytes ({space.dimensions} float16 values): "
        f"{per_memory / own:.2f}x"
    )
    last = rows[-1]
    bound = last.lexical.p95 + last.encoding.p95 + MAX_ADDED_MS
    return [
        Check(
            f"hybrid recall p95 at {large:,} <= keyword p95 + encoding p95 + {MAX_ADDED_MS:g} ms",
            last.hybrid.p95 - bound,
            0.0,
            shown="{:+.2f} ms",
        ),
        Check(
            f"ingest with embeddings >= {MIN_INGEST_SHARE:g}x the embedder's own rate",
            bulk.product / bulk.encoder,
            MIN_INGEST_SHARE,
            at_least=True,
            shown="{:.2f}x",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_options(parser)
    options = parser.parse_args(argv)
    missing = unavailable()
    if missing is not None:
        print(f"vectors benchmark skipped: {missing}")
        return 0
    plan = QUICK if options.quick else FULL
    quick = " (quick run: smaller sizes stand in for 10,000 and 100,000)"
    title = "Targets" + (quick if options.quick else "")
    passed = report(repeat(options.runs, lambda: anyio.run(run, plan, backend=BACKEND)), title)
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
