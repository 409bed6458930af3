"""Benchmark how long the board takes to draw its Status and Plugins pages.

Run from the repository root::

    .venv/bin/python benchmarks/board.py            # full run, a few minutes (most of it
                                                    # writing 100,000 memories)
    .venv/bin/python benchmarks/board.py --quick    # a short smoke run

The board serves the starter profile (`mnemon init`'s, recall by words) from a temporary
folder, in process: `mnemon_board.Board` and its ASGI app behind the access-token guard,
asked over `httpx.ASGITransport` with the token's cookie, so each figure is a whole request
(guard, page, template, escaping) without a socket. Each page is asked for many times, one
request after another on one event loop; the median is printed beside its baseline:

- **Status** (`/status?user=ada&workspace=w`): the baseline reads the same data through the
  public API, without drawing anything: `host.inspect()`, a turn composed for that identity
  (its View's consistency and diagnostics) and `host.management_catalog()`.
- **Plugins** (`/plugins`): the baseline reads the profile file, `host.installed()` and each
  discovered plugin's labels (discovery itself is read once, as the board keeps it).

The difference is what drawing the page costs: the templates, the escaping of every value,
and the activation-graph reading the Plugins page does per entry.

Then the Memory pages, over a spaces Source holding 100,000 short memories in one space
(10,000 with `--quick`), written through the public bulk API (the management `import`
operation, 1,000 a call), for one identity. The target is under 200 ms a page:

- **Records** (`/sources/source:spaces?...&group=personal`, 25 a page): the first page and
  a later one (its cursor from the first). The baseline is the same management reads through
  the public API, without drawing: the revision (`ManagementClient.revision()`) and one
  `records-read` page.
- **Recall** (`/sources/source:spaces/operations/recall?...&run=1`, by words, 8 results):
  the baseline is the same `recall` read through `ManagementClient.read`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import anyio
import httpx
from mnemon_board import Board, create_app

from mnemon import MemoryHost, discover_plugins
from mnemon._cli._starter import starter_profile

HOST = "127.0.0.1:8766"
TOKEN = "benchmark-token"
FULL, QUICK = 300, 20
WARMUP = 5
MEMORIES, QUICK_MEMORIES = 100_000, 10_000
BATCH = 1_000  # the most memories one `import` call takes
WHO = {"user_id": "ada"}
TARGET_MS = 200.0


async def timed(
    page: Callable[[], Awaitable[object]], baseline: Callable[[], Awaitable[object]], count: int
) -> tuple[float, float]:
    """The median wall times of `page` and `baseline`, in ms.

    They are measured in alternating rounds (so drift and noise hit both alike) after a few
    unmeasured ones.
    """
    for _ in range(WARMUP):
        await page()
        await baseline()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(count):
        for job, into in ((page, times[0]), (baseline, times[1])):
            started = time.perf_counter()
            await job()
            into.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


async def fill(host: MemoryHost, memories: int) -> float:
    """Write `memories` short memories into ada's `personal` space; the seconds it took."""
    client = host.management_client("source:spaces", WHO)
    started = time.perf_counter()
    for first in range(0, memories, BATCH):
        batch = [
            {"text": f"note {n} about topic{n % 100} and the garden {n % 7}"}
            for n in range(first, min(first + BATCH, memories))
        ]
        result = await client.mutate(
            "import",
            {"space": "personal", "memories": batch},
            confirmed=True,
            expected_revision=await client.revision(),
        )
        assert result.output["refused"] == 0
    return time.perf_counter() - started


async def memory_pages(
    client: httpx.AsyncClient, host: MemoryHost, count: int
) -> list[tuple[str, float, float]]:
    """The Memory pages' figures: (page, drawn ms, baseline ms)."""
    spaces = host.management_client("source:spaces", WHO)
    records = "/sources/source%3Aspaces?user=ada&kind=memory&group=personal&limit=25"
    first = await spaces.read("records-read", {"kind": "memory", "limit": 25, "group": "personal"})
    cursor = first["next_cursor"]
    assert cursor
    later = f"{records}&cursor={quote(cursor)}&page=2"
    recall = (
        "/sources/source%3Aspaces/operations/recall?user=ada&run=1"
        "&f.query=topic7+garden&f.mode=words&f.limit=8"
    )

    def drawn(path: str, rows: int) -> Callable[[], Awaitable[object]]:
        async def page() -> None:
            answer = await client.get(path)
            assert answer.status_code == 200, answer.text
            assert answer.text.count("<tr data-id=") == rows

        return page

    def read(cursor: str | None) -> Callable[[], Awaitable[object]]:
        async def data() -> None:
            await spaces.revision()
            payload = {"kind": "memory", "limit": 25, "group": "personal"}
            if cursor:
                payload["cursor"] = cursor
            page = await spaces.read("records-read", payload)
            assert len(page["records"]) == 25

        return data

    async def recalled() -> None:
        found = await spaces.read("recall", {"query": "topic7 garden", "mode": "words", "limit": 8})
        assert len(found["results"]) == 8

    return [
        ("Records", *await timed(drawn(records, 25), read(None), count)),
        ("Records p2", *await timed(drawn(later, 25), read(cursor), count)),
        ("Recall", *await timed(drawn(recall, 8), recalled, count)),
    ]


async def main(count: int, memories: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mnemon-board-bench-") as folder:
        path = Path(folder) / "mnemon.toml"
        path.write_text(starter_profile(), encoding="utf-8")
        async with Board.open(path) as board:
            assert board.problem is None, board.problem
            app = create_app(board, token=TOKEN, hosts=[HOST], port=8766)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
                await client.get(f"/?token={TOKEN}")
                host = board.host
                discovery = discover_plugins(project_dir=path.parent)

                async def status_page() -> None:
                    answer = await client.get("/status?user=ada&workspace=w")
                    assert answer.status_code == 200
                    assert "source:documents" in answer.text

                async def status_data() -> None:
                    host.inspect()
                    async with host.turn(scope={"user_id": "ada", "workspace": "w"}) as turn:
                        assert turn.view.consistency
                        turn.view.diagnostics  # noqa: B018
                    host.management_catalog()

                async def plugins_page() -> None:
                    answer = await client.get("/plugins")
                    assert answer.status_code == 200
                    assert "Runtime working memory" in answer.text

                async def plugins_data() -> None:
                    path.read_text(encoding="utf-8")
                    host.installed()
                    for plugin in discovery:
                        if plugin.manifest is not None:
                            plugin.labels("en")

                figures = [
                    ("Status", *await timed(status_page, status_data, count)),
                    ("Plugins", *await timed(plugins_page, plugins_data, count)),
                ]
                took = await fill(host, memories)
                memory = await memory_pages(client, host, count)
    print(f"board pages, starter profile; Python {platform.python_version()}, {count} requests")
    print(f"{'page':<12}{'drawn (ms)':>12}{'baseline (ms)':>15}{'ratio':>8}{'drawing (ms)':>14}")
    for name, drawn, baseline in figures:
        ratio = drawn / baseline if baseline else float("inf")
        print(f"{name:<12}{drawn:>12.2f}{baseline:>15.2f}{ratio:>8.1f}{drawn - baseline:>14.2f}")
    print()
    print(
        f"Memory pages, {memories:,} memories in one space (written in {took:.0f} s through "
        f"`import`); target under {TARGET_MS:.0f} ms"
    )
    print(f"{'page':<12}{'drawn (ms)':>12}{'baseline (ms)':>15}{'ratio':>8}{'under target':>14}")
    for name, drawn, baseline in memory:
        ratio = drawn / baseline if baseline else float("inf")
        under = "yes" if drawn < TARGET_MS else "NO"
        print(f"{name:<12}{drawn:>12.2f}{baseline:>15.2f}{ratio:>8.1f}{under:>14}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    arguments = parser.parse_args()
    quick = arguments.quick
    anyio.run(main, QUICK if quick else FULL, QUICK_MEMORIES if quick else MEMORIES)
    sys.exit(0)
