"""Benchmark the `spaces` Source on its SQLite Provider: remember throughput, recall latency.

Run from the repository root::

    .venv/bin/python benchmarks/spaces.py            # full run: 10,000 and 100,000 memories
    .venv/bin/python benchmarks/spaces.py --quick    # a smoke run: 1,000 and 10,000 memories
    .venv/bin/python benchmarks/spaces.py --check    # exit 1 when a target fails
    .venv/bin/python benchmarks/spaces.py --runs 3   # judged by the medians of 3 full runs
    .venv/bin/python benchmarks/spaces.py --ingest-only --runs 3   # bulk ingest targets only

What is measured, on the asyncio backend, in one store that grows from the small size to
the large one (the same parent, so the large figures include the small corpus):

- recall latency: the `recall` route read through a real `MemoryHost` turn
  (`turn.execute_route("source:spaces/recall", {"query": ...})`), p50 and p95 over a fixed,
  seeded set of queries. Beside it, the baseline: the Provider's own `search()` on the same
  queries, and a naive FTS5 query (`MATCH` the OR of the terms, `ORDER BY bm25() LIMIT`),
  which is what the bounded recall replaces.
- remember throughput: `remember` actions through the same turn, one after another, with
  the default configuration (`synchronous = full`: every receipt is durable), in writes/s.
- bulk ingest, into a fresh store: the Provider SDK's `remember_many`, the Source's
  management `import`, and `mnemon import` on an export file, in batches of 1,000 with
  idempotency keys, in memories/s; beside them, the baseline: the same texts loaded into a
  bare FTS5 table (`CREATE VIRTUAL TABLE t USING fts5(text)`) in the same batches, also
  with `synchronous = full`.
- the two baselines (the bare table and `remember_many`) are measured before the other
  paths and again after them, and the means are used: the pace of a shared machine drifts
  over a run, and a baseline measured once would pass that off as a ratio.
- storage: the store's bytes per memory after the `remember_many` ingest (checkpointed)
  beside the bare FTS5 table's.

The corpus is synthetic and seeded: sentences of 8 to 30 words drawn from 30,000 made-up
content words with a Zipf distribution (exponent 1.0, so the commonest word is in about one
memory in three), mixed with English stop words, plus tags and entities. Each query takes 2
to 4 content words of one random memory, so queries often contain very common words. The
corpus is loaded in transactions of 1,000 with the store's own row writer (the rows
`remember` writes, without one transaction and one fsync per memory).

Targets are printed beside the figures and marked PASS or FAIL; with `--runs N`, by the
median of N full runs (see `targets.py`). The exit status is 0 unless `--check` is given, in
which case a failed target exits 1.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import gc
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_spaces as spaces
from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, RememberRequest, SearchRequest
from mnemon_source_spaces._grants import parent_of
from mnemon_source_spaces._sqlite_rows import NewMemory, insert_memories
from mnemon_source_spaces._sqlite_schema import ensure_schema
from mnemon_source_spaces._sqlite_search import _candidates, _frequencies, _namespaces
from mnemon_source_spaces._text import STOPWORDS, fts_phrase, query_terms
from targets import Check, add_options, repeat, report

import mnemon.sdk

BACKEND = "asyncio"
SCOPE = {"user_id": "bench"}
SPACE = "memories"
KEY = "source:spaces"
MAX_P95_MS = 20.0
MAX_GROWTH = 3.0
MAX_FLOOR_RATIO = 2.0
# from this many memories on, recall's fixed cost must be a smaller share of the FTS5 work
LARGE_STORE = 100_000
MAX_FLOOR_RATIO_LARGE = 1.5
# ingest, as ratios measured in one run: remember_many against a bare FTS5 table's insert
# rate, and each bulk path's time against remember_many's for the same memories
MIN_BARE_INGEST_RATIO = 0.2
MAX_MANAGEMENT_TIME_RATIO = 1.25
MAX_COMMAND_TIME_RATIO = 1.5
MAX_STORAGE_RATIO = 2.0
INGEST_BATCH = 1_000
SEED = 20_240_501
VOCABULARY = 30_000
LOAD_BATCH = 1_000
STOP = sorted(STOPWORDS)[:40]
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["ka", "ro", "mi", "tu"]


@dataclass(frozen=True)
class Plan:
    """Sizes, queries and writes of one run."""

    sizes: tuple[int, ...]
    queries: int
    writes: int
    warmup: int
    ingest: int
    recall: bool = True  # False: bulk ingest and storage only (`--ingest-only`)


FULL = Plan(sizes=(10_000, 100_000), queries=400, writes=400, warmup=40, ingest=50_000)
QUICK = Plan(sizes=(1_000, 10_000), queries=60, writes=60, warmup=10, ingest=5_000)


# ------------------------------------------------------------------------- corpus


class Corpus:
    """A seeded generator of memory texts and of queries about them."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        words: set[str] = set()
        while len(words) < VOCABULARY:
            words.add("".join(self.random.choices(SYLLABLES, k=self.random.randint(2, 4))))
        self.words = sorted(words)
        self.random.shuffle(self.words)
        weights = [1.0 / (rank + 1) for rank in range(VOCABULARY)]
        self.cumulative = []
        total = 0.0
        for weight in weights:
            total += weight
            self.cumulative.append(total)
        self.total = total
        self.entities = [f"{self.word().title()} {self.word().title()}" for _ in range(500)]
        self.tags = [self.word() for _ in range(20)]
        self.texts: list[str] = []

    def word(self) -> str:
        """One content word, drawn with the Zipf weights."""
        return self.words[bisect.bisect(self.cumulative, self.random.random() * self.total)]

    def memory(self) -> tuple[str, list[str], list[str]]:
        """A new memory: its text (also kept for queries), tags and entities."""
        parts = []
        for _ in range(self.random.randint(8, 30)):
            parts.append(self.random.choice(STOP) if self.random.random() < 0.3 else self.word())
        text = " ".join(parts).capitalize() + "."
        self.texts.append(text)
        tags = self.random.sample(self.tags, self.random.randint(0, 2))
        entities = self.random.sample(self.entities, self.random.randint(0, 2))
        return text, tags, entities

    def queries(self, count: int, seed: int) -> list[tuple[str, str]]:
        """(query, the memory text its words were taken from) pairs."""
        chooser = random.Random(seed)
        made: list[tuple[str, str]] = []
        while len(made) < count:
            target = chooser.choice(self.texts)
            content = [word for word in query_terms(target) if word not in STOPWORDS]
            if len(content) >= 2:
                picked = chooser.sample(content, min(len(content), chooser.randint(2, 4)))
                made.append((" ".join(picked), target))
        return made


def _parent() -> str:
    """The parent the Source derives for the benchmark's scope and space."""
    partition = mnemon.sdk.scope_partition(mnemon.Scope(**SCOPE), ("user_id",))
    assert partition is not None
    return parent_of(partition, SPACE)


def load(path: Path, parent: str, corpus: Corpus, count: int) -> float:
    """Add `count` memories to the store; returns the seconds it took."""
    started = time.perf_counter()
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        ensure_schema(connection)
        base = len(corpus.texts)
        for start in range(0, count, LOAD_BATCH):
            batch = []
            for index in range(start, min(start + LOAD_BATCH, count)):
                text, tags, entities = corpus.memory()
                created = datetime.now(UTC).isoformat(timespec="microseconds")
                batch.append(
                    NewMemory(f"bench-{base + index}", text, tags, entities, created, None)
                )
            connection.execute("BEGIN IMMEDIATE")
            insert_memories(connection, parent, batch)
            connection.execute("COMMIT")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return time.perf_counter() - started


# ------------------------------------------------------------------------- the host


class AllRoutes:
    """A Strategy plugin selecting every available Source with its routes and actions."""

    definition = mnemon.sdk.define_memory_strategy(
        {
            "type_id": "bench-spaces",
            "package_name": "mnemon-bench-spaces",
            "supported_source_roles": ["*"],
            "max_sources": 4,
            "max_routes": 16,
            "max_actions": 16,
        },
        lambda request, sources, contributions: {
            "strategy_type_id": "bench-spaces",
            "sources": [
                {
                    "source_key": source.key,
                    "route_ids": [route.id for route in source.routes],
                    "action_ids": [action.id for action in source.actions],
                }
                for source in sources
                if source.facts.availability != "unavailable"
            ],
            "explanation": "bench: the spaces Source, routed",
        },
    )

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        """Install the Strategy for this entry."""
        mnemon.sdk.install_memory(ctx, strategies=[self.definition])


def allow(offer: mnemon.ActionOffer) -> bool:
    return True


@dataclass(frozen=True)
class Latency:
    """Per-call samples in seconds."""

    samples: tuple[float, ...]

    def percentile(self, fraction: float) -> float:
        """The sample at `fraction` (nearest rank), in milliseconds."""
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1_000

    @property
    def p50(self) -> float:
        """The median, in milliseconds."""
        return statistics.median(self.samples) * 1_000

    @property
    def p95(self) -> float:
        """The 95th percentile, in milliseconds."""
        return self.percentile(0.95)


@dataclass(frozen=True)
class Row:
    """Every figure measured at one size."""

    size: int
    route: Latency
    provider: Latency
    floor: Latency
    naive: Latency
    writes_per_second: float
    provider_writes_per_second: float
    found: float
    naive_found: float


async def timed(calls: Sequence[Any]) -> Latency:
    gc.collect()
    samples = []
    clock = time.perf_counter
    for call in calls:
        started = clock()
        await call()
        samples.append(clock() - started)
    return Latency(tuple(samples))


def floor_search(path: Path, parent: str, queries: Sequence[tuple[str, str]]) -> Latency:
    """The raw FTS5 floor: only the FTS5 statements the recall runs for each query.

    The same candidate queries, terms and limits as the Provider's recall (`_candidates`), on
    a plain connection in this thread, rows fetched; the term lookups that decide which
    statements to run are made before the clock starts. What recall adds beyond this is
    scoring, reading the returned memories, the worker thread, the Source and the turn.
    """
    connection = sqlite3.connect(path)
    samples = []
    try:
        [namespace] = _namespaces(connection, [parent])
        for query, _ in queries:
            terms = query_terms(query)
            in_store = _frequencies(connection, 0, terms)
            present = [term for term in terms if in_store.get(term, 0) > 0]
            selective = [term for term in present if in_store[term] < 1_000]
            started = time.perf_counter()
            _candidates(connection, namespace, present, selective, 8)
            samples.append(time.perf_counter() - started)
    finally:
        connection.close()
    return Latency(tuple(samples))


def naive_search(path: Path, queries: Sequence[tuple[str, str]]) -> tuple[Latency, float]:
    """The unbounded FTS5 query recall replaces: latency, and how often it finds the target."""
    connection = sqlite3.connect(path)
    samples = []
    found = 0
    try:
        for query, target in queries:
            expression = " OR ".join(fts_phrase(term) for term in query_terms(query))
            started = time.perf_counter()
            rows = connection.execute(
                "SELECT m.text FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
                "WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts) LIMIT 8",
                (expression,),
            ).fetchall()
            samples.append(time.perf_counter() - started)
            found += any(text == target for (text,) in rows)
    finally:
        connection.close()
    return Latency(tuple(samples)), found / len(queries)


async def measure(
    directory: Path, store: Path, size: int, corpus: Corpus, plan: Plan, round_number: int
) -> Row:
    config = {"data_dir": str(directory), "provider": {"type": "sqlite", "path": str(store)}}
    queries = corpus.queries(plan.queries + plan.warmup, SEED + round_number)
    host = mnemon.MemoryHost()
    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="bench", data_directory=str(directory), configuration={"path": str(store)}
        )
    )
    try:
        await host.mount(spaces, instance_id="spaces", config=config)
        await host.mount(AllRoutes(), instance_id="strategy")
        parent = _parent()
        clock = time.perf_counter
        samples: list[float] = []
        found = 0
        measured = queries[plan.warmup :]
        for number, (query, target) in enumerate(queries):
            # recall allows a few calls per turn: each read gets a turn, timed around the read
            turn = await host.begin_turn({"scope": SCOPE})
            try:
                started = clock()
                evidence = await turn.execute_route(f"{KEY}/recall", {"query": query})
                elapsed = clock() - started
            finally:
                await turn.release()
            if number >= plan.warmup:
                samples.append(elapsed)
                found += any(item.text == target for item in evidence.items)
            else:
                await adapter.search(SearchRequest(parents=(parent,), query=query))
        route = Latency(tuple(samples))
        provider = await timed(
            [
                lambda q=q: adapter.search(SearchRequest(parents=(parent,), query=q))
                for q, _ in measured
            ]
        )
        floor = floor_search(store, parent, measured)
        naive, naive_found = naive_search(store, measured)
        texts = [corpus.memory()[0] for _ in range(plan.writes)]
        async with host.turn(scope=SCOPE) as turn:
            started = clock()
            for text in texts:
                await turn.execute_action(f"{KEY}/remember", {"text": text}, allow)
            writes = plan.writes / (clock() - started)
        started = clock()
        for text in texts:
            await adapter.remember(spaces.RememberRequest(parent=parent, text=text))
        provider_writes = plan.writes / (clock() - started)
    finally:
        await adapter.dispose()
        await host.dispose()
    return Row(
        size,
        route,
        provider,
        floor,
        naive,
        writes,
        provider_writes,
        found / len(measured),
        naive_found,
    )


# ------------------------------------------------------------------------- bulk ingest


@dataclass(frozen=True)
class Ingest:
    """Memories per second by each bulk path, and bytes per memory."""

    provider: float
    management: float
    command: float
    bare: float
    store_bytes: float
    bare_bytes: float
    breakdown: tuple[tuple[str, float], ...]


def _batches(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start : start + INGEST_BATCH] for start in range(0, len(items), INGEST_BATCH)]


def _size(path: Path) -> int:
    return sum(
        part.stat().st_size for part in (path, path.with_name(path.name + "-wal")) if part.exists()
    )


def storage_breakdown(path: Path, count: int) -> tuple[tuple[str, float], ...]:
    """Bytes per memory of each table and index (SQLite's `dbstat`), largest first."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        columns = connection.execute(
            "SELECT avg(length(text)), avg(length(terms)), avg(length(idempotency_key)), "
            "avg(length(tags) + length(entities)) FROM memories"
        ).fetchone()
    except sqlite3.OperationalError:  # an SQLite built without dbstat
        return ()
    finally:
        connection.close()
    parts = [(str(name), size / count) for name, size in rows if size / count >= 1]
    names = ("text", "term counts", "idempotency digest", "tags and entities")
    parts += [
        (f"  (column) {name}", float(value or 0))
        for name, value in zip(names, columns, strict=True)
    ]
    return tuple(parts)


def bare_ingest(path: Path, texts: Sequence[str]) -> float:
    """The baseline: the same texts into a bare FTS5 table, in the same durable batches."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("CREATE VIRTUAL TABLE bare USING fts5 (text)")
        started = time.perf_counter()
        for batch in _batches(texts):
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany("INSERT INTO bare (text) VALUES (?)", [(t,) for t in batch])
            connection.execute("COMMIT")
        seconds = time.perf_counter() - started
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return len(texts) / seconds


async def provider_ingest(directory: Path, store: Path, memories: Sequence[Any]) -> float:
    """`remember_many` on the SQLite Provider; the requests are built before the clock starts."""
    parent = _parent()
    requests = [
        RememberRequest(
            parent=parent,
            text=text,
            tags=tuple(tags),
            entities=tuple(entities),
            idempotency_key=f"ingest-{index}",
        )
        for index, (text, tags, entities) in enumerate(memories)
    ]
    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(
            instance_key="ingest", data_directory=str(directory), configuration={"path": str(store)}
        )
    )
    try:
        started = time.perf_counter()
        for batch in _batches(requests):
            await spaces.remember_many(adapter, batch)
        seconds = time.perf_counter() - started
    finally:
        await adapter.dispose()
    checkpoint = sqlite3.connect(store)
    checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    checkpoint.close()
    return len(requests) / seconds


async def management_ingest(directory: Path, store: Path, memories: Sequence[Any]) -> float:
    """The Source's management `import` through a host, one call per batch."""
    host = mnemon.MemoryHost()
    config = {"data_dir": str(directory), "provider": {"type": "sqlite", "path": str(store)}}
    items = [
        {"text": text, "tags": tags, "entities": entities, "idempotency_key": f"m-{index}"}
        for index, (text, tags, entities) in enumerate(memories)
    ]
    try:
        await host.mount(spaces, instance_id="spaces", config=config)
        await host.mount(AllRoutes(), instance_id="strategy")
        client = host.management_client(KEY, SCOPE)
        started = time.perf_counter()
        for batch in _batches(items):
            revision = await client.revision()
            result = await client.mutate(
                "import",
                {"space": SPACE, "memories": list(batch)},
                confirmed=True,
                expected_revision=revision,
            )
            assert result.output["stored"] == len(batch), result.output["refused"]
        seconds = time.perf_counter() - started
    finally:
        await host.dispose()
    return len(items) / seconds


def command_ingest(directory: Path, memories: Sequence[Any]) -> float:
    """`mnemon import` of an export file into the starter profile, as a person runs it."""
    folder = directory / "profile"
    folder.mkdir()
    binary = Path(sys.executable).with_name("mnemon")
    environment = {**os.environ, "MNEMON_HOME": str(directory / "home"), "NO_COLOR": "1"}
    # as an installed mnemon starts: from its bytecode, which the untimed commands below
    # write, even where the environment says not to write it (PYTHONDONTWRITEBYTECODE)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment["PYTHONPYCACHEPREFIX"] = str(directory / "bytecode")
    # lexical ingest: with an embedder installed, the starter profile would embed every
    # memory after the import, and the embedder's time would be measured instead
    for command in (
        ["init", "--embedder", "none"],
        # an export of the still empty scope opens the host and its plugins as import will
        ["export", "--user", SCOPE["user_id"], "--out", str(directory / "empty.jsonl")],
    ):
        subprocess.run(
            [binary, *command], cwd=folder, env=environment, check=True, capture_output=True
        )
    export = directory / "export.jsonl"
    records = [
        {
            "kind": "memory",
            "source": KEY,
            "type": "spaces",
            "space": "personal",
            "text": text,
            "tags": tags,
            "entities": entities,
        }
        for text, tags, entities in memories
    ]
    header = {"format": "mnemon-export", "version": 1, "scope": SCOPE, "sources": []}
    lines = [header, *records, {"kind": "end", "records": len(records)}]
    export.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    started = time.perf_counter()
    done = subprocess.run(
        [binary, "import", str(export), "--yes", "--json"],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    summary = json.loads(done.stdout)
    assert summary.get("written") == len(records), summary
    return len(records) / seconds


async def ingest(folder: Path, corpus: Corpus, count: int) -> Ingest:
    """Every bulk path on fresh stores with the same `count` memories; the bare baseline.

    The baselines (the bare table, `remember_many`) are measured before the other paths and
    again after them, and their means are taken: a shared machine's pace drifts over a run,
    and a baseline measured once would pass the drift off as a ratio.
    """
    memories = [corpus.memory() for _ in range(count)]
    texts = [text for text, _, _ in memories]
    bare_file = folder / "bare.sqlite3"
    bare = [bare_ingest(bare_file, texts)]
    store = folder / "ingest.sqlite3"
    provider = [await provider_ingest(folder, store, memories)]
    management = await management_ingest(folder, folder / "managed.sqlite3", memories)
    command = command_ingest(folder, memories)
    provider.append(await provider_ingest(folder, folder / "again.sqlite3", memories))
    bare.append(bare_ingest(folder / "bare-again.sqlite3", texts))
    return Ingest(
        provider=statistics.mean(provider),
        management=management,
        command=command,
        bare=statistics.mean(bare),
        store_bytes=_size(store) / count,
        bare_bytes=_size(bare_file) / count,
        breakdown=storage_breakdown(store, count),
    )


# ------------------------------------------------------------------------- reporting


def _floor_ratio(size: int) -> float:
    """The most recall p95 may be, as a multiple of the raw FTS5 floor's, at `size`."""
    return MAX_FLOOR_RATIO_LARGE if size >= LARGE_STORE else MAX_FLOOR_RATIO


def print_rows(rows: Sequence[Row]) -> None:
    headers = ("memories", "what", "p50", "p95", "source memory in top 8")
    lines = []
    for row in rows:
        for name, latency, found in (
            ("recall route (mnemon turn)", row.route, f"{row.found:.0%}"),
            ("baseline: Provider search()", row.provider, "(same hits)"),
            ("baseline: raw FTS5 floor", row.floor, "(candidates)"),
            ("baseline: naive FTS5 bm25", row.naive, f"{row.naive_found:.0%}"),
        ):
            lines.append(
                (f"{row.size:,}", name, f"{latency.p50:.2f} ms", f"{latency.p95:.2f} ms", found)
            )
    widths = [max(len(cell) for cell in column) for column in zip(headers, *lines, strict=True)]
    for line in (headers, *lines):
        cells = zip(line, widths, strict=True)
        print("  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(cells)))


async def run(plan: Plan) -> list[Check]:
    """Run every measurement, print its figures, and return the targets' checks."""
    what = (
        f"{plan.queries} recall queries and {plan.writes} remember writes per size"
        if plan.recall
        else f"bulk ingest of {plan.ingest:,} memories only"
    )
    print(
        f"mnemon spaces benchmark: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}), SQLite {sqlite3.sqlite_version}; {what}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    corpus = Corpus(SEED)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mnemon-bench-spaces-") as folder:
        directory = Path(folder)
        store = directory / "spaces.sqlite3"
        parent = _parent()
        loaded = 0
        for number, size in enumerate(plan.sizes if plan.recall else ()):
            seconds = load(store, parent, corpus, size - loaded)
            print(f"loaded {size - loaded:,} memories in {seconds:.1f} s (store now {size:,})")
            loaded = size
            rows.append(await measure(directory, store, size, corpus, plan, number))
            loaded += 2 * plan.writes  # the remember measurement adds to the store
        ingest_folder = directory / "ingest"
        ingest_folder.mkdir()
        bulk = await ingest(ingest_folder, corpus, plan.ingest)
    return [*(recall_checks(plan, rows) if rows else ()), *ingest_checks(plan, bulk)]


def recall_checks(plan: Plan, rows: Sequence[Row]) -> list[Check]:
    """Print the recall and remember figures; the recall targets."""
    small, large = plan.sizes[0], plan.sizes[-1]
    print()
    print("Recall latency (per read; the route includes the Provider search)")
    print_rows(rows)
    print()
    print("Remember throughput (one after another; every receipt durable: synchronous=full)")
    for row in rows:
        print(
            f"  {row.size:>9,}  remember action {row.writes_per_second:7,.0f} writes/s   "
            f"baseline: Provider remember() {row.provider_writes_per_second:7,.0f} writes/s"
        )
    first, last = rows[0], rows[-1]
    growth = last.route.p95 / first.route.p95
    naive_growth = last.naive.p95 / first.naive.p95
    print()
    print(
        f"Growth of recall p95 from {small:,} to {large:,} memories: {growth:.2f}x "
        f"(naive FTS5 bm25: {naive_growth:.2f}x)"
    )
    for row in rows:
        print(
            f"Recall route p95 at {row.size:,}: {row.route.p95:.2f} ms, raw FTS5 floor p95 "
            f"{row.floor.p95:.2f} ms: {row.route.p95 / row.floor.p95:.2f}x "
            f"(Provider search() {row.provider.p95 / row.floor.p95:.2f}x); "
            f"fixed cost at p50 {row.route.p50 - row.floor.p50:.2f} ms"
        )
    return [
        *(
            Check(
                f"recall p95 at {row.size:,} <= {_floor_ratio(row.size):g}x the raw FTS5 floor",
                row.route.p95 / row.floor.p95,
                _floor_ratio(row.size),
                shown="{:.2f}x",
            )
            for row in rows
        ),
        Check(
            f"recall p95 at {large:,} memories < {MAX_P95_MS:g} ms",
            last.route.p95,
            MAX_P95_MS,
            strict=True,
            shown="{:.2f} ms",
        ),
        Check(
            f"recall p95 growth {small:,} -> {large:,} <= {MAX_GROWTH:g}x",
            growth,
            MAX_GROWTH,
            shown="{:.2f}x",
        ),
    ]


def ingest_checks(plan: Plan, bulk: Ingest) -> list[Check]:
    """Print the bulk ingest and storage figures; their targets."""
    print()
    print(
        f"Bulk ingest of {plan.ingest:,} memories in batches of {INGEST_BATCH:,}, "
        "synchronous=full (every batch durable)"
    )
    for name, rate in (
        ("Provider remember_many()", bulk.provider),
        ("management import", bulk.management),
        ("mnemon import (whole command)", bulk.command),
        ("baseline: bare FTS5 table", bulk.bare),
    ):
        print(
            f"  {name:<32} {rate:9,.0f} memories/s  ({rate / bulk.bare:.2f}x the bare table's "
            f"rate; {bulk.provider / rate:.2f}x remember_many's time)"
        )
    storage = bulk.store_bytes / bulk.bare_bytes
    print(
        f"Storage: {bulk.store_bytes:,.0f} bytes per memory, bare FTS5 table "
        f"{bulk.bare_bytes:,.0f}: {storage:.2f}x"
    )
    for name, per_memory in bulk.breakdown:
        print(f"  {name:<32} {per_memory:7,.0f} bytes per memory")
    return [
        Check(
            f"remember_many >= {MIN_BARE_INGEST_RATIO:g}x a bare FTS5 table's insert rate",
            bulk.provider / bulk.bare,
            MIN_BARE_INGEST_RATIO,
            at_least=True,
            shown="{:.2f}x",
        ),
        Check(
            f"management import time <= {MAX_MANAGEMENT_TIME_RATIO:g}x remember_many's",
            bulk.provider / bulk.management,
            MAX_MANAGEMENT_TIME_RATIO,
            shown="{:.2f}x",
        ),
        Check(
            f"mnemon import time <= {MAX_COMMAND_TIME_RATIO:g}x remember_many's",
            bulk.provider / bulk.command,
            MAX_COMMAND_TIME_RATIO,
            shown="{:.2f}x",
        ),
        Check(
            f"storage per memory <= {MAX_STORAGE_RATIO:g}x a bare FTS5 table",
            storage,
            MAX_STORAGE_RATIO,
            shown="{:.2f}x",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_options(parser)
    parser.add_argument(
        "--sizes",
        help="store sizes for recall, comma-separated (e.g. 10000,100000,1000000)",
    )
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="measure bulk ingest and storage only (a few minutes instead of many)",
    )
    options = parser.parse_args(argv)
    plan = QUICK if options.quick else FULL
    if options.sizes:
        sizes = tuple(sorted(int(size) for size in options.sizes.split(",")))
        plan = dataclasses.replace(plan, sizes=sizes)
    if options.ingest_only:
        plan = dataclasses.replace(plan, recall=False)
    quick = " (quick run: smaller sizes stand in for 10,000 and 100,000)"
    title = "Targets" + (quick if plan.sizes[-1] < FULL.sizes[1] else "")
    passed = report(repeat(options.runs, lambda: anyio.run(run, plan, backend=BACKEND)), title)
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
