"""Benchmark the `spaces` Source on PostgreSQL: recall latency, remember throughput, COPY.

Run from the repository root (it starts its own private server, or uses `--dsn`)::

    .venv/bin/python benchmarks/postgres.py                  # 100,000 and 1,000,000 memories
    .venv/bin/python benchmarks/postgres.py --quick          # 10,000 and 100,000, fewer writes
    .venv/bin/python benchmarks/postgres.py --check          # exit 1 when a target fails

What is measured, on the asyncio backend, in one schema that grows from the small size to
the large one (one user's parent holds a tenth of the corpus, other parents the rest):

- recall latency: the `recall` route through a real host turn
  (`turn.execute_route("source:spaces/recall", {"query": ...})`), p50 and p95 over a fixed,
  seeded set of queries; beside it the raw floor, the same `websearch_to_tsquery` +
  `ts_rank_cd` top-10 query on the same parent issued directly with psycopg. (The SQLite
  Provider's figures are `benchmarks/spaces.py`'s; this run does not repeat them.)
- remember throughput: 1, 4 and 16 OS processes, each remembering through the Provider
  in its own parent, one durable commit per memory (`synchronous_commit = on`, fsync on).
- bulk import: rows per second of a `COPY` into a staging table and one `INSERT ... SELECT`
  computing the weighted tsvector, as an operator's import would do.

The corpus is synthetic and seeded: 8 to 24 words per memory from 20,000 made-up words with a
Zipf distribution. A query is 2 or 3 words of a random memory of the measured parent.
Targets: route p95 within 1.5x the raw floor at both sizes; 4 processes at least 2.5x the
throughput of one. PASS/FAIL marks them; the exit status is 0 unless `--check`.
"""

from __future__ import annotations

import argparse
import bisect
import io
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import mnemon_spaces_postgres
import psycopg
from mnemon_spaces_postgres.testing import PostgresServer

from mnemon_testing import MemoryCompositionRunner, SelectAll

SCHEMA = "bench"
RECALL = "source:spaces/recall"
REMEMBER = "source:spaces/remember"
USER = {"user_id": "bench-user"}
VOCABULARY = 20_000
QUERIES = 200


def _words(seed: int) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "da", "fo"]
    words = sorted(
        {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(60_000)}
    )[:VOCABULARY]
    rng.shuffle(words)
    total = 0.0
    cumulative = []
    for rank in range(1, len(words) + 1):
        total += 1.0 / rank
        cumulative.append(total)
    return words, [value / total for value in cumulative]


def corpus(count: int, seed: int) -> list[str]:
    words, cumulative = _words(7)
    rng = random.Random(seed)
    return [
        " ".join(
            words[bisect.bisect_left(cumulative, rng.random())] for _ in range(rng.randint(8, 24))
        )
        for _ in range(count)
    ]


def bulk_load(dsn: str, parent: str, texts: list[str], start: int, mine_every: int) -> float:
    """COPY `texts` in (every `mine_every`-th into `parent`); returns rows per second."""
    buffer = io.StringIO()
    for index, text in enumerate(texts, start):
        owner = parent if index % mine_every == 0 else f"other-{index % 97}"
        buffer.write(f"{owner}\tb{index}\t{text}\n")
    started = time.perf_counter()
    with psycopg.connect(dsn) as connection:
        connection.execute(
            "CREATE TEMP TABLE staging (parent text, id text, text text) ON COMMIT DROP"
        )
        with connection.cursor().copy("COPY staging (parent, id, text) FROM STDIN") as copy:
            copy.write(buffer.getvalue())
        connection.execute(
            f"INSERT INTO {SCHEMA}.memories (parent, id, text, created_at, search) "
            "SELECT parent, id, text, now(), setweight(to_tsvector('simple', text), 'A') "
            "FROM staging"
        )
    connection.close()
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"ANALYZE {SCHEMA}.memories")
    return len(texts) / (time.perf_counter() - started)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


async def route_latency(runner: MemoryCompositionRunner, queries: list[str]) -> list[float]:
    samples = []
    for query in queries:
        # a turn allows a few route calls: one turn per query, only the route call timed
        turn = await runner.begin_turn({"scope": USER})
        try:
            started = time.perf_counter()
            await turn.execute_route(RECALL, {"query": query})
            samples.append((time.perf_counter() - started) * 1000)
        finally:
            await turn.release()
    return samples


def raw_latency(dsn: str, parent: str, queries: list[str]) -> list[float]:
    samples = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        for query in queries:
            started = time.perf_counter()
            connection.execute(
                f"SELECT id, text FROM {SCHEMA}.memories m, "
                "websearch_to_tsquery('simple', %s) q WHERE m.parent = %s AND m.search @@ q "
                "ORDER BY ts_rank_cd(m.search, q) DESC LIMIT 10",
                (query, parent),
            ).fetchall()
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def queries_of(texts: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    chosen = []
    for _ in range(QUERIES):
        words = rng.choice(texts).split()
        chosen.append(" ".join(rng.sample(words, k=min(len(words), rng.randint(2, 3)))))
    return chosen


WRITER = """
import sys, anyio
from mnemon_source_spaces import ProviderInit, RememberRequest
from mnemon_spaces_postgres import POSTGRES_PROVIDER
async def main(dsn, parent, count):
    adapter = await POSTGRES_PROVIDER.open(ProviderInit(instance_key="bench",
        data_directory="/", configuration={"dsn": dsn, "schema": "bench", "pool_max": 2}))
    await adapter.remember(RememberRequest(parent=parent, text="warm up"))
    print("ready", flush=True)
    sys.stdin.readline()
    for index in range(count):
        await adapter.remember(RememberRequest(parent=parent, text=f"written {index} by {parent}"))
    await adapter.dispose()
anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def throughput(dsn: str, processes: int, writes: int) -> float:
    """Remembers per second of `processes` writers, timed from a common start."""
    started_processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, dsn, f"writer-{processes}-{n}", str(writes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for process in started_processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for process in started_processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in started_processes:
        process.wait()
        assert process.returncode == 0
    return processes * writes / (time.perf_counter() - started)


async def run(dsn: str, sizes: Sequence[int], writes: int, check: bool) -> int:
    failed = False
    runner = MemoryCompositionRunner()
    await runner.mount(
        mnemon_spaces_postgres,
        instance_id="spaces",
        config={"provider": {"type": "postgres", "dsn": dsn, "schema": SCHEMA, "pool_max": 4}},
    )
    await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
    try:
        turn = await runner.begin_turn({"scope": USER})
        await turn.execute_action(REMEMBER, {"text": "seed"}, lambda offer: True)
        await turn.release()
        with psycopg.connect(dsn) as connection:
            row = connection.execute(f"SELECT parent FROM {SCHEMA}.memories").fetchone()
        assert row is not None
        parent = str(row[0])
        loaded = 0
        print(f"python {platform.python_version()}, {os.cpu_count()} cores, PostgreSQL server")
        for size in sizes:
            texts = corpus(size - loaded, seed=size)
            rate = bulk_load(dsn, parent, texts, loaded, 10)
            loaded = size
            mine = [text for index, text in enumerate(texts) if index % 10 == 0]
            queries = queries_of(mine, seed=size)
            await route_latency(runner, queries[:20])  # warm the pool and the caches
            route = percentiles(await route_latency(runner, queries))
            raw = percentiles(raw_latency(dsn, parent, queries))
            ok = route[1] <= 1.5 * raw[1]
            failed |= not ok
            print(
                f"{size:>9,} memories  COPY import {rate:>9,.0f} rows/s  "
                f"route p50 {route[0]:6.2f} ms p95 {route[1]:6.2f} ms  "
                f"raw floor p50 {raw[0]:6.2f} ms p95 {raw[1]:6.2f} ms  "
                f"target p95 <= 1.5x floor: {'PASS' if ok else 'FAIL'}"
            )
    finally:
        await runner.dispose()
    rates = {count: throughput(dsn, count, writes) for count in (1, 4, 16)}
    ok = rates[4] >= 2.5 * rates[1]
    failed |= not ok
    print(
        "remember throughput: "
        + ", ".join(f"{count} hosts {rate:,.0f}/s" for count, rate in rates.items())
        + f"  target 4 hosts >= 2.5x one: {'PASS' if ok else 'FAIL'}"
    )
    return 1 if check and failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 memories")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target fails")
    parser.add_argument("--dsn", help="an existing server (its schema 'bench' is replaced)")
    options = parser.parse_args(argv)
    sizes = (10_000, 100_000) if options.quick else (100_000, 1_000_000)
    writes = 50 if options.quick else 200
    server: PostgresServer | None = None
    dsn: Any = options.dsn
    if dsn is None:
        server = PostgresServer().start()
        dsn = server.dsn()
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        return anyio.run(run, dsn, sizes, writes, options.check, backend="asyncio")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
