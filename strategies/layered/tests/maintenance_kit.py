"""Helpers of the maintenance tests: a host with working memory, long-term memory and layered."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mnemon_source_runtime as runtime
import mnemon_source_spaces as spaces
import mnemon_strategy_layered as layered

from mnemon import ActionError, ActionOffer, MemoryHost, MutationReceipt

RUNTIME = "source:runtime"
SPACES = "source:spaces"
OFFER = f"{RUNTIME}/mutate"
ADA = {"user_id": "ada"}
# four entries of this size fill the working memory's 2,048 bytes
LIMIT = 2_048
FILLER = "x" * 250


def allow(offer: ActionOffer) -> bool:
    return True


def text_of(number: int) -> str:
    """The text of the `number`th entry a test writes; whole records only ever match it."""
    return f"entry {number:03d} {FILLER}"


def runtime_config(root: Path, **extra: Any) -> dict[str, Any]:
    return {"data_dir": str(root / "runtime"), "memory_limit_bytes": LIMIT, **extra}


def spaces_config(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "data_dir": str(root / "spaces"),
        "spaces": [{"name": "personal", "writable": True}],
        **extra,
    }


async def open_host(
    root: Path,
    *,
    runtime_extra: Mapping[str, Any] | None = None,
    spaces_plugin: Any = spaces,
    spaces_extra: Mapping[str, Any] | None = None,
    observers: tuple[object, ...] = (),
) -> MemoryHost:
    """A host with runtime (2,048 bytes), spaces (`personal`) and the layered Strategy."""
    host = MemoryHost(source_timeout=30.0, observers=observers)
    try:
        await host.mount_all(
            [
                (runtime, "runtime", runtime_config(root, **(runtime_extra or {}))),
                (spaces_plugin, "spaces", spaces_config(root, **(spaces_extra or {}))),
                (layered, "layered", None),
            ]
        )
    except BaseException:
        await host.dispose()
        raise
    return host


async def add(
    host: MemoryHost, text: str, *, key: str | None = None, importance: int | None = None
) -> MutationReceipt:
    """Add a user fact in a turn of its own (so each write sees the memory as it is now)."""
    value: dict[str, Any] = {"target": "user", "operation": "add", "text": text}
    if importance is not None:
        value["importance"] = importance
    async with host.turn(scope=ADA) as turn:
        return await turn.execute_action(OFFER, value, allow, idempotency_key=key)


async def add_refused(host: MemoryHost, text: str) -> ActionError:
    """Add a fact that must be refused; the error."""
    try:
        await add(host, text)
    except ActionError as exc:
        return exc
    raise AssertionError("the write was not refused")


async def working_texts(host: MemoryHost) -> list[str]:
    output = await host.management_client(RUNTIME, ADA).read("read")
    assert output["status"] == "ok"
    return [entry["text"] for entry in output["user"]] + [e["text"] for e in output["memory"]]


async def archived_texts(host: MemoryHost, key: str = SPACES) -> list[str]:
    client = host.management_client(key, ADA)
    texts: list[str] = []
    cursor = None
    while True:
        payload: dict[str, Any] = {"kind": "memory", "limit": 100}
        if cursor:
            payload["cursor"] = cursor
        page = await client.read("records-read", payload)
        texts += [record["text"] for record in page["records"]]
        cursor = page.get("next_cursor")
        if not cursor:
            return texts


async def fill(host: MemoryHost, count: int) -> list[str]:
    """Write `count` entries below the cap (the caller checks they fit); their texts."""
    texts = [text_of(number) for number in range(count)]
    for text in texts:
        await add(host, text)
    return texts
