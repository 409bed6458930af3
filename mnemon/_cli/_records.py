"""Records of any Source, read, written and deleted through the core's records contract.

A Source declares the kinds of record it holds in its management descriptor; `mnemon list`,
`forget`, `export` and `import` drive every Source that declares them, by kind, through the
`records-read`, `records-write` and `records-delete` operations. Every function works on one
Source in one scope: the management plane is scope-bound, like everything else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping
from json.encoder import encode_basestring
from typing import Any

from .._errors import ManagementError
from .._host import ManagementClient, MemoryHost
from .._json import thaw_json
from .._models import ManagementEntry, ManagementResult, RecordKind, Scope
from ._options import CommandError

__all__ = [
    "content_key",
    "management_entry",
    "missing_scope",
    "mutate",
    "record_groups",
    "record_kinds",
    "record_pages",
    "unreadable_kinds",
]

PAGE = 100
# what `json.dumps(value, ensure_ascii=False)` writes (keys are made of it), with the
# encoder made once instead of per call
_json_text = json.JSONEncoder(ensure_ascii=False).encode
# how that encoder writes one string (the C function it calls itself)
_json_string = encode_basestring


def record_kinds(
    host: MemoryHost, able: str, *, source: str | None = None
) -> list[tuple[ManagementEntry, RecordKind]]:
    """The (Source, kind) pairs whose records are `able` (readable, writable, deletable).

    In catalog order, each Source's kinds in the order it declares them; with `source`, only
    that Source's (its key, or its entry id without `source:`).
    """
    pairs = []
    for entry in host.management_catalog():
        if source is not None and entry.source_key not in (source, f"source:{source}"):
            continue
        pairs += [(entry, kind) for kind in entry.records if getattr(kind, able)]
    return pairs


def unreadable_kinds(
    host: MemoryHost, *, source: str | None = None, kinds: set[str] | None = None
) -> list[dict[str, str]]:
    """The kinds people cannot list or export, each with why: `{source_key, kind, reason}`.

    A Source declares a kind it cannot read back (an external store that takes memories but
    has no way to list them) as not readable: `list` and `export` say so instead of showing
    nothing as if there were nothing.
    """
    named = []
    for entry in host.management_catalog():
        if source is not None and entry.source_key not in (source, f"source:{source}"):
            continue
        for kind in entry.records:
            if kind.readable or (kinds is not None and kind.id not in kinds):
                continue
            can = "taken by import" if kind.writable else "deleted by id"
            reason = f"its {kind.id} records are {can} but cannot be read back"
            named.append({"source_key": entry.source_key, "kind": kind.id, "reason": reason})
    return named


async def record_pages(
    client: ManagementClient,
    kind: RecordKind,
    *,
    group: str | None = None,
    limit: int | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """The records of `kind` (of one `group`), as the Source orders them, a page at a time.

    A caller that keeps less than the records (`mnemon import` keeps their keys) holds one
    page of them at a time, however many there are. With `limit`, at most that many.
    """
    cursor = None
    left = limit
    while left is None or left > 0:
        payload: dict[str, Any] = {"kind": kind.id, "limit": min(PAGE, left or PAGE)}
        if group is not None:
            payload["group"] = group
        if cursor:
            payload["cursor"] = cursor
        page = await client.read("records-read", payload)
        records: list[dict[str, Any]] = [thaw_json(record) for record in page["records"]]
        yield records
        if left is not None:
            left -= len(records)
        cursor = page.get("next_cursor")
        if not cursor:
            break


async def record_groups(client: ManagementClient, kind: RecordKind) -> list[str]:
    """The groups of a grouped `kind` in the client's scope (a first page names them)."""
    page = await client.read("records-read", {"kind": kind.id, "limit": 1})
    return list(page.get("groups") or ())


def content_key(kind: RecordKind, record: Mapping[str, Any]) -> str:
    """The key a record's content makes: its kind and `key_fields`, whatever else it holds.

    The same content always gets the same key, so importing a record twice replays the
    first write, and a record already there is recognised.
    """
    parts = [_part(record.get(field)) for field in kind.key_fields]
    digest = hashlib.sha256(_json_list([kind.id, *parts]).encode("utf-8")).hexdigest()
    return f"mnemon-import:{digest[:48]}"


def _part(value: Any) -> str:
    # a list of labels is the same in any order; anything else is compared as its text
    if value is None or isinstance(value, list | tuple):
        return _json_list(sorted(value, key=str)) if value else "[]"
    return str(value)


def _json_list(values: list[Any]) -> str:
    """What `_json_text(values)` writes: the same text, so keys made before do not change.

    A list of strings is written with the encoder's own string function, without making an
    encoder per call; anything else goes to the encoder.
    """
    if all(type(value) is str for value in values):
        return "[" + ", ".join(map(_json_string, values)) + "]"
    return _json_text(values)


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


def missing_scope(exc: ManagementError) -> bool:
    """Whether a management error says the scope lacks an id the Source partitions by."""
    return exc.code in ("forbidden", "missing-scope", "scope-incomplete")
