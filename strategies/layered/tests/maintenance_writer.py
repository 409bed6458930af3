"""A process that fills working memory past its cap and dies inside the maintenance it starts.

    python maintenance_writer.py ROOT COUNT

Mounts runtime, spaces and layered on the stores under ROOT (as `maintenance_kit` does) and
adds COUNT entries, printing `wrote <n>` after each committed write. An observer SIGKILLs the
process as soon as the first archive copy is committed, before the original is removed: the
host is never told, and neither Source gets to clean up.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
from maintenance_kit import add, open_host, text_of


class DieAfterTheCopy:
    """Kill this process the moment maintenance reports a committed archive copy."""

    def mnemon_observe_maintenance(self, step: str, outcome: str) -> None:
        if step == "archive-copy" and outcome == "committed":
            print("copied", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


async def main(root: Path, count: int) -> None:
    host = await open_host(root, observers=(DieAfterTheCopy(),))
    async with host:
        for number in range(count):
            await add(host, text_of(number), key=f"write-{number}")
            print(f"wrote {number}", flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
    sys.exit(0)
