"""A writer process for the multi-process tests; prints one line per committed write.

    python spaces_writer.py source   <config json> <prefix> <count>
    python spaces_writer.py provider <store path> <prefix> <count>
    python spaces_writer.py batches  <store path> <start> <count>
    python spaces_writer.py hang     <store path> <prefix>

`source` writes through a real MemoryHost turn (the user's path); `provider` writes through
the SQLite Provider in a tight loop; `batches` stores the memories `shared-0` to
`shared-<count - 1>` with `remember_many`, 50 at a time from `start` on (wrapping around),
and prints `created:<key>` or `replayed:<key>` for each; `hang` opens a write transaction,
writes half a memory with the store's own row writer, says `mid` and waits to be killed.
"""

from __future__ import annotations

import hashlib
import sys
import time
from typing import Any

PADDING = "lorem ipsum dolor sit amet " * 20
PARENT = "writer-parent"


def entry_text(prefix: str, index: int) -> str:
    """A memory text that carries its own checksum, so a torn one is detectable."""
    body = f"{prefix} entry {index} {PADDING}"
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return f"{body}|{digest}"


def text_is_whole(text: str) -> bool:
    body, _, digest = text.rpartition("|")
    return hashlib.sha256(body.encode()).hexdigest()[:16] == digest


def entities_of(index: int) -> tuple[str, ...]:
    return (f"Entity {index % 7}", f"Topic {index % 3}")


async def write_through_source(config: dict[str, Any], prefix: str, count: int) -> None:
    import mnemon_source_spaces as spaces
    from spaces_kit import REMEMBER, SelectSpaces, allow

    from mnemon_testing import MemoryCompositionRunner

    async with MemoryCompositionRunner() as runner:
        await runner.mount(spaces, instance_id="spaces", config=config)
        await runner.mount(SelectSpaces(), instance_id="strategy")
        # four processes open one fresh store at once: each one's first View has the Source
        turn = await runner.begin_turn({"scope": {"user_id": "shared"}})
        assert turn.view.offer(REMEMBER) is not None, [d.code for d in turn.view.diagnostics]
        for index in range(count):
            receipt = await turn.execute_action(
                REMEMBER,
                {"text": entry_text(prefix, index), "entities": list(entities_of(index))},
                allow,
                idempotency_key=f"{prefix}-{index}",
            )
            assert receipt.completion == "committed"
            print(f"{prefix}-{index}", flush=True)
        await turn.release()


async def write_through_provider(path: str, prefix: str, count: int) -> None:
    from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, RememberRequest

    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(instance_key="writer", data_directory="/", configuration={"path": path})
    )
    try:
        index = 0
        while count < 0 or index < count:
            await adapter.remember(
                RememberRequest(
                    parent=PARENT,
                    text=entry_text(prefix, index),
                    entities=entities_of(index),
                    tags=("writer",),
                    idempotency_key=f"{prefix}-{index}",
                )
            )
            print(f"{prefix}-{index}", flush=True)
            index += 1
    finally:
        await adapter.dispose()


async def write_batches(path: str, start: int, count: int) -> None:
    from mnemon_source_spaces import SQLITE_PROVIDER, ProviderInit, RememberRequest, remember_many

    adapter: Any = await SQLITE_PROVIDER.open(
        ProviderInit(instance_key="writer", data_directory="/", configuration={"path": path})
    )
    order = [(start + offset) % count for offset in range(count)]
    try:
        for first in range(0, count, 50):
            requests = [
                RememberRequest(
                    parent=PARENT,
                    text=entry_text("shared", index),
                    entities=entities_of(index),
                    idempotency_key=f"shared-{index}",
                )
                for index in order[first : first + 50]
            ]
            for request, result in zip(
                requests, await remember_many(adapter, requests), strict=True
            ):
                assert result.memory.text == request.text
                outcome = "created" if result.created else "replayed"
                print(f"{outcome}:{request.idempotency_key}", flush=True)
    finally:
        await adapter.dispose()


def hang_mid_write(path: str, prefix: str) -> None:
    import sqlite3

    from mnemon_source_spaces._sqlite_rows import insert_memory
    from mnemon_source_spaces._sqlite_schema import ensure_schema

    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    ensure_schema(connection)
    connection.execute("BEGIN IMMEDIATE")
    insert_memory(
        connection,
        parent=PARENT,
        memory_id="torn",
        text=entry_text(prefix, 0),
        tags_json='["torn"]',
        entities=("Torn",),
        created_at="2024-01-01T00:00:00+00:00",
        idempotency=None,
    )
    print("mid", flush=True)
    time.sleep(60)


def main() -> None:
    mode = sys.argv[1]
    if mode == "hang":
        hang_mid_write(sys.argv[2], sys.argv[3])
        return
    import anyio
    import orjson

    count = int(sys.argv[4])
    if mode == "source":
        anyio.run(write_through_source, orjson.loads(sys.argv[2]), sys.argv[3], count)
    elif mode == "batches":
        anyio.run(write_batches, sys.argv[2], int(sys.argv[3]), count)
    else:
        anyio.run(write_through_provider, sys.argv[2], sys.argv[3], count)


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
