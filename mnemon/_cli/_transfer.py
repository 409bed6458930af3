"""`mnemon export` and `mnemon import`: one scope's memory as versioned JSON Lines.

The first line is a header (`{"format": "mnemon-export", "version": 1, ...}`), then one record
per line (a long-term memory, a user fact, an agent note, a document), then a trailer
(`{"kind": "end", "records": N}`) so a file cut short is refused rather than half imported.

Import never duplicates: long-term memories and working-memory entries are written with an
idempotency key derived from the record's content (so a second import replays instead of
writing), and an entry or document already present with the same content is left as it is.
Long-term memories go in batches through the spaces Source's management `import` (one durable
transaction and one result per memory) when it has one, else one by one through its
`remember` action.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import click

from .._errors import ActionError, ManagementError
from .._host import MemoryHost, MemoryTurn
from .._models import ActionOffer, Scope
from .._text import visible_text
from ._options import (
    CommandError,
    FlagError,
    confirm,
    echo_json,
    identity,
    json_option,
    printer_of,
    profile_path,
    run,
    scope_of,
)
from ._paths import shown_path
from ._progress import progress
from ._records import (
    FIRST_PARTY,
    document_records,
    memory_records,
    missing_scope,
    mutate,
    runtime_records,
)
from ._session import missing_flags, open_memory, operator_turn

__all__ = ["FORMAT", "VERSION", "export", "import_"]

FORMAT = "mnemon-export"
VERSION = 1
# a cheap read per Source type: it fails when the scope lacks what the Source partitions by
_PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "spaces": ("inspect", {}),
    "runtime": ("read", {}),
    "documents": ("list", {"limit": 1}),
}
_KINDS = {"memory": "spaces", "fact": "runtime", "note": "runtime", "document": "documents"}
_SHOWN_REFUSALS = 10
IMPORT_BATCH = 1_000  # the most memories the spaces Source's `import` takes in one call
_ENVELOPE = 1_024  # room for the batch's own JSON around its memories


def _key(*parts: Any) -> str:
    # the same record always gets the same key: importing it twice replays the first write
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"mnemon-import:{digest[:48]}"


# ---------------------------------------------------------------------- export


async def _export(path: Path, scope: Scope) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async with open_memory(path) as (_, host):
        records: list[dict[str, Any]] = []
        sources = []
        skipped = []
        catalog = [e for e in host.management_catalog() if e.type_id in FIRST_PARTY]
        with progress("export", total=len(catalog)) as advance:
            for entry in catalog:
                client = host.management_client(entry.source_key, scope)
                try:
                    if entry.type_id == "spaces":
                        found = await memory_records(client, entry.source_key)
                    elif entry.type_id == "runtime":
                        found = await runtime_records(client, entry.source_key)
                    else:
                        found = await document_records(client, entry.source_key, bodies=True)
                except ManagementError as exc:
                    if not missing_scope(exc):
                        raise
                    skipped.append(entry.source_key)  # this scope has no data there
                else:
                    records += found
                    sources.append({"source": entry.source_key, "type": entry.type_id})
                advance(1)
        header = {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "scope": scope.model_dump(exclude_none=True),
            "sources": sources,
            "skipped": skipped,
        }
        return header, records


def _lines(header: dict[str, Any], records: list[dict[str, Any]]) -> Iterator[str]:
    yield json.dumps(header, ensure_ascii=False)
    for record in records:
        yield json.dumps(record, ensure_ascii=False)
    yield json.dumps({"kind": "end", "records": len(records)})


@click.command()
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (default: standard output).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing --out file.")
@identity
@json_option
@click.pass_context
def export(
    ctx: click.Context, /, out: Path | None, force: bool, as_json: bool, **options: Any
) -> None:
    """Export the memory of the scope the flags describe as JSON Lines (format version 1).

    It covers every first-party Source: long-term memories (spaces), user facts and agent
    notes (runtime) and documents with their bodies (documents, with --workspace).
    """
    if out is not None and out.exists() and not force:
        shown = shown_path(out, profile_path(ctx).parent, name_if_outside=True)
        raise CommandError(f"{shown} exists; use --force to overwrite it", code="exists")
    header, records = run(functools.partial(_export, profile_path(ctx), scope_of(options)))
    if out is None:
        if as_json:
            raise FlagError("--json needs --out FILE: the export itself is written to stdout")
        for line in _lines(header, records):
            click.echo(line)
        return
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for line in _lines(header, records):
            handle.write(line + "\n")
    partial.replace(out)  # a reader never sees half a file under the final name
    summary = {
        "out": shown_path(out, profile_path(ctx).parent, name_if_outside=True),
        "records": len(records),
        "sources": header["sources"],
        "skipped": header["skipped"],
    }
    if as_json:
        echo_json(summary)
        return
    printer_of(ctx).ok(f"exported {len(records)} record(s) to {summary['out']}")
    for key in header["skipped"]:
        printer_of(ctx).warn(f"{key} skipped: the scope lacks an id it partitions by")


# ---------------------------------------------------------------------- import


def read_export(handle: IO[str], name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and records of an export file, checked line by line.

    Raises:
        CommandError: not an export, another format version, a bad line, or a file cut short.
    """
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    ended = False
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            raise CommandError(f"{name}: line {number} is not JSON", code="invalid-file") from None
        if not isinstance(value, dict):
            raise CommandError(f"{name}: line {number} is not a JSON object", code="invalid-file")
        if header is None:
            if value.get("format") != FORMAT:
                raise CommandError(
                    f"{name}: not a mnemon export (its first line has no format {FORMAT!r})",
                    code="invalid-file",
                )
            if value.get("version") != VERSION:
                raise CommandError(
                    f"{name}: written in export format version {value.get('version')!r}; this "
                    f"mnemon reads version {VERSION} only. Export it again with a mnemon "
                    f"that writes version {VERSION}.",
                    code="unsupported-version",
                )
            header = value
            continue
        if ended:
            raise CommandError(f"{name}: line {number} follows the end", code="invalid-file")
        if value.get("kind") == "end":
            if value.get("records") != len(records):
                raise CommandError(
                    f"{name}: the end says {value.get('records')} records, the file has "
                    f"{len(records)}",
                    code="invalid-file",
                )
            ended = True
            continue
        kind = value.get("kind")
        if kind not in _KINDS or not isinstance(value.get("source"), str):
            raise CommandError(
                f"{name}: line {number}: unknown record kind {kind!r}", code="invalid-file"
            )
        needed = ("title", "body") if kind == "document" else ("text",)
        if kind == "memory":
            needed = ("text", "space")
        missing = [field for field in needed if not isinstance(value.get(field), str)]
        if missing:
            raise CommandError(
                f"{name}: line {number}: a {kind} record needs {missing[0]!r} (a string)",
                code="invalid-file",
            )
        records.append(value)
    if header is None:
        raise CommandError(f"{name}: empty, not a mnemon export", code="invalid-file")
    if not ended:
        raise CommandError(
            f"{name}: cut short (no end line): nothing was imported", code="invalid-file"
        )
    return header, records


def _target(host: MemoryHost, record: dict[str, Any], mapping: dict[str, str]) -> str:
    """The mounted Source a record goes to: the same key and type, else the first of its type."""
    wanted_type = _KINDS[record["kind"]]
    catalog = {entry.source_key: entry.type_id for entry in host.management_catalog()}
    source = str(record["source"])
    if catalog.get(source) == wanted_type:
        return source
    if source not in mapping:
        for key, type_id in catalog.items():
            if type_id == wanted_type:
                mapping[source] = key
                break
        else:
            raise CommandError(
                f"the file holds {record['kind']} records of {source}, and no {wanted_type} "
                "Source is mounted: nothing more was imported",
                code="unknown-source",
            )
    return mapping[source]


def _type_of(host: MemoryHost, key: str) -> str | None:
    return next((e.type_id for e in host.management_catalog() if e.source_key == key), None)


async def _write_action(
    turn: MemoryTurn, offer_id: str, payload: dict[str, Any], key: str
) -> dict[str, Any]:
    def authorize(offer: ActionOffer) -> bool:
        return True  # the person confirmed the whole import before it started

    try:
        receipt = await turn.execute_action(offer_id, payload, authorize, idempotency_key=key)
    except ActionError as exc:
        raise CommandError(
            f"{offer_id}: {exc.code}: {visible_text(str(exc), keep_newlines=False)}",
            code=exc.code,
        ) from None
    if receipt.completion != "committed":
        raise CommandError(
            f"{offer_id}: the write was {receipt.completion}, not committed: stopped here",
            code="not-committed",
        )
    replayed = receipt.detail.get("replayed") is True or receipt.detail.get("duplicate") is True
    return {"status": "unchanged" if replayed else "written"}


async def _import(path: Path, scope: Scope, records: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {"written": 0, "unchanged": 0, "refused": 0}
    refusals: list[dict[str, Any]] = []
    async with (
        open_memory(path, operator=True) as (profile, host),
        operator_turn(host, scope) as turn,
    ):
        offers = {offer.id for offer in turn.view.offers}
        mapping: dict[str, str] = {}
        present: dict[str, set[tuple[str, ...]]] = {}
        # every Source the file writes to must take writes in this scope before one is made
        for key in sorted({_target(host, record, mapping) for record in records}):
            operation, probe = _PROBES[_type_of(host, key) or ""]
            try:
                await host.management_client(key, scope).read(operation, probe)
            except ManagementError as exc:
                flags = missing_flags(profile, key, _type_of(host, key), scope)
                add = f"; add {' and '.join(flags)}" if missing_scope(exc) and flags else ""
                raise CommandError(
                    f"nothing was imported: {key} cannot be written in this scope "
                    f"({visible_text(str(exc), keep_newlines=False)}{add})",
                    code="missing-scope" if missing_scope(exc) else exc.code,
                ) from None
            if (
                _type_of(host, key) == "spaces"
                and not _bulk(host, key)
                and f"{key}/remember" not in offers
            ):
                raise CommandError(
                    f"nothing was imported: {key} offers no remember action in this scope "
                    "(see `mnemon inspect` with the same flags)",
                    code="no-action",
                )
        # memories are listed newest first: written oldest first, they keep their order
        numbered = list(enumerate(records, start=1))
        memories = [item for item in numbered if item[1]["kind"] == "memory"][::-1]
        with progress("import", total=len(records)) as advance:
            for _, record in numbered:
                kind = record["kind"]
                if kind == "memory":
                    continue
                key = _target(host, record, mapping)
                if kind in ("fact", "note"):
                    outcome = await _import_entry(host, key, scope, record, present)
                else:
                    outcome = await _import_document(host, key, scope, record, present)
                counts[outcome["status"]] += 1
                advance(1)
            budget = profile.max_input_bytes - _ENVELOPE
            for key, space, batch in _memory_batches(host, mapping, memories, budget):
                if _bulk(host, key):
                    await _import_batch(
                        host, key, scope, space, batch, present, counts, refusals, budget
                    )
                else:
                    for _, record in batch:
                        payload = _memory_payload(record)
                        outcome = await _import_memory(host, turn, key, scope, payload, present)
                        counts[outcome["status"]] += 1
                advance(len(batch))
    return {**counts, "refusals": sorted(refusals, key=lambda refusal: refusal["record"])}


def _bulk(host: MemoryHost, key: str) -> bool:
    """Whether the Source's management plane takes many memories at once (`import`)."""
    entry = next((e for e in host.management_catalog() if e.source_key == key), None)
    return entry is not None and any(op.id == "import" for op in entry.operations)


def _memory_payload(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": record["text"],
        "space": record["space"],
        "tags": list(record.get("tags") or []),
        "entities": list(record.get("entities") or []),
    }


def _memory_batches(
    host: MemoryHost,
    mapping: dict[str, str],
    memories: list[tuple[int, dict[str, Any]]],
    budget: int,
) -> Iterator[tuple[str, str, list[tuple[int, dict[str, Any]]]]]:
    """Runs of memories for one Source and space, at most `IMPORT_BATCH` and `budget` bytes."""
    batch: list[tuple[int, dict[str, Any]]] = []
    where: tuple[str, str] | None = None
    size = 0
    for number, record in memories:
        here = (_target(host, record, mapping), str(record["space"]))
        item = len(json.dumps(_memory_payload(record), ensure_ascii=False).encode("utf-8")) + 64
        if batch and (here != where or len(batch) >= IMPORT_BATCH or size + item > budget):
            assert where is not None
            yield where[0], where[1], batch
            batch, size = [], 0
        where = here
        batch.append((number, record))
        size += item
    if batch and where is not None:
        yield where[0], where[1], batch


async def _import_batch(
    host: MemoryHost,
    key: str,
    scope: Scope,
    space: str,
    batch: list[tuple[int, dict[str, Any]]],
    present: dict[str, set[tuple[str, ...]]],
    counts: dict[str, int],
    refusals: list[dict[str, Any]],
    budget: int,
) -> None:
    """Write one batch through the Source's `import`; count and keep each memory's result.

    Raises:
        CommandError: the batch failed as a whole, or was stored but not confirmed durable.
    """
    if key not in present:
        # memories written before without a key (by `remember`) are recognised by content
        client = host.management_client(key, scope)
        present[key] = {_memory_content(item) for item in await memory_records(client, key)}
    sent: list[tuple[int, tuple[str, ...]]] = []
    items: list[dict[str, Any]] = []
    for number, record in batch:
        payload = _memory_payload(record)
        content = _memory_content(payload)
        if content in present[key]:
            counts["unchanged"] += 1
            continue
        item = {k: v for k, v in payload.items() if k != "space"}
        item["idempotency_key"] = _key("memory", *content)
        if len(json.dumps(item, ensure_ascii=False).encode("utf-8")) > budget:
            # the host would refuse the whole call: this one memory alone is refused
            counts["refused"] += 1
            refusals.append(
                {"record": number, "code": "too-large", "message": "larger than max_input_bytes"}
            )
            continue
        sent.append((number, content))
        items.append(item)
    if not items:
        return
    written = counts["written"]
    try:
        result = await mutate(host, key, scope, "import", {"space": space, "memories": items})
    except ManagementError as exc:
        raise CommandError(
            f"{key}/import: {exc.code}: a batch of {len(items)} memories failed and may or may "
            f"not have been stored; the {written} written before it are kept. Run the same "
            "import again to finish: it never duplicates",
            code=exc.code,
        ) from None
    output = result.output if isinstance(result.output, Mapping) else {}
    results = output.get("results")
    if not isinstance(results, Sequence) or len(results) != len(items):
        raise CommandError(
            f"{key}/import: the Source answered with "
            f"{len(results) if isinstance(results, Sequence) else 0} results for "
            f"{len(items)} memories: stopped here; run the same import again to finish",
            code="provider_error",
        )
    accepted = 0
    for (number, content), outcome in zip(sent, results, strict=True):
        completion = outcome.get("completion") if isinstance(outcome, Mapping) else None
        if completion == "refused":
            counts["refused"] += 1
            refusals.append(
                {
                    "record": number,
                    "code": str(outcome.get("code", "refused")),
                    "message": visible_text(str(outcome.get("message", "")), keep_newlines=False),
                }
            )
            continue
        present[key].add(content)
        counts["unchanged" if outcome.get("replayed") is True else "written"] += 1
        accepted += completion != "committed"
    if accepted:
        raise CommandError(
            f"{key}/import: {accepted} memories were accepted, not committed (the store does "
            "not confirm durability): stopped here",
            code="not-committed",
        )


async def _import_memory(
    host: MemoryHost,
    turn: MemoryTurn,
    key: str,
    scope: Scope,
    payload: dict[str, Any],
    present: dict[str, set[tuple[str, ...]]],
) -> dict[str, Any]:
    if key not in present:
        # memories written before without a key (by `remember`) are recognised by content
        client = host.management_client(key, scope)
        present[key] = {_memory_content(item) for item in await memory_records(client, key)}
    content = _memory_content(payload)
    if content in present[key]:
        return {"status": "unchanged"}
    idempotency = _key("memory", *content)
    outcome = await _write_action(turn, f"{key}/remember", payload, idempotency)
    present[key].add(content)
    return outcome


def _memory_content(record: dict[str, Any]) -> tuple[str, ...]:
    tags = json.dumps(sorted(record.get("tags") or []), ensure_ascii=False)
    entities = json.dumps(sorted(record.get("entities") or []), ensure_ascii=False)
    return (str(record["space"]), str(record["text"]), tags, entities)


async def _import_entry(
    host: MemoryHost,
    key: str,
    scope: Scope,
    record: dict[str, Any],
    present: dict[str, set[tuple[str, ...]]],
) -> dict[str, Any]:
    target = "user" if record["kind"] == "fact" else "memory"
    if key not in present:
        client = host.management_client(key, scope)
        present[key] = {
            (str(item["target"]), str(item["text"])) for item in await runtime_records(client, key)
        }
    if (target, record["text"]) in present[key]:
        return {"status": "unchanged"}
    change: dict[str, Any] = {"target": target, "operation": "add", "text": record["text"]}
    if isinstance(record.get("importance"), int):
        change["importance"] = record["importance"]
    await mutate(host, key, scope, "mutate", change)
    present[key].add((target, record["text"]))
    return {"status": "written"}


async def _import_document(
    host: MemoryHost,
    key: str,
    scope: Scope,
    record: dict[str, Any],
    present: dict[str, set[tuple[str, ...]]],
) -> dict[str, Any]:
    if key not in present:
        client = host.management_client(key, scope)
        present[key] = {
            (str(item["title"]), str(item["body"]))
            for item in await document_records(client, key, bodies=True)
        }
    if (record["title"], record["body"]) in present[key]:
        return {"status": "unchanged"}
    await mutate(host, key, scope, "create", {"title": record["title"], "body": record["body"]})
    present[key].add((record["title"], record["body"]))
    return {"status": "written"}


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Import without asking.")
@identity
@json_option
@click.pass_context
def import_(ctx: click.Context, /, file: Path, yes: bool, as_json: bool, **options: Any) -> None:
    """Import an export FILE (- for standard input) into the scope the flags describe.

    Without identity flags, into the scope the file was exported from. Importing the same
    file twice writes nothing the second time.
    """
    name = "standard input" if str(file) == "-" else shown_path(file, name_if_outside=True)
    if str(file) == "-":
        if not yes:
            raise FlagError(
                "FILE from standard input needs --yes (the prompt reads the same input)"
            )
        header, records = read_export(sys.stdin, name)
    else:
        try:
            with file.open(encoding="utf-8") as handle:
                header, records = read_export(handle, name)
        except UnicodeDecodeError:
            raise CommandError(f"{name}: must be UTF-8 text", code="invalid-file") from None
        except OSError as exc:
            raise CommandError(
                f"{name}: cannot be read ({exc.strerror or 'error'})", code="invalid-file"
            ) from None
    scope = scope_of(options)
    if not scope.model_dump(exclude_none=True):
        scope = scope_of_header(header)
    if not yes and not confirm(f"Import {len(records)} record(s)?", err=as_json):
        raise CommandError("nothing was imported: you did not confirm", code="not-confirmed")
    outcome = run(functools.partial(_import, profile_path(ctx), scope, records))
    refusals = outcome.pop("refusals")
    summary = {
        "records": len(records),
        **outcome,
        "refusals": refusals,
        "scope": scope.model_dump(exclude_none=True),
    }
    if as_json:
        echo_json(summary)
    else:
        refused = f", {outcome['refused']} refused" if outcome["refused"] else ""
        printer_of(ctx).ok(
            f"imported {len(records)} record(s): {outcome['written']} written, "
            f"{outcome['unchanged']} already there{refused}"
        )
        for refusal in refusals[:_SHOWN_REFUSALS]:
            printer_of(ctx).warn(
                f"record {refusal['record']} refused ({refusal['code']}): {refusal['message']}"
            )
        if len(refusals) > _SHOWN_REFUSALS:
            printer_of(ctx).warn(f"... and {len(refusals) - _SHOWN_REFUSALS} more refused")
    if refusals:
        ctx.exit(1)  # the others were imported: the summary above says what was refused


def scope_of_header(header: dict[str, Any]) -> Scope:
    """The scope an export was made in (its header's `scope`).

    Raises:
        CommandError: the header's scope is not a valid scope.
    """
    flags = {"user_id": "user", "agent_id": "agent", "session_id": "session"}
    flags |= {"workspace": "workspace", "tenant_id": "tenant"}
    raw = header.get("scope")
    if not isinstance(raw, dict) or any(key not in flags for key in raw):
        raise CommandError("the file's header has no valid scope", code="invalid-file")
    return scope_of({flags[key]: value for key, value in raw.items()})


def register(group: click.Group) -> None:
    """Add `export` and `import` to `group`."""
    group.add_command(export)
    group.add_command(import_)
