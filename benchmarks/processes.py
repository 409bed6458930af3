"""Benchmark one profile served by several host processes at once, every write checked after.

Run from the repository root::

    .venv/bin/python benchmarks/processes.py            # full run
    .venv/bin/python benchmarks/processes.py --quick    # a short smoke run
    .venv/bin/python benchmarks/processes.py --check    # exit 1 when a target fails
    .venv/bin/python benchmarks/processes.py --runs 3   # three full runs, judged by their medians

What is measured, on the asyncio backend, with the profile `mnemon init` writes (runtime,
documents and spaces on SQLite in WAL mode, under the layered Strategy), written once into a
temporary folder and opened by every process with `load_profile(...).open_host()`:

- One operation is what a user of an agent does in one turn: `host.turn` for the user's own
  scope, a read through `source:spaces/recall`, then `source:spaces/remember` with an
  idempotency key, the turn released. Its latency is the wall time of all of it.
- 1,000 distinct users (100 with `--quick`) are served by one host process, then by two
  (500 each), then by one again: other users in each phase, on the same profile and files.
  Each process runs its users as concurrent anyio tasks, at most `IN_FLIGHT` at once. The
  processes are started with `multiprocessing`'s spawn context, open their host and warm
  up, then wait at a barrier so that they start together; throughput is every operation
  over the time from the first process's start to the last one's end.
- Targets: two processes' throughput at least 1.7x one process's; p99 at most 3x p50 (with
  two processes); every operation done without error.
- One process is measured before and after the two, and the ratio is taken against the
  mean of both: on a shared machine the CPUs' pace drifts over a run (the same operations
  cost a third more CPU time in one phase than in another), and one measurement before
  would credit or blame the drift to scaling.
- Beside the figures: each phase's CPU per operation (the host processes', the whole
  machine's), how many CPUs were busy, and how many the two processes left idle: idle CPUs
  while two processes serve mean a wait between them (the store's one write turn), not a
  lack of cores.
- Afterwards every receipt is checked: each remember must have been `committed`, and a fresh
  host recalls each user's memory by the word only it holds and must find it exactly once
  (not lost, not duplicated). A failure here raises, whatever `--check` says.

With `--runs N`, the targets are judged by the median of N full runs (see `targets.py`).
The exit status is 0 unless `--check` is given, in which case a failed target exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from targets import Check, add_options, repeat, report

import mnemon
from mnemon._cli._starter import starter_profile

BACKEND = "asyncio"
IN_FLIGHT = 100  # operations at once in one process
MIN_SCALE = 1.7
MAX_TAIL_RATIO = 3.0
WARM_UP = 20  # operations per process before the barrier, for users not counted
PHASES = (1, 2, 1)  # host processes of each phase, one after another
DEADLINE = 600.0  # seconds a process may take before the benchmark gives up on it


@dataclasses.dataclass(frozen=True)
class Plan:
    """How many users to serve, and where the spaces Source keeps its memories."""

    users: int
    provider: str = "sqlite"


FULL = Plan(users=1_000)
QUICK = Plan(users=100)
# the private PostgreSQL server: PostgreSQL's defaults (fsync, synchronous_commit on) with
# buffers sized like a small production server's, not the test suite's 32 MB
SERVER_SETTINGS = {"shared_buffers": "256MB", "max_connections": "100"}
SPACES_ENTRY = 'id = "spaces"\nplugin = "spaces"\n'
SQLITE_PROVIDER = '[entries.config.provider]\ntype = "sqlite"\n'


def write_profile(path: Path, provider: str, dsn: str | None) -> None:
    """The profile `mnemon init` writes, its spaces Source moved to PostgreSQL if asked."""
    text = starter_profile("data")
    if provider == "postgres":
        if SPACES_ENTRY not in text or SQLITE_PROVIDER not in text:
            raise RuntimeError("the starter profile no longer writes its spaces entry so")
        text = text.replace(SPACES_ENTRY, 'id = "spaces"\nplugin = "spaces-postgres"\n')
        text = text.replace(
            SQLITE_PROVIDER, f'[entries.config.provider]\ntype = "postgres"\ndsn = "{dsn}"\n'
        )
    path.write_text(text, encoding="utf-8")


def allow(offer: object) -> bool:
    """Authorize every write the benchmark's users make."""
    return True


def scope_of(user: str) -> dict[str, str]:
    return {"user_id": user, "workspace": "bench"}


def marker(user: str) -> str:
    """A word only this user's memory holds (letters, so every tokenizer keeps it whole)."""
    return "mk" + "".join(chr(ord("a") + int(digit)) for digit in user.split("-", 1)[1])


CpuSample = tuple[float, float]  # (busy, total) seconds of every CPU since boot


def cpu_sample() -> CpuSample:
    """The machine's CPU time so far, from Linux's `/proc/stat`; (0, 0) where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and waiting for I/O
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One process's figures, sent back to the parent."""

    started: float  # time.time() when the process passed the barrier
    ended: float
    cpu: float  # CPU seconds this process used (all its threads) between the two
    machine: tuple[CpuSample, CpuSample]  # the whole machine's CPU at start and end
    latencies: tuple[float, ...]
    receipts: tuple[tuple[str, str, str, str | None], ...]  # user, completion, status, key
    errors: tuple[str, ...]  # error class names, never their messages


async def operation(host: mnemon.MemoryHost, user: str) -> tuple[float, mnemon.MutationReceipt]:
    started = time.perf_counter()
    async with host.turn(scope=scope_of(user)) as turn:
        await turn.execute_route("source:spaces/recall", {"query": "billing review"})
        receipt = await turn.execute_action(
            "source:spaces/remember",
            {"text": f"The billing review for {user} is noted as {marker(user)}."},
            allow,
            idempotency_key=f"remember-{user}",
        )
    return time.perf_counter() - started, receipt


async def serve(
    profile: str, users: Sequence[str], warm_up: Sequence[str], barrier: Any
) -> Outcome:
    """Open a host on `profile`, warm up, wait for the others, then serve `users` at once."""
    latencies: list[float] = []
    receipts: list[tuple[str, str, str, str | None]] = []
    errors: list[str] = []
    limit = anyio.Semaphore(IN_FLIGHT)

    async def one(user: str) -> None:
        async with limit:
            try:
                duration, receipt = await operation(host, user)
            except Exception as error:
                errors.append(type(error).__name__)
                return
        latencies.append(duration)
        receipts.append((user, receipt.completion, receipt.status, receipt.idempotency_key))

    async with mnemon.load_profile(profile).open_host() as host:
        for user in warm_up:
            await operation(host, user)
        await anyio.to_thread.run_sync(barrier.wait, DEADLINE)
        started, cpu, machine_at_start = time.time(), time.process_time(), cpu_sample()
        async with anyio.create_task_group() as group:
            for user in users:
                group.start_soon(one, user)
        ended, cpu = time.time(), time.process_time() - cpu
        machine = (machine_at_start, cpu_sample())
    return Outcome(started, ended, cpu, machine, tuple(latencies), tuple(receipts), tuple(errors))


def process_main(
    profile: str, users: list[str], warm_up: list[str], barrier: Any, results: Any
) -> None:
    """The entry point of one host process: serve, then put its `Outcome` on `results`."""
    try:
        outcome = anyio.run(serve, profile, users, warm_up, barrier, backend=BACKEND)
    except BaseException as error:  # the parent must hear of it rather than wait
        barrier.abort()
        results.put(("failed", type(error).__name__))
        raise
    results.put(("done", outcome))


@dataclasses.dataclass(frozen=True)
class Served:
    """What N processes did together."""

    processes: int
    seconds: float
    host_cpu: float  # CPU seconds of the host processes, all threads
    machine_cpu: float  # busy CPU seconds of the whole machine (hosts, a server, all else)
    latencies: tuple[float, ...]
    receipts: tuple[tuple[str, str, str, str | None], ...]
    errors: tuple[str, ...]

    @property
    def rate(self) -> float:
        """Operations per second, over the time from the first start to the last end."""
        return len(self.latencies) / self.seconds

    def percentile(self, fraction: float) -> float:
        """The latency (seconds) at `fraction` (0 to 1) of the sorted samples."""
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_processes(profile: Path, processes: int, users: list[str], tag: str) -> Served:
    """Serve `users` split evenly across `processes` spawned host processes."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results = context.Queue()
    children = []
    for index in range(processes):
        share = users[index::processes]
        warm_up = [f"{tag}w{index}-{n}" for n in range(WARM_UP)]
        child = context.Process(
            target=process_main, args=(str(profile), share, warm_up, barrier, results)
        )
        child.start()
        children.append(child)
    outcomes: list[Outcome] = []
    try:
        for _ in children:
            kind, value = results.get(timeout=DEADLINE)
            if kind != "done":
                raise RuntimeError(f"a host process failed with {value}")
            outcomes.append(value)
    finally:
        for child in children:
            child.join(timeout=DEADLINE)
            if child.is_alive():
                child.kill()
    first = min(outcomes, key=lambda outcome: outcome.started)
    last = max(outcomes, key=lambda outcome: outcome.ended)
    return Served(
        processes,
        last.ended - first.started,
        sum(outcome.cpu for outcome in outcomes),
        last.machine[1][0] - first.machine[0][0],
        tuple(sample for outcome in outcomes for sample in outcome.latencies),
        tuple(receipt for outcome in outcomes for receipt in outcome.receipts),
        tuple(error for outcome in outcomes for error in outcome.errors),
    )


async def verify(profile: Path, served: Sequence[Served], users: Sequence[str]) -> None:
    """Check every receipt, then find each user's memory exactly once.

    Raises:
        RuntimeError: a write was not committed, a memory is missing or duplicated.
    """
    receipts = [receipt for each in served for receipt in each.receipts]
    errors = [error for each in served for error in each.errors]
    if errors:
        raise RuntimeError(f"{len(errors)} operations failed: {sorted(set(errors))}")
    if sorted(user for user, *_ in receipts) != sorted(users):
        raise RuntimeError("the receipts do not cover every user exactly once")
    wrong = [user for user, completion, status, key in receipts if completion != "committed"]
    wrong += [user for user, _, status, key in receipts if key != f"remember-{user}"]
    if wrong:
        raise RuntimeError(f"{len(wrong)} receipts are not committed under their key")
    missing = duplicated = 0
    async with mnemon.load_profile(profile).open_host() as host:
        for user in users:
            async with host.turn(scope=scope_of(user)) as turn:
                evidence = await turn.execute_route(
                    "source:spaces/recall", {"query": marker(user), "limit": 10}
                )
            found = sum(1 for item in evidence.items if marker(user) in item.text)
            missing += found == 0
            duplicated += found > 1
    if missing or duplicated:
        raise RuntimeError(f"memories lost: {missing}, duplicated: {duplicated}")


def measure(plan: Plan) -> list[Check]:
    """Run one measurement, print its figures, and return the targets' checks."""
    store = "SQLite" if plan.provider == "sqlite" else "a private PostgreSQL server"
    print(
        f"mnemon processes benchmark: {BACKEND} on Python {platform.python_version()} "
        f"({platform.machine()}), SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}; spaces on {store}"
    )
    root = Path(tempfile.mkdtemp(prefix="mnemon-bench-processes-"))
    server = None
    try:
        profile = root / "mnemon.toml"
        if plan.provider == "postgres":
            from mnemon_testing.postgres import PostgresServer

            server = PostgresServer(settings=SERVER_SETTINGS).start()
        write_profile(profile, plan.provider, server.dsn() if server else None)
        served = []
        everyone: list[str] = []
        # one process before and after two: a drift in the machine's speed over the run
        # (a shared host's CPUs do not keep one pace) does not pass for scaling
        for phase, processes in enumerate(PHASES):
            users = [f"p{phase}-{index:05d}" for index in range(plan.users)]
            served.append(run_processes(profile, processes, users, f"p{phase}"))
            everyone += users
        anyio.run(verify, profile, served, everyone, backend=BACKEND)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    before, two, after = served
    one_rate = (before.rate + after.rate) / 2
    print()
    print(
        f"{plan.users:,} users, each: turn, recall, remember with a key; "
        f"at most {IN_FLIGHT} at once per process"
    )
    for each in served:
        print(
            f"  {each.processes} process{'es' if each.processes > 1 else '  '}  "
            f"{each.rate:8,.0f} operations/s  p50 {each.percentile(0.5) * 1e3:7.2f} ms  "
            f"p99 {each.percentile(0.99) * 1e3:7.2f} ms  "
            f"p99/p50 {each.percentile(0.99) / each.percentile(0.5):5.2f}  "
            f"errors {len(each.errors)}"
        )
        if each.machine_cpu:
            operations = len(each.latencies)
            print(
                f"      CPU per operation: hosts {each.host_cpu / operations * 1e3:.2f} ms, "
                f"whole machine {each.machine_cpu / operations * 1e3:.2f} ms; "
                f"machine busy {each.machine_cpu / each.seconds:.2f} of {os.cpu_count()} CPUs"
            )
    print(
        f"  2 processes / 1 process: {two.rate / one_rate:.2f}x "
        f"(one process: {before.rate:,.0f} before and {after.rate:,.0f} after, "
        f"mean {one_rate:,.0f})"
    )
    if two.machine_cpu:
        busy = two.machine_cpu / two.seconds
        print(
            f"  with 2 processes the machine's CPUs were {busy / (os.cpu_count() or 1):.0%} busy: "
            f"{(os.cpu_count() or 1) - busy:.2f} CPUs left idle"
        )
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    print(
        f"  checked: {len(PHASES) * plan.users:,} receipts committed under their keys, "
        "each memory recalled exactly once"
    )
    return [
        Check(
            f"throughput: 2 processes / 1 process >= {MIN_SCALE:g}",
            two.rate / one_rate,
            MIN_SCALE,
            at_least=True,
        ),
        Check(
            f"2 processes: p99 / p50 <= {MAX_TAIL_RATIO:g}",
            two.percentile(0.99) / two.percentile(0.5),
            MAX_TAIL_RATIO,
        ),
        Check(
            "errors == 0",
            sum(len(each.errors) for each in served),
            0,
            shown="{:.0f}",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    parser.add_argument(
        "--provider",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where the spaces Source keeps its memories (postgres: a private server it starts)",
    )
    options = parser.parse_args(argv)
    plan = dataclasses.replace(QUICK if options.quick else FULL, provider=options.provider)
    passed = report(repeat(options.runs, lambda: measure(plan)))
    return 1 if options.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
