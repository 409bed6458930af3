"""Benchmark recall quality and latency on written agent memories: lexical, by meaning, references.

Run from the repository root::

    .venv/bin/python benchmarks/recall.py            # full run: 151 questions, 601 memories
    .venv/bin/python benchmarks/recall.py --quick    # a smoke run: two users' questions
    .venv/bin/python benchmarks/recall.py --runs 3   # latency as the median of 3 runs
    .venv/bin/python benchmarks/recall.py --misses   # also list what each method missed

The dataset is `benchmarks/data/agent-memories/` (its README says how it was written): six
users' memories, and questions labelled by kind, each with the ids of the memories that
answer it. A run builds the starter profile `mnemon init` writes (layered Strategy, the
default `spaces` Source on embedded SQLite) in a temporary folder, imports each user's
memories with the Source's management `import` into that user's scope, and asks every
question in its user's scope, one turn per question, on the asyncio backend:

- **lexical @10** (the baseline): the `source:spaces/recall` route with `limit` 10, read
  through a second host on the same store whose Strategy routes it without a policy;
- **model view**: the same route read as the model reads it in the starter profile, the first
  recall of a turn under the layered Strategy's policy (at most 8 results, 3,600 characters);
- **product hybrid @10**: the same route read once `mnemon_embedder_minilm` is installed
  beside the Source, so recall fuses the Provider's keyword search with its vector search
  (the figure the Source's own recall by meaning gives); the memories were imported before
  the embedder was there, so their vectors come from the Source's catch-up (untimed);
- **model view, MiniLM installed**: the starter profile's first recall of a turn, as above,
  with the embedder mounted into the starter host;
- **reference dense** and **reference hybrid**, computed *beside* the product, as yardsticks:
  memories and questions embedded with `mnemon_embedder_minilm` through `mnemon.sdk.Embedding`,
  exact cosine search over the user's memories with numpy, and reciprocal rank fusion
  (k = 60) of the lexical top 50 (the Provider's own search: the route returns at most 20)
  and the dense top 50.

The four methods that need the model are skipped, with a note, when the embedder is not
installed.

Figures per method and kind: recall@5 and recall@10 (the share of a question's answer ids in
the first 5 or 10 results), hit@10 (at least one answer in the first 10), MRR@10, and the
latency of one read (p50 and p95; with MiniLM, query encoding included, and for the
reference hybrid the lexical search too). Questions of kind `negative` have no answer: for them the
benchmark reports how often something is still returned. Quality is deterministic (the same
store, queries and model every run); `--runs N` repeats the whole run and reports the medians
of the latency figures. The exit status is 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mnemon_source_spaces as spaces
from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, SearchRequest
from mnemon_source_spaces._grants import parent_of

import mnemon.sdk
from mnemon._cli._starter import starter_profile

BACKEND = "asyncio"
DATA = Path(__file__).resolve().parent / "data" / "agent-memories"
KINDS = ("paraphrase", "multi-hop", "temporal", "keyword", "negative")
ANSWERABLE = KINDS[:-1]
WORKSPACE = "bench"
SPACE = "personal"  # the starter profile's default space; recall reads every visible space
KEY = "source:spaces"
ROUTE = f"{KEY}/recall"
LEXICAL_LIMIT = 10
FUSION_DEPTH = 50
RRF_K = 60
IMPORT_BATCH = 1_000
WARMUP = 10  # questions asked of every method, untimed, before the measured pass
QUICK_USERS = ("ada", "bruno")
METHODS = ("lexical", "model", "product", "product-model", "dense", "hybrid")
LABELS = {
    "lexical": "lexical @10 (baseline)",
    "model": "model view (first recall)",
    "product": "product hybrid @10 (MiniLM installed)",
    "product-model": "model view, MiniLM installed",
    "dense": "reference dense (MiniLM, cosine)",
    "hybrid": f"reference hybrid (RRF k={RRF_K})",
}
#: the methods that need the MiniLM embedder installed
WITH_MODEL = ("product", "product-model", "dense", "hybrid")
REFERENCES = ("dense", "hybrid")

# ------------------------------------------------------------------------- the dataset


@dataclass(frozen=True)
class Memory:
    """One memory of the dataset, as `memories.jsonl` holds it."""

    id: str
    user: str
    text: str
    created_at: str


@dataclass(frozen=True)
class Question:
    """One question, asked in its user's scope, and the memories that answer it."""

    id: str
    user: str
    question: str
    answers: tuple[str, ...]
    kind: str


@dataclass(frozen=True)
class Dataset:
    """The memories and the questions of one run."""

    memories: tuple[Memory, ...]
    questions: tuple[Question, ...]

    @property
    def users(self) -> tuple[str, ...]:
        """The users, in the order their first memory appears."""
        return tuple(dict.fromkeys(memory.user for memory in self.memories))

    def only(self, users: Sequence[str]) -> Dataset:
        """The memories and questions of `users` alone."""
        return Dataset(
            tuple(memory for memory in self.memories if memory.user in users),
            tuple(question for question in self.questions if question.user in users),
        )


def _records(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def load_dataset(folder: Path = DATA) -> Dataset:
    """Read `memories.jsonl` and `questions.jsonl`, checking every answer id.

    Raises:
        ValueError: an id is repeated, a question's kind is unknown, a negative question has
            answers (or another has none, or more than 3), or an answer id is not a memory of
            the question's user.
    """
    memories = tuple(Memory(**record) for record in _records(folder / "memories.jsonl"))
    owners: dict[str, str] = {}
    for memory in memories:
        if memory.id in owners:
            raise ValueError(f"memory {memory.id!r} appears twice")
        owners[memory.id] = memory.user
    questions = []
    for record in _records(folder / "questions.jsonl"):
        question = Question(**{**record, "answers": tuple(record["answers"])})
        where = f"question {question.id!r}"
        if question.kind not in KINDS:
            raise ValueError(f"{where}: unknown kind {question.kind!r}")
        wanted = (0, 0) if question.kind == "negative" else (1, 3)
        if not wanted[0] <= len(question.answers) <= wanted[1]:
            raise ValueError(f"{where}: {len(question.answers)} answers for a {question.kind}")
        for answer in question.answers:
            if owners.get(answer) != question.user:
                raise ValueError(f"{where}: {answer!r} is not a memory of {question.user!r}")
        questions.append(question)
    if len({question.id for question in questions}) != len(questions):
        raise ValueError("a question id appears twice")
    return Dataset(memories, tuple(questions))


# ------------------------------------------------------------------------- the hosts


class EveryRoute:
    """A Strategy plugin routing every available Source with every route, without a policy."""

    definition = mnemon.sdk.define_memory_strategy(
        {
            "type_id": "bench-recall",
            "package_name": "mnemon-bench-recall",
            "supported_source_roles": ["*"],
            "max_sources": 4,
            "max_routes": 16,
            "max_actions": 16,
        },
        lambda request, sources, contributions: {
            "strategy_type_id": "bench-recall",
            "sources": [
                {
                    "source_key": source.key,
                    "route_ids": [route.id for route in source.routes],
                    "action_ids": [],
                }
                for source in sources
                if source.facts.availability != "unavailable"
            ],
            "explanation": "bench: every route, no policy",
        },
    )

    def apply(self, ctx: mnemon.sdk.PluginContext) -> None:
        """Install the Strategy for this entry."""
        mnemon.sdk.install_memory(ctx, strategies=[self.definition])


def scope_of(user: str) -> dict[str, str]:
    """A user's scope, as the starter benchmark's turns carry it."""
    return {"user_id": user, "workspace": WORKSPACE}


def parent_for(user: str) -> str:
    """The parent the `spaces` Source derives for the user's `personal` space."""
    partition = mnemon.sdk.scope_partition(mnemon.Scope(**scope_of(user)), ("user_id",))
    assert partition is not None
    return parent_of(partition, SPACE)


def memory_id(handle: str) -> str:
    """The memory id a recall item's handle (`<memory id>~<mac>`) names."""
    return handle.split("~", 1)[0]


async def import_memories(host: mnemon.MemoryHost, dataset: Dataset) -> dict[str, str]:
    """Import each user's memories through the management plane; store id -> dataset id.

    The dataset's `created_at` is not imported (`import` takes text, tags, entities and a
    key): every memory is stored with the time of the run, so time questions can be
    answered only from what the text says.
    """
    ids: dict[str, str] = {}
    for user in dataset.users:
        mine = [memory for memory in dataset.memories if memory.user == user]
        client = host.management_client(KEY, scope_of(user))
        for start in range(0, len(mine), IMPORT_BATCH):
            batch = mine[start : start + IMPORT_BATCH]
            result = await client.mutate(
                "import",
                {
                    "space": SPACE,
                    "memories": [{"text": m.text, "idempotency_key": m.id} for m in batch],
                },
                confirmed=True,
                expected_revision=await client.revision(),
            )
            output = result.output
            if output["stored"] != len(batch):
                raise RuntimeError(f"import for {user!r}: {output['refused']} refused")
            for item in output["results"]:
                ids[item["id"]] = batch[item["index"]].id
    return ids


# ------------------------------------------------------------------------- the references


@dataclass
class References:
    """Dense vectors of the memories, per user, and the embedding that made them.

    Outside the product: the `spaces` Source does not keep vectors yet, so these are
    computed here, beside it, for the coming hybrid recall to be compared with.
    """

    embedding: mnemon.sdk.Embedding
    space: str
    runtime: Any
    ids: dict[str, list[str]] = field(default_factory=dict)  # user -> memory id of each row
    matrices: dict[str, Any] = field(default_factory=dict)  # user -> float32 (rows, dimensions)
    encode_seconds: float = 0.0

    async def add(self, dataset: Dataset) -> None:
        """Embed every memory of `dataset`, in batches of the embedder's `max_batch`."""
        import numpy as np

        batch = self.embedding.max_batch(self.space)
        started = time.perf_counter()
        for user in dataset.users:
            mine = [memory for memory in dataset.memories if memory.user == user]
            rows: list[Any] = []
            owners: list[str] = []
            for start in range(0, len(mine), batch):
                part = mine[start : start + batch]
                answer = await self.embedding.segment_and_embed(
                    {
                        "idempotency_key": f"{user}-{start}",
                        "parts": [{"key": memory.id, "text": memory.text} for memory in part],
                        "spaces": [self.space],
                    }
                )
                for segment in answer.segments:
                    vector = np.asarray(segment.vectors[self.space], dtype=np.float32)
                    rows.append(vector / np.linalg.norm(vector))
                    owners.append(segment.part_key)
            self.ids[user] = owners
            self.matrices[user] = np.vstack(rows)
        self.encode_seconds = time.perf_counter() - started

    async def query(self, text: str) -> Any:
        """The question's unit vector."""
        import numpy as np

        vector = np.asarray(await self.embedding.embed_query(self.space, text), dtype=np.float32)
        return vector / np.linalg.norm(vector)

    def search(self, user: str, vector: Any, depth: int) -> tuple[tuple[str, ...], float]:
        """The user's `depth` nearest memories by cosine, best first, and the best cosine."""
        import numpy as np

        scores = self.matrices[user] @ vector
        owners = self.ids[user]
        # a memory longer than one window has a row per segment: it ranks by its best one
        ranking: dict[str, None] = {}
        for row in np.argsort(-scores, kind="stable"):
            ranking.setdefault(owners[int(row)])
            if len(ranking) == depth:
                break
        return tuple(ranking), float(scores.max())

    def dispose(self) -> None:
        """Release the model."""
        dispose = getattr(self.runtime, "dispose", None)
        if dispose is not None:
            dispose()


def references_unavailable() -> str | None:
    """Why the reference columns cannot be computed here, or None when they can."""
    for module in ("numpy", "mnemon_embedder_minilm"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install mnemon-embedder-minilm)"
    return None


async def open_references(dataset: Dataset) -> References:
    """Load MiniLM through `mnemon.sdk.Embedding` and embed every memory of `dataset`."""
    from mnemon_embedder_minilm import MINILM, SPACE_ID

    runtime = MINILM.create({})
    embedding = mnemon.sdk.Embedding([(MINILM.manifest, runtime)])
    references = References(embedding, SPACE_ID, runtime)
    # the first call loads the model, untimed: segment_and_embed's deadline allows for a cold
    # disk, a query's does not
    warm_up = {"idempotency_key": "warm-up", "parts": [{"key": "w", "text": "warm up"}]}
    await embedding.segment_and_embed({**warm_up, "spaces": [SPACE_ID]})
    await embedding.embed_query(SPACE_ID, "warm up")
    await references.add(dataset)
    return references


def fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> tuple[str, ...]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the rankings."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return tuple(sorted(scores, key=lambda item: (-scores[item], item)))


# ------------------------------------------------------------------------- one run


@dataclass
class Run:
    """What one run measured: each method's ranking and read time for every question."""

    rankings: dict[str, dict[str, tuple[str, ...]]] = field(
        default_factory=lambda: {method: {} for method in METHODS}
    )
    seconds: dict[str, dict[str, float]] = field(
        default_factory=lambda: {method: {} for method in METHODS}
    )
    encode: dict[str, float] = field(default_factory=dict)  # question id -> query encoding
    lexical_top: dict[str, float] = field(default_factory=dict)  # the top-50 search, seconds
    top_tier: dict[str, str] = field(default_factory=dict)  # lexical: the first item's tier
    top_cosine: dict[str, float] = field(default_factory=dict)  # dense: the best cosine


async def route_read(
    host: mnemon.MemoryHost, question: Question, payload: Mapping[str, Any], ids: Mapping[str, str]
) -> tuple[tuple[str, ...], float, str | None]:
    """One recall in its own turn: the dataset ids best first, the read's time, the top tier."""
    async with host.turn(scope=scope_of(question.user)) as turn:
        started = time.perf_counter()
        evidence = await turn.execute_route(ROUTE, dict(payload))
        elapsed = time.perf_counter() - started
    ranking = tuple(ids[memory_id(item.id)] for item in evidence.items)
    tier = evidence.items[0].provenance.get("tier") if evidence.items else None
    return ranking, elapsed, None if tier is None else str(tier)


async def ask(
    run: Run,
    question: Question,
    plain: mnemon.MemoryHost,
    starter: mnemon.MemoryHost,
    adapter: Any,
    ids: Mapping[str, str],
    references: References | None,
) -> None:
    """Ask one question of every method, one after another, and record what came back."""
    qid = question.id
    ranking, seconds, tier = await route_read(
        plain, question, {"query": question.question, "limit": LEXICAL_LIMIT}, ids
    )
    run.rankings["lexical"][qid], run.seconds["lexical"][qid] = ranking, seconds
    if tier is not None:
        run.top_tier[qid] = tier
    ranking, seconds, _ = await route_read(starter, question, {"query": question.question}, ids)
    run.rankings["model"][qid], run.seconds["model"][qid] = ranking, seconds
    if references is None:
        return
    started = time.perf_counter()
    result = await adapter.search(
        SearchRequest(
            parents=(parent_for(question.user),), query=question.question, limit=FUSION_DEPTH
        )
    )
    lexical_seconds = time.perf_counter() - started
    lexical = tuple(ids[hit.memory.id] for hit in result.hits)
    started = time.perf_counter()
    vector = await references.query(question.question)
    encoded = time.perf_counter()
    dense, cosine = references.search(question.user, vector, FUSION_DEPTH)
    searched = time.perf_counter()
    hybrid = fuse([lexical, dense])
    fused = time.perf_counter()
    run.encode[qid], run.lexical_top[qid] = encoded - started, lexical_seconds
    run.top_cosine[qid] = cosine
    run.rankings["dense"][qid], run.seconds["dense"][qid] = dense, searched - started
    run.rankings["hybrid"][qid] = hybrid
    # measured one after another; a product could search both ways at once
    run.seconds["hybrid"][qid] = lexical_seconds + (searched - started) + (fused - searched)


def without_vectors(store: Path) -> int:
    """How many memories of the store have no vector yet."""
    connection = sqlite3.connect(store)
    try:
        count: int = connection.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors v WHERE v.seq = m.seq)"
        ).fetchone()[0]
        return count
    finally:
        connection.close()


async def ask_the_product(
    run: Run,
    dataset: Dataset,
    store: Path,
    config: Mapping[str, Any],
    starter: mnemon.MemoryHost,
    ids: Mapping[str, str],
) -> None:
    """The product's own recall by meaning: MiniLM installed beside the spaces Source.

    The memories were imported without an embedder, so their vectors come from the Source's
    catch-up, which the warm-up recalls drive until every memory has them (untimed).
    """
    import mnemon_embedder_minilm

    await starter.mount(mnemon_embedder_minilm, instance_id="minilm")
    async with mnemon.MemoryHost() as meaning:
        await meaning.mount(mnemon_embedder_minilm, instance_id="minilm")
        await meaning.mount(spaces, instance_id="spaces", config=dict(config))
        await meaning.mount(EveryRoute(), instance_id="strategy")
        for _ in range(1_000):
            if not without_vectors(store):
                break
            for user in dataset.users:
                async with meaning.turn(scope=scope_of(user)) as turn:
                    await turn.execute_route(ROUTE, {"query": "catch up", "limit": 1})
        else:
            raise RuntimeError("the Source's catch-up did not give every memory its vectors")
        for question in dataset.questions[:WARMUP]:
            await route_read(meaning, question, {"query": question.question}, ids)
            await route_read(starter, question, {"query": question.question}, ids)
        for question in dataset.questions:
            ranking, seconds, _ = await route_read(
                meaning, question, {"query": question.question, "limit": LEXICAL_LIMIT}, ids
            )
            run.rankings["product"][question.id] = ranking
            run.seconds["product"][question.id] = seconds
            ranking, seconds, _ = await route_read(
                starter, question, {"query": question.question}, ids
            )
            run.rankings["product-model"][question.id] = ranking
            run.seconds["product-model"][question.id] = seconds


async def one_run(dataset: Dataset, references: References | None) -> Run:
    """Build a fresh profile, import the memories, and ask every question of every method."""
    root = Path(tempfile.mkdtemp(prefix="mnemon-bench-recall-"))
    run = Run()
    try:
        (root / "mnemon.toml").write_text(starter_profile("data"), encoding="utf-8")
        async with mnemon.load_profile(root / "mnemon.toml").open_host() as starter:
            ids = await import_memories(starter, dataset)
            # the baseline host reads the same store file (same entry id, same spaces)
            plain = mnemon.MemoryHost()
            config = {
                "data_dir": str(root / "data"),
                "default_space": SPACE,
                "spaces": [
                    {"name": SPACE, "writable": True},
                    {"name": "project", "writable": True, "partition_by": ["workspace"]},
                ],
            }
            store = root / "data" / "sources" / "spaces" / "spaces" / "spaces.sqlite3"
            if not store.is_file():  # opening the Provider on a missing path would make one
                raise RuntimeError(f"the starter profile's store is not at {store}")
            async with AsyncExitStack() as stack:
                stack.push_async_callback(plain.dispose)
                adapter: Any = await SQLITE_PROVIDER.open(
                    ProviderInit(
                        instance_key="bench-recall",
                        data_directory=str(root),
                        configuration={"path": str(store)},
                    )
                )
                stack.push_async_callback(adapter.dispose)
                await plain.mount(spaces, instance_id="spaces", config=config)
                await plain.mount(EveryRoute(), instance_id="strategy")
                for question in dataset.questions[:WARMUP]:
                    await ask(Run(), question, plain, starter, adapter, ids, references)
                for question in dataset.questions:
                    await ask(run, question, plain, starter, adapter, ids, references)
                if references is not None:
                    await ask_the_product(run, dataset, store, config, starter, ids)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return run


# ------------------------------------------------------------------------- figures


def recall_at(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    """The share of `answers` among the first `k` of `ranking`."""
    return len(set(ranking[:k]) & set(answers)) / len(answers)


def reciprocal_rank(ranking: Sequence[str], answers: Sequence[str], k: int) -> float:
    """1 / the rank of the first answer within the first `k`, else 0."""
    for rank, item in enumerate(ranking[:k], start=1):
        if item in answers:
            return 1.0 / rank
    return 0.0


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The sample at `fraction` (nearest rank), in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1_000


@dataclass(frozen=True)
class Quality:
    """Percentages over a group of questions (MRR@10 times 100)."""

    recall5: float
    recall10: float
    hit10: float
    mrr10: float

    @property
    def figures(self) -> tuple[float, float, float, float]:
        """The four figures, in the table's order."""
        return (self.recall5, self.recall10, self.hit10, self.mrr10)


def quality(rankings: Mapping[str, tuple[str, ...]], questions: Sequence[Question]) -> Quality:
    """The quality figures of one method over `questions` (all answerable)."""
    n = len(questions)
    pairs = [(rankings[q.id], q.answers) for q in questions]
    return Quality(
        recall5=100 * sum(recall_at(r, a, 5) for r, a in pairs) / n,
        recall10=100 * sum(recall_at(r, a, 10) for r, a in pairs) / n,
        hit10=100 * sum(recall_at(r, a, 10) > 0 for r, a in pairs) / n,
        mrr10=100 * sum(reciprocal_rank(r, a, 10) for r, a in pairs) / n,
    )


def latency(runs: Sequence[Run], method: str, questions: Sequence[Question]) -> tuple[float, float]:
    """p50 and p95 of one method's reads over `questions` in ms: medians over the runs."""
    wanted = [q.id for q in questions]
    p50 = statistics.median(
        percentile([run.seconds[method][q] for q in wanted], 0.5) for run in runs
    )
    p95 = statistics.median(
        percentile([run.seconds[method][q] for q in wanted], 0.95) for run in runs
    )
    return p50, p95


def table(runs: Sequence[Run], dataset: Dataset, methods: Sequence[str]) -> list[list[str]]:
    """The rows of the result table: per kind, the baseline and every other method beside it."""
    first = runs[0]
    rows = []
    groups: list[tuple[str, list[Question]]] = [
        ("all answerable", [q for q in dataset.questions if q.kind in ANSWERABLE])
    ]
    groups += [(kind, [q for q in dataset.questions if q.kind == kind]) for kind in ANSWERABLE]
    for name, questions in groups:
        if not questions:
            continue
        base = quality(first.rankings["lexical"], questions)
        base_p50, base_p95 = latency(runs, "lexical", questions)
        for method in methods:
            figures = quality(first.rankings[method], questions)
            p50, p95 = latency(runs, method, questions)
            cells = []
            for value, reference in zip(figures.figures, base.figures, strict=True):
                cells.append(
                    f"{value:5.1f}"
                    if method == "lexical"
                    else f"{value:5.1f} ({value - reference:+5.1f})"
                )
            times = [f"{p50:6.2f}", f"{p95:6.2f}"]
            if method != "lexical":
                times = [
                    f"{p50:6.2f} ({p50 / base_p50:4.1f}x)",
                    f"{p95:6.2f} ({p95 / base_p95:4.1f}x)",
                ]
            label = f"{name} ({len(questions)})" if method == "lexical" else ""
            rows.append([label, LABELS[method], *cells, *times])
    return rows


def print_table(rows: Sequence[Sequence[str]]) -> None:
    headers = ("questions", "method", "R@5", "R@10", "hit@10", "MRR@10", "p50 ms", "p95 ms")
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for number, line in enumerate((headers, *rows)):
        if number > 1 and line[0]:
            print()
        cells = zip(line, widths, strict=True)
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(cells)))


#: the ranked methods whose recall is shown by the number of results read
CURVE_METHODS = ("lexical", "product")
CURVE_COUNTS = (1, 2, 3, 4, 5, 6, 8, 10)


def print_curve(run: Run, dataset: Dataset, methods: Sequence[str]) -> None:
    """Recall@k of the answerable questions for k results, and the characters those k take.

    What a model view of k results would find (its ranking is the route's at 10, cut), to
    choose a turn policy's result count by measurement.
    """
    answerable = [q for q in dataset.questions if q.kind in ANSWERABLE]
    length = {memory.id: len(memory.text) for memory in dataset.memories}
    shown = [m for m in CURVE_METHODS if m in methods]
    if not shown:
        return
    print()
    print("Recall of the answerable questions by the number of results read, percent:")
    print("  " + " " * 38 + "".join(f"{'k=' + str(k):>8}" for k in CURVE_COUNTS))
    for method in shown:
        rankings = run.rankings[method]
        cells = [
            100 * statistics.fmean(recall_at(rankings[q.id], q.answers, k) for q in answerable)
            for k in CURVE_COUNTS
        ]
        print(f"  {LABELS[method]:<38}" + "".join(f"{cell:8.1f}" for cell in cells))
    product = run.rankings[shown[-1]]
    characters = [
        statistics.median(sum(length[i] for i in product[q.id][:k]) for q in answerable)
        for k in CURVE_COUNTS
    ]
    print(f"  {'characters of those k, median':<38}" + "".join(f"{c:8.0f}" for c in characters))


def print_negatives(runs: Sequence[Run], dataset: Dataset, methods: Sequence[str]) -> None:
    negatives = [q for q in dataset.questions if q.kind == "negative"]
    if not negatives:
        return
    first = runs[0]
    print()
    print(f"Negative questions ({len(negatives)}; nothing answers them), report only:")
    for method in methods:
        returned = sum(1 for q in negatives if first.rankings[method][q.id])
        line = f"  {LABELS[method]:<34} returned something for {returned} of {len(negatives)}"
        if method == "lexical":
            tiers = [first.top_tier.get(q.id) for q in negatives]
            confident = sum(1 for tier in tiers if tier in ("strong", "related"))
            line += f"; first result tier strong or related for {confident}"
        if method == "dense":
            answerable = [q.id for q in dataset.questions if q.kind in ANSWERABLE]
            here = statistics.median(first.top_cosine[q.id] for q in negatives)
            there = statistics.median(first.top_cosine[q] for q in answerable)
            line += (
                f" (it always ranks); best cosine, median: {here:.2f} here against "
                f"{there:.2f} for answerable questions"
            )
        print(line)


def print_misses(run: Run, dataset: Dataset, methods: Sequence[str]) -> None:
    print()
    print("Per question: answers found in the first 10 (of how many), by method")
    print("  " + "  ".join(f"{m:>7}" for m in methods) + "  question")
    for q in dataset.questions:
        if q.kind == "negative":
            continue
        found = [len(set(run.rankings[m][q.id][:10]) & set(q.answers)) for m in methods]
        marks = "  ".join(f"{n:>5}/{len(q.answers)}" for n in found)
        print(f"  {marks}  {q.id} {q.kind:<10} {q.question}")


def print_run(number: int, run: Run, methods: Sequence[str]) -> None:
    parts = []
    for method in methods:
        samples = list(run.seconds[method].values())
        parts.append(
            f"{method} p50 {percentile(samples, 0.5):.2f} / p95 {percentile(samples, 0.95):.2f} ms"
        )
    if run.encode:
        samples = list(run.encode.values())
        parts.append(
            f"query encoding p50 {percentile(samples, 0.5):.2f} / "
            f"p95 {percentile(samples, 0.95):.2f} ms"
        )
    print(f"run {number}: " + "; ".join(parts))


def same_quality(runs: Sequence[Run], methods: Sequence[str]) -> bool:
    """Whether every run ranked every question the same way (quality is deterministic)."""
    return all(run.rankings[m] == runs[0].rankings[m] for run in runs for m in methods)


async def measure(dataset: Dataset, runs: int, misses: bool) -> None:
    """Run the benchmark `runs` times and print the table."""
    unavailable = references_unavailable()
    references = None if unavailable else await open_references(dataset)
    methods = METHODS if references else tuple(m for m in METHODS if m not in WITH_MODEL)
    if references is not None:
        rate = len(dataset.memories) / references.encode_seconds
        print(f"embedded {len(dataset.memories)} memories with MiniLM: {rate:,.0f} memories/s")
    done: list[Run] = []
    try:
        for number in range(1, runs + 1):
            done.append(await one_run(dataset, references))
            print_run(number, done[-1], methods)
    finally:
        if references is not None:
            references.dispose()
    answerable = sum(1 for q in dataset.questions if q.kind in ANSWERABLE)
    print()
    print(
        f"Recall of {answerable} answerable questions, percent (MRR@10 x 100); in brackets, "
        "points against the lexical baseline"
    )
    latency_note = f"median of {runs} runs" if runs > 1 else "one run"
    print(
        f"Latency of one read, ms ({latency_note}); in brackets, times the baseline's. "
        "References: query encoding + search (hybrid: + the lexical top-50 search)"
    )
    print_table(table(done, dataset, methods))
    print_curve(done[0], dataset, methods)
    print_negatives(done, dataset, methods)
    print()
    print(
        "The model view is what the starter profile's layered Strategy gives the model on "
        "its first recall of a turn, within that policy's result and character ceilings."
    )
    if references is None:
        print(f"Methods with MiniLM skipped: {unavailable}.")
    else:
        encodes = [percentile(list(run.encode.values()), q) for run in done for q in (0.5, 0.95)]
        p50 = statistics.median(encodes[0::2])
        p95 = statistics.median(encodes[1::2])
        tops = [percentile(list(run.lexical_top.values()), 0.5) for run in done]
        print(
            "Reference dense and hybrid are computed beside the product, as yardsticks: "
            "MiniLM through mnemon.sdk.Embedding, exact cosine with numpy, "
            f"RRF k={RRF_K} of the Provider's lexical top {FUSION_DEPTH} and the dense top "
            f"{FUSION_DEPTH}. Query encoding p50 {p50:.2f} ms, p95 {p95:.2f} ms; the lexical "
            f"top-{FUSION_DEPTH} search p50 {statistics.median(tops):.2f} ms."
        )
    if runs == 1:
        print("Quality is deterministic (same store, questions and model); --runs N checks it.")
    elif same_quality(done, methods):
        print(f"Quality is deterministic: all {runs} runs ranked every question alike.")
    else:
        print(f"WARNING: quality should be deterministic, but the {runs} runs ranked differently.")
    if misses:
        print_misses(done[0], dataset, methods)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two users' questions, a smoke run")
    parser.add_argument("--runs", type=int, default=1, help="runs; latency is their median")
    parser.add_argument("--misses", action="store_true", help="list each question's answers found")
    options = parser.parse_args(argv)
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    dataset = load_dataset()
    if options.quick:
        dataset = dataset.only(QUICK_USERS)
    print(
        f"mnemon recall benchmark: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}, {os.cpu_count()} CPUs), SQLite {sqlite3.sqlite_version}; "
        f"{len(dataset.memories)} memories of {len(dataset.users)} users, "
        f"{len(dataset.questions)} questions; load average {os.getloadavg()[0]:.1f}"
    )
    anyio.run(measure, dataset, options.runs, options.misses, backend=BACKEND)
    return 0


if __name__ == "__main__":
    sys.exit(main())
