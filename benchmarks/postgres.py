"""Benchmark the `spaces` Source on PostgreSQL: recall latency, remember throughput, COPY.

Run from the repository root (it starts its own private server, or uses `--dsn`)::

    .venv/bin/python benchmarks/postgres.py                  # 100,000 and 1,000,000 memories
    .venv/bin/python benchmarks/postgres.py --quick          # 10,000 and 100,000, fewer writes
    .venv/bin/python benchmarks/postgres.py --rounds 1       # one round per figure (default 3)
    .venv/bin/python benchmarks/postgres.py --check          # exit 1 when a target fails
    .venv/bin/python benchmarks/postgres.py --sizes 100000 --recall-only   # one size, no writers

What is measured, on the asyncio backend, in one schema that grows from the small size to
the large one (one user's parent holds a tenth of the corpus, other parents the rest). The
private server runs PostgreSQL's defaults (fsync and synchronous_commit on) with
production-sized buffers (`BENCHMARK_SERVER`); `--dsn` measures your server as it is.

- recall latency: the `recall` route through a real host turn
  (`turn.execute_route("source:spaces/recall", {"query": ...})`), p50 and p95 over a fixed,
  seeded set of queries; beside it the raw floor, the same `websearch_to_tsquery` +
  `ts_rank_cd` top-10 query on the same parent issued directly with psycopg. The two are
  interleaved query by query, so a burst of other work on the machine hits both alike, and
  the ratio of their p95s is printed. (The SQLite Provider's figures are
  `benchmarks/spaces.py`'s; this run does not repeat them.)
- remember throughput: 1, 4 and 16 OS processes, each remembering through the Provider
  in its own parent, one durable commit per memory (`synchronous_commit = on`, fsync on),
  timed from a common start to the last write (start-up and shutdown not counted).
- bulk import: rows per second of a `COPY` into a staging table, one `INSERT ... SELECT`
  computing the weighted tsvector and a rebuild of the GIN index, as an operator's import
  would do (one sorted index build instead of a million insertions).

Each figure is the median of `--rounds` rounds; every line quotes the machine's 1-minute
load average in brackets, since other work on a shared machine moves the figures. The
corpus is synthetic and seeded: 8 to 24 words per memory from 20,000 made-up words with a
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

from mnemon_testing import MemoryCompositionRunner, SelectAll
from mnemon_testing.postgres import PostgresServer

SCHEMA = "bench"
RECALL = "source:spaces/recall"
REMEMBER = "source:spaces/remember"
USER = {"user_id": "bench-user"}
VOCABULARY = 20_000
QUERIES = 200
#: the private server's settings beyond the defaults (fsync and synchronous_commit stay on)
BENCHMARK_SERVER = {"shared_buffers": "1GB", "effective_cache_size": "4GB"}


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
    """COPY `texts` in (every `mine_every`-th into `parent`); returns rows per second.

    As an operator's import would: COPY into a staging table, one `INSERT ... SELECT`
    computing the weighted tsvector, the GIN index dropped before and built again after
    (one sorted build instead of a million insertions), then `ANALYZE`.
    """
    buffer = io.StringIO()
    for index, text in enumerate(texts, start):
        owner = parent if index % mine_every == 0 else f"other-{index % 97}"
        buffer.write(f"{owner}\tb{index}\t{text}\n")
    started = time.perf_counter()
    with psycopg.connect(dsn) as connection:
        connection.execute("SET maintenance_work_mem = '256MB'")
        connection.execute(f"DROP INDEX {SCHEMA}.memories_search")
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
        connection.execute(f"CREATE INDEX memories_search ON {SCHEMA}.memories USING gin (search)")
    connection.close()
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"ANALYZE {SCHEMA}.memories")
    return len(texts) / (time.perf_counter() - started)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


async def latencies(
    runner: MemoryCompositionRunner, dsn: str, parent: str, queries: list[str]
) -> tuple[list[float], list[float]]:
    """Milliseconds of the route and of the raw floor, query by query, interleaved.

    Each query goes through the route and then straight to the server, one right after the
    other, so a burst of load from other work on the machine hits both alike.
    """
    route, raw = [], []
    with psycopg.connect(dsn, autocommit=True) as connection:
        for query in queries:
            # a turn allows a few route calls: one turn per query, only the route call timed
            turn = await runner.begin_turn({"scope": USER})
            try:
                started = time.perf_counter()
                await turn.execute_route(RECALL, {"query": query})
                route.append((time.perf_counter() - started) * 1000)
            finally:
                await turn.release()
            started = time.perf_counter()
            connection.execute(
                f"SELECT id, text FROM {SCHEMA}.memories m, "
                "websearch_to_tsquery('simple', %s) q WHERE m.parent = %s AND m.search @@ q "
                "ORDER BY ts_rank_cd(m.search, q) DESC LIMIT 10",
                (query, parent),
            ).fetchall()
            raw.append((time.perf_counter() - started) * 1000)
    return route, raw


def queries_of(texts: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    chosen = []
    for _ in range(QUERIES):
        words = rng.choice(texts).split()
        chosen.append(" ".join(rng.sample(words, k=min(len(words), rng.randint(2, 3)))))
    return chosen


WRITER = """
import sys, time, anyio
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
    print(time.monotonic(), flush=True)  # the system-wide clock: comparable across processes
    await adapter.dispose()
anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def throughput(dsn: str, processes: int, writes: int, run: int) -> float:
    """Remembers per second of `processes` writers, from a common start to the last write.

    Each writer is a process of its own with its own pool, started and warmed before the
    clock starts; its start-up and shutdown are not counted.
    """
    started_processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, dsn, f"writer-{run}-{processes}-{n}", str(writes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for process in started_processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    started = time.monotonic()
    for process in started_processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    finished = []
    for process in started_processes:
        assert process.stdout is not None
        finished.append(float(process.stdout.readline()))
        process.wait()
        assert process.returncode == 0
    return processes * writes / (max(finished) - started)


def load() -> str:
    """The machine's 1-minute load average (other work shares these cores)."""
    return f"{os.getloadavg()[0]:.1f}"


async def run(
    dsn: str, sizes: Sequence[int], writes: int, rounds: int, check: bool, remember: bool
) -> int:
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
            version = connection.execute("SHOW server_version").fetchone()
        assert row is not None
        parent = str(row[0])
        loaded = 0
        print(
            f"python {platform.python_version()}, {os.cpu_count()} cores, PostgreSQL "
            f"{version[0] if version else '?'}; medians of {rounds} rounds; [1-minute load "
            "average of the machine]"
        )
        for size in sizes:
            texts = corpus(size - loaded, seed=size)
            rate = bulk_load(dsn, parent, texts, loaded, 10)
            loaded = size
            print(f"{size:>9,} memories  COPY import {rate:,.0f} rows/s [{load()}]", flush=True)
            mine = [text for index, text in enumerate(texts) if index % 10 == 0]
            queries = queries_of(mine, seed=size)
            await latencies(runner, dsn, parent, queries[:20])  # warm the pools and caches
            figures = []
            for number in range(rounds):
                route, raw = await latencies(runner, dsn, parent, queries)
                (route50, route95), (raw50, raw95) = percentiles(route), percentiles(raw)
                figures.append((route50, route95, raw50, raw95))
                print(
                    f"  round {number + 1}: route p50 {route50:6.2f} p95 {route95:6.2f} ms  "
                    f"raw floor p50 {raw50:6.2f} p95 {raw95:6.2f} ms  "
                    f"p95 {route95 / raw95:.2f}x the floor [{load()}]",
                    flush=True,
                )
            route50, route95, raw50, raw95 = (
                statistics.median(figure[column] for figure in figures) for column in range(4)
            )
            ok = route95 <= 1.5 * raw95
            failed |= not ok
            print(
                f"  median:  route p50 {route50:6.2f} p95 {route95:6.2f} ms  "
                f"raw floor p50 {raw50:6.2f} p95 {raw95:6.2f} ms  "
                f"p95 {route95 / raw95:.2f}x the floor (p50 {route50 / raw50:.2f}x)  "
                f"target p95 <= 1.5x: {'PASS' if ok else 'FAIL'}",
                flush=True,
            )
    finally:
        await runner.dispose()
    if not remember:
        return 1 if check and failed else 0
    rates: dict[int, list[float]] = {1: [], 4: [], 16: []}
    for number in range(rounds):
        for count, measured in rates.items():
            measured.append(throughput(dsn, count, writes, number))
        print(
            f"remember round {number + 1}: "
            + ", ".join(f"{count} hosts {rate[-1]:,.0f}/s" for count, rate in rates.items())
            + f" [{load()}]",
            flush=True,
        )
    medians = {count: statistics.median(values) for count, values in rates.items()}
    ok = medians[4] >= 2.5 * medians[1]
    failed |= not ok
    print(
        "remember median: "
        + ", ".join(f"{count} hosts {rate:,.0f}/s" for count, rate in medians.items())
        + f"  4 hosts {medians[4] / medians[1]:.2f}x one"
        + f"  target >= 2.5x: {'PASS' if ok else 'FAIL'}"
    )
    return 1 if check and failed else 0


def _sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(int(part.replace("_", "")) for part in text.split(","))
    if not sizes or any(size <= 0 for size in sizes) or list(sizes) != sorted(set(sizes)):
        raise argparse.ArgumentTypeError("sizes must be ascending positive numbers")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 memories")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target fails")
    parser.add_argument("--dsn", help="an existing server (its schema 'bench' is replaced)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (the median)")
    parser.add_argument(
        "--sizes", type=_sizes, help="memories to measure recall at, comma-separated, ascending"
    )
    parser.add_argument("--recall-only", action="store_true", help="no remember throughput")
    options = parser.parse_args(argv)
    sizes = (10_000, 100_000) if options.quick else (100_000, 1_000_000)
    if options.sizes:
        sizes = options.sizes
    writes = 50 if options.quick else 200
    server: PostgresServer | None = None
    dsn: Any = options.dsn
    if dsn is None:
        # sized like a small production server, not like the test suite's (32 MB buffers)
        server = PostgresServer(settings=BENCHMARK_SERVER).start()
        dsn = server.dsn()
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        return anyio.run(
            run,
            dsn,
            sizes,
            writes,
            options.rounds,
            options.check,
            not options.recall_only,
            backend="asyncio",
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
