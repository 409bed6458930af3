"""A writer process for the multi-process test: remembers through a real host turn.

    python pg_writer.py spaces <config json> <prefix> <count>

Prints one line per write, `<key> <completion>`, once its receipt came back (the spaces
Source remembers each; the runtime Source's PostgreSQL tests live with that Source).
"""

from __future__ import annotations

import sys
from typing import Any


async def write(mode: str, config: dict[str, Any], prefix: str, count: int) -> None:
    import mnemon_spaces_postgres
    from pg_kit import REMEMBER, allow

    from mnemon_testing import MemoryCompositionRunner, SelectAll

    async with MemoryCompositionRunner() as runner:
        await runner.mount(mnemon_spaces_postgres, instance_id=mode, config=config)
        await runner.mount(SelectAll(mode="routed", max_characters=2_000), instance_id="strategy")
        turn = await runner.begin_turn({"scope": {"user_id": "shared"}})
        for index in range(count):
            key = f"{prefix}-{index}"
            value = {"text": f"memory {key} of the fleet"}
            receipt = await turn.execute_action(REMEMBER, value, allow, idempotency_key=key)
            print(key, receipt.completion, flush=True)
        await turn.release()


def main() -> None:
    import anyio
    import orjson

    anyio.run(write, sys.argv[1], orjson.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]))


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
