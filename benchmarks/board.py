"""Benchmark how long the board takes to draw its Status and Plugins pages.

Run from the repository root::

    .venv/bin/python benchmarks/board.py            # full run, about 20 s
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
and the activation-graph reading the Plugins page does per entry. The target at 100,000
memories belongs to the Source pages, which page through memory; these two pages never read
memory.
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

import anyio
import httpx
from mnemon_board import Board, create_app

from mnemon import discover_plugins
from mnemon._cli._starter import starter_profile

HOST = "127.0.0.1:8766"
TOKEN = "benchmark-token"
FULL, QUICK = 300, 20
WARMUP = 5


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


async def main(count: int) -> None:
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
    print(f"board pages, starter profile; Python {platform.python_version()}, {count} requests")
    print(f"{'page':<10}{'drawn (ms)':>12}{'baseline (ms)':>15}{'ratio':>8}{'drawing (ms)':>14}")
    for name, drawn, baseline in figures:
        ratio = drawn / baseline if baseline else float("inf")
        print(f"{name:<10}{drawn:>12.2f}{baseline:>15.2f}{ratio:>8.1f}{drawn - baseline:>14.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    arguments = parser.parse_args()
    anyio.run(main, QUICK if arguments.quick else FULL)
    sys.exit(0)
