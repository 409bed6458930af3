"""What the first-party Sources hold, read and written through their management planes.

`mnemon list` and `mnemon export` read records with these functions; `mnemon import` and the
`facts`/`docs` commands write with them. Every function works on one Source in one scope:
the management plane is scope-bound, like everything else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

from .._errors import ManagementError
from .._host import ManagementClient, MemoryHost
from .._models import ManagementEntry, ManagementResult, Scope
from ._options import CommandError

__all__ = [
    "FIRST_PARTY",
    "document_records",
    "management_entry",
    "memory_pages",
    "memory_records",
    "mutate",
    "runtime_records",
    "space_names",
]

# the Source types whose records `list`, `export` and `import` understand
FIRST_PARTY = ("spaces", "runtime", "documents")
_PAGE = 100
_DOCUMENT_PAGE = 1_000


def management_entry(host: MemoryHost, type_id: str | None, source: str | None) -> ManagementEntry:
    """The mounted Source with a management plane: `source` by key, else the first of `type_id`.

    Raises:
        CommandError: no such Source is mounted (the message lists the mounted ones).
    """
    catalog = host.management_catalog()
    wanted = None if source is None else source if ":" in source else f"source:{source}"
    for entry in catalog:
        if (wanted is None and entry.type_id == type_id) or entry.source_key == wanted:
            return entry
    mounted = ", ".join(f"{e.source_key} ({e.type_id})" for e in catalog) or "none"
    what = wanted if wanted is not None else f"no {type_id} Source"
    raise CommandError(
        f"{what} is not mounted with a management plane (mounted: {mounted})",
        code="unknown-source",
    )


async def mutate(
    host: MemoryHost, key: str, scope: Scope, operation: str, payload: Mapping[str, Any]
) -> ManagementResult:
    """Run a confirmed mutation fenced by the Source's current revision in `scope`."""
    client = host.management_client(key, scope)
    revision = await client.revision()
    return await client.mutate(operation, payload, confirmed=True, expected_revision=revision)


async def space_names(client: ManagementClient) -> list[dict[str, Any]]:
    """The spaces this scope sees: name, writable, how many memories."""
    directory = await client.read("inspect")
    spaces = directory.get("spaces", []) if isinstance(directory, Mapping) else []
    return [dict(space) for space in spaces if isinstance(space, Mapping)]


async def memory_pages(
    client: ManagementClient, key: str, space: str | None = None, *, limit: int | None = None
) -> AsyncIterator[list[dict[str, Any]]]:
    """Every memory of the spaces (or of `space`), newest first, as export records, by page.

    A caller that keeps less than the records (`mnemon import` keeps their keys) holds one
    page of them at a time, however large the spaces are. With `limit`, only the newest
    `limit` of each space are read.

    Raises:
        CommandError: `space` is not one of the spaces this scope sees.
    """
    names = [item["name"] for item in await space_names(client)]
    if space is not None:
        if space not in names:
            raise CommandError(
                f"--space: no space {space!r} in {key} for this scope "
                f"(spaces: {', '.join(names) or 'none'})",
                code="unknown-space",
            )
        names = [space]
    for name in names:
        cursor = None
        left = limit
        while left is None or left > 0:
            payload: dict[str, Any] = {"space": name, "limit": min(_PAGE, left or _PAGE)}
            if cursor:
                payload["cursor"] = cursor
            page = await client.read("list", payload)
            memories = page.get("memories", [])[:left]  # a Source may return more than asked
            yield [
                {
                    "kind": "memory",
                    "source": key,
                    "type": "spaces",
                    "space": name,
                    "id": memory["id"],
                    "text": memory["text"],
                    "tags": list(memory.get("tags", [])),
                    "entities": list(memory.get("entities", [])),
                    "created_at": memory.get("created_at"),
                }
                for memory in memories
            ]
            if left is not None:
                left -= len(memories)
            cursor = page.get("next_cursor")
            if not cursor:
                break


async def memory_records(
    client: ManagementClient, key: str, space: str | None = None, *, limit: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """The memories of the spaces (or of `space`), newest first, as export records.

    All of them, or the newest `limit` of each space; the flag says whether a space holds
    more than were returned (one more than `limit` is read to know).

    Raises:
        CommandError: `space` is not one of the spaces this scope sees.
    """
    records: list[dict[str, Any]] = []
    per_space: Counter[str] = Counter()
    more = False
    async for page in memory_pages(client, key, space, limit=None if limit is None else limit + 1):
        for record in page:
            per_space[record["space"]] += 1
            if limit is not None and per_space[record["space"]] > limit:
                more = True
            else:
                records.append(record)
    return records, more


async def runtime_records(client: ManagementClient, key: str) -> list[dict[str, Any]]:
    """The user facts and the agent's notes of this scope, as export records.

    Raises:
        CommandError: the scope's file is damaged (`damaged-store`, with the Source's words).
    """
    state = await client.read("read")
    if not isinstance(state, Mapping) or state.get("status") != "ok":
        problem = state.get("problem") if isinstance(state, Mapping) else None
        raise CommandError(
            f"{key}: the working memory of this scope is damaged ({problem or 'unreadable'}); "
            "nothing was read",
            code="damaged-store",
        )
    records = []
    for target, kind in (("user", "fact"), ("memory", "note")):
        for entry in state.get(target, []):
            records.append(
                {
                    "kind": kind,
                    "source": key,
                    "type": "runtime",
                    "target": target,
                    "id": entry["id"],
                    "text": entry["text"],
                    "importance": entry.get("importance"),
                    "created_at": entry.get("created_at"),
                }
            )
    return records


async def document_records(
    client: ManagementClient, key: str, *, bodies: bool = False
) -> list[dict[str, Any]]:
    """The documents of this scope's workspace (with their bodies), as export records."""
    records: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = await client.read("list", {"offset": offset, "limit": _DOCUMENT_PAGE})
        listed = page.get("documents", [])
        for document in listed:
            record = {
                "kind": "document",
                "source": key,
                "type": "documents",
                "id": document["document"],
                "title": document["title"],
                "revision": document.get("revision"),
            }
            if bodies:
                read = await client.read("read", {"document": document["document"]})
                record["body"] = read.get("body", "")
            records.append(record)
        offset += len(listed)
        if not listed or offset >= int(page.get("total", 0)):
            return records


def missing_scope(exc: ManagementError) -> bool:
    """Whether a management error says the scope lacks an id the Source partitions by."""
    return exc.code in ("forbidden", "missing-scope", "scope-incomplete")
