"""One process importing memories into a foreign Raven backend, record by record.

`python records_writer.py PROJECT COUNT`: mounts the Raven Source on the `jsonl` backend found
in PROJECT's `.mnemon/plugins/`, prints `ready`, waits for a line on standard input (so that
several writers start together), then writes records 0..COUNT-1 through `records-write`, one
call each, and prints one JSON line: each key and whether it was replayed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mnemon_source_raven as raven

from mnemon_testing import MemoryCompositionRunner, SelectAll

SCOPE = {"user_id": "ada"}


def text_of(number: int) -> str:
    return f"Ada keeps memory number {number} in the blue notebook"


async def main(project: Path, count: int) -> None:
    runner = MemoryCompositionRunner(config_dir=project, data_dir=project / "data")
    async with runner:
        await runner.mount(raven, instance_id="memory", config={"backend": "jsonl"})
        await runner.mount(SelectAll(), instance_id="all", config={"required": False})
        client = runner.management_client("source:memory", SCOPE)
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        outcomes = {}
        for number in range(count):
            key = f"key-{number}"
            record = {"record": {"text": text_of(number)}, "idempotency_key": key}
            revision = await client.revision()
            result = await client.mutate(
                "records-write",
                {"kind": "memory", "records": [record]},
                confirmed=True,
                expected_revision=revision,
            )
            (outcome,) = result.output["results"]
            assert outcome["completion"] == "accepted", outcome
            outcomes[key] = bool(outcome.get("replayed", False))
        print(json.dumps(outcomes), flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
