"""Measure vector search on PostgreSQL: exact per-partition search, the fallback, and HNSW.

Run from the repository root (it starts its own private servers from the machine's
PostgreSQL and from the pgserver wheel's, which has pgvector)::

    .venv/bin/python sources/spaces-postgres/benchmarks/vectors.py             # 1k, 10k, 50k
    .venv/bin/python sources/spaces-postgres/benchmarks/vectors.py --sizes 1000,10000

What is measured, for one partition holding N memories of one 384-dimension cosine space
(one segment each: clustered synthetic vectors, 100 centres plus noise, made by the server
and seeded): the latency of `vector_search` through the Provider (limit 8), p50 and p95 over
`--queries` queries, in both ways of keeping vectors:

- pgvector: the Provider's exact search, one SQL statement scoring every vector of the
  partition with `<=>`; beside it the same top 8 from an HNSW index (pgvector's defaults,
  m = 16, ef_construction = 64, ef_search = 40) on the space, with its build time and its
  recall of the exact top 8. The index has no partition in it: a search of one partition
  among ten of the same size is also measured, as HNSW must run it (the index's nearest
  rows, then the partition's filter).
- fallback (no pgvector): float16 rows searched in this process with numpy, the matrix
  cached per partition; the first search (loading the matrix) is shown apart.

Every line quotes the machine's 1-minute load average, since other work on a shared machine
moves the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import psycopg
from mnemon_source_spaces import (
    ProviderInit,
    RegisterSpaceRequest,
    VectorSearchRequest,
)
from mnemon_spaces_postgres import POSTGRES_PROVIDER, PostgresProvider

from mnemon.sdk import VectorSpace
from mnemon_testing.postgres import PostgresServer, find_bindir, pgvector_bindir

DIMENSIONS = 384
SPACE = VectorSpace(
    id="bench.space", version="1", model="synthetic", dimensions=DIMENSIONS, metric="cosine"
)
SETTINGS = {"shared_buffers": "512MB", "maintenance_work_mem": "512MB", "work_mem": "64MB"}
PARENT = "bench-user"


def load() -> str:
    """The 1-minute load average, bracketed."""
    return f"[load {os.getloadavg()[0]:.1f}]"


def percentiles(samples: list[float]) -> str:
    """p50 and p95 of `samples` (seconds) in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1e3:7.2f} ms  p95 {p95 * 1e3:7.2f} ms"


async def timed(call: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    """Seconds each of `rounds` calls took."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def open_provider(dsn: str, schema: str) -> PostgresProvider:
    """The Provider on `schema`, the benchmark space registered."""
    adapter = await POSTGRES_PROVIDER.open(
        ProviderInit(
            instance_key="bench",
            data_directory="/nonexistent",
            configuration={"dsn": dsn, "schema": schema, "statement_timeout": 120},
        )
    )
    assert isinstance(adapter, PostgresProvider)
    await adapter.register_space(RegisterSpaceRequest(space=SPACE))
    return adapter


def fill_pgvector(dsn: str, schema: str, parents: dict[str, int]) -> None:
    """Memories and clustered vectors made by the server (one segment each)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT setseed(0.28)")
        connection.execute(
            "CREATE TEMP TABLE centres AS SELECT c, (SELECT array_agg(random()::real - 0.5) "
            f"FROM generate_series(1, {DIMENSIONS}) WHERE c >= 0) AS v "
            "FROM generate_series(0, 99) c"
        )
        for parent, count in parents.items():
            connection.execute(
                f"INSERT INTO {schema}.memories (parent, id, text, created_at, search) "
                "SELECT %s, 'm' || g, 'memory ' || g, now(), to_tsvector('simple', 'memory') "
                "FROM generate_series(1, %s) g",
                (parent, count),
            )
            connection.execute(
                f'INSERT INTO {schema}.vectors (parent, memory, space, segment, start, "end", '
                "embedding) SELECT %s, 'm' || g, 1, 0, 0, 1, (SELECT array_agg(x + "
                "0.35 * (random()::real - 0.5)) FROM unnest(c.v) x)::vector "
                "FROM generate_series(1, %s) g JOIN centres c ON c.c = g %% 100",
                (parent, count),
            )
        connection.execute(f"ANALYZE {schema}.vectors")


def fill_fallback(dsn: str, schema: str, count: int) -> None:
    """The same shape of data as float16 rows (made here with numpy, seeded)."""
    generator = np.random.default_rng(28)
    centres = generator.random((100, DIMENSIONS), dtype=np.float32) - 0.5
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(
            f"INSERT INTO {schema}.memories (parent, id, text, created_at, search) "
            "SELECT %s, 'm' || g, 'memory ' || g, now(), to_tsvector('simple', 'memory') "
            "FROM generate_series(1, %s) g",
            (PARENT, count),
        )
        with connection.cursor().copy(
            f'COPY {schema}.vectors (parent, memory, space, segment, start, "end", embedding) '
            "FROM STDIN"
        ) as copy:
            for g in range(1, count + 1):
                vector = centres[g % 100] + 0.35 * (generator.random(DIMENSIONS) - 0.5)
                vector /= np.linalg.norm(vector)
                copy.write_row((PARENT, f"m{g}", 1, 0, 0, 1, vector.astype("<f2").tobytes()))
        connection.execute(f"ANALYZE {schema}.vectors")


def query_vectors(dsn: str, schema: str, queries: int) -> list[tuple[float, ...]]:
    """Queries like the data: stored vectors picked at random (seeded), moved a little."""
    generator = np.random.default_rng(7)
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT setseed(0.7)")
        rows = connection.execute(
            f"SELECT embedding::text FROM {schema}.vectors ORDER BY random() LIMIT %s",
            (queries,),
        ).fetchall()
    picked = []
    for (text,) in rows:
        vector = np.asarray(
            [float(x) for x in text.strip("[]").split(",")] if text.startswith("[") else []
        )
        if not len(vector):  # float16 bytes, as the fallback keeps them
            vector = np.frombuffer(bytes.fromhex(text[2:]), dtype="<f2").astype(np.float64)
        vector = vector + 0.05 * (generator.random(DIMENSIONS) - 0.5)
        picked.append(tuple(float(x) for x in vector))
    while len(picked) < queries:
        picked.append(picked[len(picked) % len(rows)])
    return picked


def exact_top(
    connection: psycopg.Connection[Any], schema: str, parent: str, query: tuple[float, ...]
) -> list[str]:
    """The top 8 of one partition by the Provider's exact statement, alone (no memory rows)."""
    text = "[" + ",".join(repr(x) for x in query) + "]"
    rows = connection.execute(
        "SELECT v.memory, max(1.0 - (v.embedding <=> %s::vector) / 2.0) AS score "
        f"FROM {schema}.vectors v WHERE v.parent = %s AND v.space = 1 "
        "GROUP BY v.parent, v.memory ORDER BY score DESC LIMIT 8",
        (text, parent),
    ).fetchall()
    return [row[0] for row in rows]


def hnsw_top(
    connection: psycopg.Connection[Any], schema: str, parent: str, query: tuple[float, ...]
) -> list[str]:
    """The top 8 of one partition through the HNSW index (its nearest rows, then the filter)."""
    text = "[" + ",".join(repr(x) for x in query) + "]"
    rows = connection.execute(
        f"SELECT memory FROM {schema}.vectors WHERE space = 1 AND parent = %s "
        f"ORDER BY embedding::vector({DIMENSIONS}) <=> %s::vector LIMIT 8",
        (parent, text),
    ).fetchall()
    return [row[0] for row in rows]


async def measure_pgvector(server: PostgresServer, size: int, queries: int) -> None:
    """Exact search through the Provider and in raw SQL, then an HNSW index, on N vectors."""
    dsn = server.dsn()
    schema = f"bench_pg_{size}"
    adapter = await open_provider(dsn, schema)
    try:
        fill_pgvector(dsn, schema, {PARENT: size})
        asked = query_vectors(dsn, schema, queries)

        async def exact_search(vector: tuple[float, ...]) -> list[str]:
            found = await adapter.vector_search(
                VectorSearchRequest(parents=(PARENT,), space=SPACE.key, vector=vector)
            )
            return [hit.memory.id for hit in found.hits]

        exact = {vector: await exact_search(vector) for vector in asked}
        rounds = iter(asked * 2)
        samples = await timed(lambda: exact_search(next(rounds)), queries)
        print(f"  pgvector exact   N={size:>6}: {percentiles(samples)}  {load()}", flush=True)
        samples = []
        with psycopg.connect(dsn) as connection:
            for vector in asked:
                started = time.perf_counter()
                exact_top(connection, schema, PARENT, vector)
                samples.append(time.perf_counter() - started)
        print(f"    (its statement alone: {percentiles(samples)})", flush=True)
        with psycopg.connect(dsn, autocommit=True) as connection:
            started = time.perf_counter()
            connection.execute(
                f"CREATE INDEX ON {schema}.vectors USING hnsw "
                f"((embedding::vector({DIMENSIONS})) vector_cosine_ops) WHERE space = 1"
            )
            built = time.perf_counter() - started
        found, samples = [], []
        with psycopg.connect(dsn) as connection:
            for vector in asked:
                started = time.perf_counter()
                found.append(hnsw_top(connection, schema, PARENT, vector))
                samples.append(time.perf_counter() - started)
        recall = statistics.mean(
            len(set(top) & set(exact[vector])) / len(exact[vector])
            for vector, top in zip(asked, found, strict=True)
        )
        print(
            f"  pgvector HNSW    N={size:>6}: {percentiles(samples)}  recall@8 {recall:.2f}  "
            f"build {built:.1f} s  {load()}",
            flush=True,
        )
    finally:
        await adapter.dispose()


async def measure_hnsw_partitions(server: PostgresServer, size: int, queries: int) -> None:
    """One partition among ten of the same size: HNSW's nearest rows, then the filter."""
    dsn = server.dsn()
    schema = f"bench_parts_{size}"
    adapter = await open_provider(dsn, schema)
    try:
        fill_pgvector(dsn, schema, {f"user-{n}": size // 10 for n in range(10)})
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(
                f"CREATE INDEX ON {schema}.vectors USING hnsw "
                f"((embedding::vector({DIMENSIONS})) vector_cosine_ops) WHERE space = 1"
            )
        with psycopg.connect(dsn) as connection:
            counts = [
                len(hnsw_top(connection, schema, "user-3", vector))
                for vector in query_vectors(dsn, schema, queries)
            ]
        print(
            f"  pgvector HNSW, 1 partition of 10 (N={size // 10} each): "
            f"{statistics.mean(counts):.1f} of 8 results on average  {load()}",
            flush=True,
        )
    finally:
        await adapter.dispose()


async def measure_fallback(server: PostgresServer, size: int, queries: int) -> None:
    """The fallback's search through the Provider on N float16 vectors."""
    dsn = server.dsn()
    schema = f"bench_fb_{size}"
    adapter = await open_provider(dsn, schema)
    try:
        fill_fallback(dsn, schema, size)
        asked = iter(query_vectors(dsn, schema, queries + 1))

        async def search() -> None:
            await adapter.vector_search(
                VectorSearchRequest(parents=(PARENT,), space=SPACE.key, vector=next(asked))
            )

        first = await timed(search, 1)
        samples = await timed(search, queries)
        print(
            f"  fallback (numpy) N={size:>6}: {percentiles(samples)}  "
            f"first {first[0] * 1e3:.0f} ms  {load()}",
            flush=True,
        )
    finally:
        await adapter.dispose()


async def main() -> None:
    """Start both servers and print every figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--queries", type=int, default=40)
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    with_pgvector = PostgresServer(pgvector_bindir(), settings=SETTINGS).start()
    without = PostgresServer(find_bindir(), settings=SETTINGS).start()
    try:
        print(f"{DIMENSIONS} dimensions, cosine, limit 8, {arguments.queries} queries", flush=True)
        for size in sizes:
            await measure_pgvector(with_pgvector, size, arguments.queries)
            await measure_fallback(without, size, arguments.queries)
        await measure_hnsw_partitions(with_pgvector, max(sizes), arguments.queries)
    finally:
        with_pgvector.stop()
        without.stop()


if __name__ == "__main__":
    sys.exit(anyio.run(main))
