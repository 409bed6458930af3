"""A writer process for the multi-process tests: mutates one runtime store through a real host.

    python runtime_writer.py CONFIG_JSON USER_ID PREFIX COUNT [--wait] [--die-at POINT --after N]

Prints `ready` once mounted, with `--wait` waits for a line on stdin (so writers start
together), then adds COUNT entries `PREFIX-<n>-<padding>` (COUNT 0: forever, keeping at most
20 entries), printing `wrote <n>` after each committed write. `--die-at` makes the process
SIGKILL itself inside its write number N (counting from 0), at one POINT of the atomic write:
`mid-temp` (half the temporary file is on disk), `before-rename` (the temporary file is whole
and fsynced, the rename has not happened) or `after-rename` (renamed, folder not fsynced).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import stat
import sys

import anyio
import anyio.to_thread
import mnemon_source_runtime as runtime
import orjson
from runtime_kit import OFFER, ShowAll, allow

from mnemon_testing import MemoryCompositionRunner

PADDING = "x" * 400
KEEP = 20


def entry_text(prefix: str, number: int) -> str:
    """The text a writer stores for its `number`th write; a torn record would not match."""
    return f"{prefix}-{number}-{PADDING}"


def die_at(point: str) -> None:
    """Make the next atomic write SIGKILL this process at `point`."""

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    real_fsync, real_replace = os.fsync, os.replace

    def fsync_half_and_die(descriptor: int) -> None:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.ftruncate(descriptor, os.fstat(descriptor).st_size // 2)
            real_fsync(descriptor)
            die()
        real_fsync(descriptor)

    def replace_then_die(source: str, target: str) -> None:
        real_replace(source, target)
        die()

    if point == "mid-temp":
        os.fsync = fsync_half_and_die
    elif point == "before-rename":
        os.replace = lambda source, target: die()
    else:
        os.replace = replace_then_die


async def main(arguments: argparse.Namespace) -> None:
    config = orjson.loads(arguments.config)
    async with MemoryCompositionRunner(source_timeout=60.0) as runner:
        await runner.mount(runtime, instance_id="runtime", config=config)
        await runner.mount(ShowAll(), instance_id="show")
        turn = await runner.begin_turn({"scope": {"user_id": arguments.user}})
        print("ready", flush=True)
        if arguments.wait:
            await anyio.to_thread.run_sync(sys.stdin.readline)
        numbers = range(arguments.count) if arguments.count else itertools.count()
        for number in numbers:
            if arguments.die_at and number == arguments.after:
                die_at(arguments.die_at)
            text = entry_text(arguments.prefix, number)
            value = {"target": "memory", "operation": "add", "text": text}
            receipt = await turn.execute_action(OFFER, value, allow)
            assert receipt.completion == "committed"
            if not arguments.count and number >= KEEP:
                handle = f"m{number - KEEP + 1}"
                value = {"target": "memory", "operation": "remove", "id": handle}
                await turn.execute_action(OFFER, value, allow)
            print(f"wrote {number}", flush=True)
        await turn.release()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("user")
    parser.add_argument("prefix")
    parser.add_argument("count", type=int)
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--die-at", choices=["mid-temp", "before-rename", "after-rename"])
    parser.add_argument("--after", type=int, default=0)
    anyio.run(main, parser.parse_args())
    sys.exit(0)
