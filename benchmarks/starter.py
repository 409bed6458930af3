"""Benchmark the starter profile's turn as a user runs it: size of the workspace, and load.

Run from the repository root::

    .venv/bin/python benchmarks/starter.py            # full run
    .venv/bin/python benchmarks/starter.py --quick    # a short smoke run
    .venv/bin/python benchmarks/starter.py --check    # exit 1 when a target fails
    .venv/bin/python benchmarks/starter.py --runs 3   # three full runs, judged by their medians

What is measured, on the asyncio backend, with the profile `mnemon init` writes (runtime,
documents and spaces under the layered Strategy) loaded with `load_profile(...).open_host()`:

- Workspace size: one turn with a recall (`source:spaces/recall`) for a user whose workspace
  holds 20, 200 and 1,000 Markdown documents; the median of sequential turns, taken once the
  files have been left alone for 2 s (`settle`). Target: the 1,000-document turn at most
  1.5x the 20-document turn.
- Concurrency: the same turn for many distinct users at once (1,000, or 100 with `--quick`),
  against the same turns one after another. Targets: aggregate throughput at least 1.5x the
  sequential throughput, p99 at most 3x p50, no error, no Source dropped.
- Overload: twice as many turns at once. Target: no View is built without a Source that
  missed its deadline; a turn beyond the host's `max_concurrent_compositions` is refused with
  `CompositionUnavailable` instead.

Concurrency and overload run twice, in a fresh host each: with the profile's `collector`
left at "python" (Python's garbage collector as it is) and set to "serving" (start-up
objects frozen, a young-generation threshold of 20,000; see `docs/hosting.md`). Both
measure their one-after-another and at-once turns under the same setting.

With `--runs N`, the targets are judged by the median of N full runs (see `targets.py`).
The exit status is 0 unless `--check` is given, in which case a failed target exits 1.
"""

from __future__ import annotations

import argparse
import gc
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from targets import Check, add_options, repeat, report

import mnemon
from mnemon._cli._starter import starter_profile

BACKEND = "asyncio"
SIZES = (20, 200, 1_000)
MAX_SIZE_RATIO = 1.5
MIN_CONCURRENCY_GAIN = 1.5
MAX_TAIL_RATIO = 3.0
WORKSPACE = "bench"
SETTLE_SECONDS = 2.1
# the load runs once with Python's collector as it is and once with the host's serving setup
COLLECTORS = ("python", "serving")


@dataclass(frozen=True)
class Plan:
    """How long to measure."""

    turns: int  # sequential turns per workspace size
    in_flight: int  # turns at once in the concurrency run


FULL = Plan(turns=200, in_flight=1_000)
QUICK = Plan(turns=30, in_flight=100)


def allow(offer: object) -> bool:
    """Authorize every write the benchmark itself makes (seeding)."""
    return True


def scope_of(user: int) -> dict[str, str]:
    return {"user_id": f"user-{user}", "workspace": WORKSPACE}


async def seed(host: mnemon.MemoryHost, folder: Path, documents: int) -> None:
    """Give the workspace `documents` Markdown documents and user 0 a few memories.

    The first document is written by the Source's own `create` action; the rest are copies of
    its file under new ids (what a person's editor or `git pull` does to the folder).
    """
    async with host.turn(scope=scope_of(0)) as turn:
        for index in range(3):
            await turn.execute_action(
                "source:spaces/remember",
                {"text": f"Ada's billing review number {index} covers the ledgers."},
                allow,
            )
        await turn.execute_action(
            "source:documents/create",
            {"title": "Ledger 0", "body": "The ledgers of billing, reconciled monthly."},
            allow,
        )
    copy_documents(folder, documents)


def copy_documents(folder: Path, documents: int) -> None:
    """Copy the one document file under `folder` until there are `documents` of them."""
    written = list(folder.rglob("doc-*.md"))
    if len(written) != 1:
        raise RuntimeError(f"expected one document file, found {len(written)}")
    template = written[0].read_bytes()
    for index in range(1, documents):
        written[0].with_name(f"doc-{index:024x}.md").write_bytes(
            template.replace(b"Ledger 0", f"Ledger {index}".encode())
        )


async def one_turn(host: mnemon.MemoryHost, user: int) -> tuple[float, mnemon.View]:
    started = time.perf_counter()
    async with host.turn(scope=scope_of(user)) as turn:
        await turn.execute_route("source:spaces/recall", {"query": "billing ledgers"})
        view = turn.view
    return time.perf_counter() - started, view


def dropped(view: mnemon.View) -> int:
    """Sources left out of the View because a read timed out or failed."""
    return sum(
        1 for item in view.diagnostics if item.code.startswith(("source-facts-", "source-project-"))
    )


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1_000


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def sized_turns(root: Path, documents: int, plan: Plan) -> tuple[float, int]:
    """Median turn (ms) at `documents`, and the SQLite connections one unchanged turn opens."""
    folder = root / f"size-{documents}"
    folder.mkdir()
    (folder / "mnemon.toml").write_text(starter_profile("data"), encoding="utf-8")
    async with mnemon.load_profile(folder / "mnemon.toml").open_host() as host:
        await seed(host, folder / "data", documents)
        for _ in range(10):  # warm-up: the first turn indexes the copied files
            _, view = await one_turn(host, 0)
        if dropped(view):
            raise RuntimeError("a Source was dropped while warming up")
        await settle(host)
        gc.collect()
        samples = [(await one_turn(host, 0))[0] for _ in range(plan.turns)]
        connections = await connections_per_turn(host)
    return median_ms(samples), connections


async def settle(host: mnemon.MemoryHost) -> None:
    """Leave the files alone long enough for their stat to be trusted, then take one turn.

    The documents and runtime Sources trust a folder's or file's stat only once it has not
    changed for 2 s (a change within one tick of the file system's clock would not show);
    until then they scan and read again every turn. A workspace between edits is settled.
    """
    await anyio.sleep(SETTLE_SECONDS)
    await one_turn(host, 0)


async def connections_per_turn(host: mnemon.MemoryHost) -> int:
    """How many SQLite connections one turn opens when nothing changed since the last."""
    opened = 0
    original = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        nonlocal opened
        opened += 1
        connection: sqlite3.Connection = original(*args, **kwargs)
        return connection

    sqlite3.connect = counting  # type: ignore[assignment]
    try:
        await one_turn(host, 0)
    finally:
        sqlite3.connect = original
    return opened


class CollectorClock:
    """Time spent in Python's cyclic garbage collector while it is entered (`gc.callbacks`).

    Turns at once keep hundreds of objects alive each, so the collector runs (and scans a
    larger heap) far more often than for the same turns one after another, whose objects are
    freed by reference counting as each turn ends.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0  # collections of the oldest generation, which scan every tracked object
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full += info["generation"] == 2

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


@dataclass(frozen=True)
class Load:
    """The outcome of many turns at once."""

    seconds: float
    samples: tuple[float, ...]
    errors: int
    refused: int
    dropped: int


async def load(host: mnemon.MemoryHost, users: int) -> Load:
    samples: list[float] = []
    errors = refused = lost = 0

    async def run(user: int) -> None:
        nonlocal errors, refused, lost
        try:
            duration, view = await one_turn(host, user)
        except mnemon.CompositionUnavailable:
            refused += 1
            return
        except Exception:
            errors += 1
            return
        samples.append(duration)
        lost += dropped(view)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for user in range(users):
            group.start_soon(run, user)
    return Load(time.perf_counter() - started, tuple(samples), errors, refused, lost)


async def under_load(root: Path, plan: Plan, collector: str) -> list[Check]:
    """Print the load section for one `collector` setting and return its checks."""
    folder = root / f"load-{collector}"
    folder.mkdir()
    profile = f'collector = "{collector}"\n' + starter_profile("data")
    (folder / "mnemon.toml").write_text(profile, encoding="utf-8")
    async with mnemon.load_profile(folder / "mnemon.toml").open_host() as host:
        await seed(host, folder / "data", SIZES[0])
        users = plan.in_flight
        for user in range(users * 2):  # every user's partitions exist before timing
            await one_turn(host, user)
        await settle(host)
        gc.collect()
        started = time.perf_counter()
        with CollectorClock() as sequential_gc:
            sequential = [(await one_turn(host, user))[0] for user in range(users)]
        sequential_rate = users / (time.perf_counter() - started)
        gc.collect()  # what one-after-another turns left is not counted against the next run
        with CollectorClock() as concurrent_gc:
            concurrent = await load(host, users)
        gc.collect()
        overload = await load(host, users * 2)
    rate = len(concurrent.samples) / concurrent.seconds
    p50 = percentile(concurrent.samples, 0.5) if concurrent.samples else float("nan")
    p99 = percentile(concurrent.samples, 0.99) if concurrent.samples else float("nan")
    print()
    print(f'{users:,} users, one turn with a recall each; collector = "{collector}"')
    print(
        f"  one after another  {sequential_rate:8,.0f} turns/s  p50 {median_ms(sequential):7.2f} ms"
    )
    print(
        f"  all at once        {rate:8,.0f} turns/s  p50 {p50 * 1000:7.2f} ms  "
        f"p99 {p99 * 1000:7.2f} ms  errors {concurrent.errors}  refused "
        f"{concurrent.refused}  Sources dropped {concurrent.dropped}"
    )
    print(
        f"  cyclic GC          one after another {sequential_gc.seconds / users * 1e3:.3f} "
        f"ms per turn ({sequential_gc.full} full), at once "
        f"{concurrent_gc.seconds / users * 1e3:.3f} ms per turn ({concurrent_gc.full} full)"
    )
    print(
        f"  {users * 2:,} at once       {len(overload.samples):,} composed, "
        f"{overload.refused:,} refused (CompositionUnavailable), errors {overload.errors}, "
        f"Sources dropped {overload.dropped}"
    )
    where = f'load, collector "{collector}"'
    return [
        Check(
            f"{where}: throughput at {users:,} in flight / sequential >= {MIN_CONCURRENCY_GAIN:g}",
            rate / sequential_rate,
            MIN_CONCURRENCY_GAIN,
            at_least=True,
        ),
        Check(f"{where}: p99 / p50 <= {MAX_TAIL_RATIO:g}", p99 / p50, MAX_TAIL_RATIO),
        Check(
            f"{where}: errors, refusals and dropped Sources at {users:,} == 0",
            concurrent.errors + concurrent.refused + concurrent.dropped,
            0,
            shown="{:.0f}",
        ),
        Check(
            f"{where}: errors and dropped Sources at {users * 2:,} == 0",
            overload.errors + overload.dropped,
            0,
            shown="{:.0f}",
        ),
    ]


async def run(plan: Plan) -> list[Check]:
    """Run every measurement, print its figures, and return the targets' checks."""
    print(
        f"mnemon starter benchmark: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}), SQLite {sqlite3.sqlite_version}"
    )
    root = Path(tempfile.mkdtemp(prefix="mnemon-bench-starter-"))
    checks: list[Check] = []
    try:
        print()
        print("One turn with a recall, by workspace size (median of sequential turns)")
        medians = {}
        for size in SIZES:
            medians[size], connections = await sized_turns(root, size, plan)
            print(
                f"  {size:>5,} documents  {medians[size]:7.2f} ms  "
                f"({connections} SQLite connections opened by an unchanged turn)"
            )
        checks.append(
            Check(
                f"size: {SIZES[-1]:,}-document turn / {SIZES[0]}-document turn "
                f"<= {MAX_SIZE_RATIO:g}",
                medians[SIZES[-1]] / medians[SIZES[0]],
                MAX_SIZE_RATIO,
            )
        )
        checks.append(
            Check("size: connections an unchanged turn opens == 0", connections, 0, shown="{:.0f}")
        )

        for collector in COLLECTORS:
            checks += await under_load(root, plan, collector)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    options = parser.parse_args(argv)
    plan = QUICK if options.quick else FULL
    passed = report(repeat(options.runs, lambda: anyio.run(run, plan, backend=BACKEND)))
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
