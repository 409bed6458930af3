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
import os
import re
import sys
import tempfile
from array import array
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NoReturn

import click
import orjson

from .._errors import ActionError, ManagementError, SourceError
from .._host import ManagementClient, MemoryHost, MemoryTurn
from .._models import ActionOffer, ManagementEntry, Scope
from .._text import visible_text
from ..storage import open_private, temporary_path
from ._options import (
    IDENTITY,
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
    memory_pages,
    missing_scope,
    mutate,
    runtime_records,
    space_names,
)
from ._reindex import Reindexed, fill_vectors, reindexable
from ._session import missing_flags, open_memory, operator_turn

__all__ = ["FORMAT", "VERSION", "ImportTally", "export", "import_"]

FORMAT = "mnemon-export"
VERSION = 1
# a cheap read per Source type: it fails when the scope lacks what the Source partitions by
_PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "spaces": ("inspect", {}),
    "runtime": ("read", {}),
    "documents": ("list", {"limit": 1}),
}
_KINDS = {"memory": "spaces", "fact": "runtime", "note": "runtime", "document": "documents"}
_KIND_CODES = {kind: code for code, kind in enumerate(_KINDS)}
_SHOWN_REFUSALS = 10
# the host's own input checks refuse a record before anything is written
_HOST_REFUSALS = frozenset({"invalid-input", "input-too-large"})
IMPORT_BATCH = 1_000  # the most memories the spaces Source's `import` takes in one call
_ENVELOPE = 1_024  # room for the batch's own JSON around its memories
# what `json.dumps(value, ensure_ascii=False)` writes (keys are made of it), with the
# encoder made once instead of per call
_json_text = json.JSONEncoder(ensure_ascii=False).encode


def _key(*parts: Any) -> str:
    # the same record always gets the same key: importing it twice replays the first write
    digest = hashlib.sha256(_json_text(parts).encode("utf-8")).hexdigest()
    return f"mnemon-import:{digest[:48]}"


# ---------------------------------------------------------------------- export


async def _export(path: Path, scope: Scope, write: Callable[[str], object]) -> _Exported:
    """Write the scope's export line by line with `write`: its header, records, end line.

    The Sources are probed first (the header names the ones this scope cannot reach); then
    each one's records are written as they are read, a page at a time for memories, so a
    large store is never held in memory. A failure part way leaves no end line: `import`
    refuses what was written.
    """
    async with open_memory(path) as (_, host):
        sources = []
        skipped = []
        entries = []
        for entry in host.management_catalog():
            if entry.type_id not in FIRST_PARTY:
                continue
            operation, probe = _PROBES[entry.type_id]
            try:
                await host.management_client(entry.source_key, scope).read(operation, probe)
            except ManagementError as exc:
                if not missing_scope(exc):
                    raise
                skipped.append(entry.source_key)  # this scope has no data there
                continue
            entries.append(entry)
            sources.append({"source": entry.source_key, "type": entry.type_id})
        header = {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "scope": scope.model_dump(exclude_none=True),
            "sources": sources,
            "skipped": skipped,
        }
        write(json.dumps(header, ensure_ascii=False))
        count = 0
        with progress("export", total=len(entries)) as advance:
            for entry in entries:
                client = host.management_client(entry.source_key, scope)
                async for page in _record_pages(client, entry):
                    for record in page:
                        write(json.dumps(record, ensure_ascii=False))
                    count += len(page)
                advance(1)
        write(json.dumps({"kind": "end", "records": count}))
        return _Exported(header, count)


@dataclass(frozen=True, slots=True)
class _Exported:
    header: dict[str, Any]
    records: int


async def _record_pages(
    client: ManagementClient, entry: ManagementEntry
) -> AsyncIterator[list[dict[str, Any]]]:
    if entry.type_id == "spaces":
        async for page in memory_pages(client, entry.source_key):
            yield page
    elif entry.type_id == "runtime":
        yield await runtime_records(client, entry.source_key)
    else:
        yield await document_records(client, entry.source_key, bodies=True)


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
    # a link planted under the final name counts as there: it is replaced, never followed
    if out is not None and os.path.lexists(out) and not force:
        shown = shown_path(out, profile_path(ctx).parent, name_if_outside=True)
        raise CommandError(f"{shown} exists; use --force to overwrite it", code="exists")
    job = functools.partial(_export, profile_path(ctx), scope_of(options))
    if out is None:
        if as_json:
            raise FlagError("--json needs --out FILE: the export itself is written to stdout")
        run(functools.partial(job, click.echo))
        return
    shown = shown_path(out, profile_path(ctx).parent, name_if_outside=True)
    exported = _export_to(out, shown, job)
    header = exported.header
    summary = {
        "out": shown,
        "records": exported.records,
        "sources": header["sources"],
        "skipped": header["skipped"],
    }
    if as_json:
        echo_json(summary)
        return
    printer_of(ctx).ok(f"exported {exported.records} record(s) to {summary['out']}")
    for key in header["skipped"]:
        printer_of(ctx).warn(f"{key} skipped: the scope lacks an id it partitions by")


def _export_to(
    out: Path, shown: str, job: Callable[[Callable[[str], object]], Awaitable[_Exported]]
) -> _Exported:
    """Run the export `job` into `out`: a private file, complete or not there at all.

    The lines go to a temporary file beside `out` with a fresh random name, created
    exclusively, 0600 and never through a link (`mnemon.storage`), so nothing planted in the
    folder is followed, written or truncated; flushed to disk, it is renamed over `out` in
    one step, and a reader never sees half an export under its name.

    Raises:
        CommandError: `out` cannot be written (a missing folder, no permission, a full disk).
    """
    temporary = temporary_path(out)
    try:
        descriptor = open_private(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except (OSError, SourceError) as exc:
        raise _unwritable(shown, exc) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            exported = run(functools.partial(job, lambda line: handle.write(line + "\n")))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, out)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _unwritable(shown, exc) from None
    except BaseException:
        temporary.unlink(missing_ok=True)  # an export that did not finish leaves no file
        raise
    return exported


def _unwritable(shown: str, exc: OSError | SourceError) -> CommandError:
    reason = exc.strerror if isinstance(exc, OSError) else exc.code
    return CommandError(
        f"{shown}: cannot be written ({reason or 'error'}); nothing was exported",
        code="invalid-file",
    )


# ---------------------------------------------------------------------- import


class ExportRecords:
    """The records of an export file, checked whole, kept on disk and read back one by one.

    `read_export` copies each record's line to `spool` (a private temporary file) as it
    checks it and keeps only where the line starts and what kind of record it holds (9
    bytes a record), so a file of a million records is not held in memory; and what is
    imported is exactly what was checked, whatever happens to the file meanwhile.
    """

    def __init__(self, spool: IO[bytes]) -> None:
        self._spool = spool
        self._starts = array("q")
        self._kinds = bytearray()
        self.sources: set[tuple[str, str]] = set()  # (kind, source) of the records

    def __len__(self) -> int:
        return len(self._starts)

    def add(self, line: bytes, record: dict[str, Any]) -> None:
        """Keep one checked record: its line, as read.

        Raises:
            CommandError: the temporary copy cannot be written (a full disk).
        """
        try:
            start = self._spool.tell()
            self._spool.write(line if line.endswith(b"\n") else line + b"\n")
        except OSError as exc:
            raise CommandError(
                f"nothing was imported: the records' temporary copy cannot be written "
                f"({exc.strerror or 'error'})",
                code="no-space",
            ) from None
        self._starts.append(start)
        self._kinds.append(_KIND_CODES[record["kind"]])
        self.sources.add((record["kind"], record["source"]))

    def numbered(self, *, memories: bool) -> Iterator[tuple[int, dict[str, Any]]]:
        """(record number, record) of the memories, newest last; or of the other records."""
        wanted = range(len(self) - 1, -1, -1) if memories else range(len(self))
        for index in wanted:
            if (self._kinds[index] == _KIND_CODES["memory"]) == memories:
                yield index + 1, self._record(index)

    def _record(self, index: int) -> dict[str, Any]:
        self._spool.seek(self._starts[index])
        record: dict[str, Any] = orjson.loads(self._spool.readline())
        return record


@contextmanager
def _spool() -> Iterator[IO[bytes]]:
    """A private temporary file (no name: only this process reaches it), deleted after.

    Raises:
        CommandError: the temporary folder cannot be written.
    """
    try:
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the `with` below
    except OSError as exc:
        raise CommandError(
            f"nothing was imported: no temporary file can be made ({exc.strerror or 'error'})",
            code="no-space",
        ) from None
    with spool:
        yield spool


def read_export(handle: IO[bytes], name: str, records: ExportRecords) -> dict[str, Any]:
    """The header of an export file; its records go to `records`, checked line by line.

    Raises:
        CommandError: not UTF-8, not an export, another format version, a bad line, or a
            file cut short.
    """
    header: dict[str, Any] | None = None
    ended = False
    for number, raw in enumerate(handle, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(f"{name}: must be UTF-8 text", code="invalid-file") from None
        if not line.strip():
            continue
        value = _line_value(line, number, name)
        if not isinstance(value, dict):
            raise CommandError(f"{name}: line {number} is not a JSON object", code="invalid-file")
        if header is None:
            if value.get("format") != FORMAT:
                raise CommandError(
                    f"{name}: not a mnemon export (its first line has no format {FORMAT!r})",
                    code="invalid-file",
                )
            version = value.get("version")
            if not _is_integer(version):
                raise CommandError(
                    f"{name}: not a mnemon export (its first line has no version number)",
                    code="invalid-file",
                )
            if version != VERSION:
                raise CommandError(
                    f"{name}: written in export format version {version}; this "
                    f"mnemon reads version {VERSION} only. Export it again with a mnemon "
                    f"that writes version {VERSION}.",
                    code="unsupported-version",
                )
            header = value
            continue
        if ended:
            raise CommandError(f"{name}: line {number} follows the end", code="invalid-file")
        if value.get("kind") == "end":
            count = value.get("records")
            if not _is_integer(count):
                raise CommandError(
                    f"{name}: the end line has no record count (the file has {len(records)})",
                    code="invalid-file",
                )
            if count != len(records):
                raise CommandError(
                    f"{name}: the end says {count} records, the file has {len(records)}",
                    code="invalid-file",
                )
            ended = True
            continue
        kind = value.get("kind")
        if kind not in _KINDS:
            # a kind of a later version is named; anything else in its place is not shown
            shown = f" {kind!r}" if isinstance(kind, str) and _KIND_NAME.match(kind) else ""
            raise CommandError(
                f"{name}: line {number}: unknown record kind{shown}", code="invalid-file"
            )
        needed = ("source", "title", "body") if kind == "document" else ("source", "text")
        if kind == "memory":
            needed = ("source", "text", "space")
        missing = [field for field in needed if not isinstance(value.get(field), str)]
        if missing:
            raise CommandError(
                f"{name}: line {number}: a {kind} record needs {missing[0]!r} (a string)",
                code="invalid-file",
            )
        records.add(raw, value)
    if header is None:
        raise CommandError(f"{name}: empty, not a mnemon export", code="invalid-file")
    if not ended:
        raise CommandError(
            f"{name}: cut short (no end line): nothing was imported", code="invalid-file"
        )
    return header


_LONG_DIGITS = re.compile(r"\d{19}")  # the shortest integer that may not fit in 64 bits
_INTEGER_RANGE = range(-(2**63), 2**64)  # what orjson reads and writes as an integer
_KIND_NAME = re.compile(r"[a-z][a-z_-]{0,31}\Z")
# far deeper than any line of an export (a memory's tags are two levels down), and shallow
# enough for every recursive walk of the value, here and in the host, to stay clear of
# Python's recursion limit
MAX_DEPTH = 64


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _line_value(line: str, number: int, name: str) -> Any:
    """The JSON value of one line, refused when no store keeps it exactly.

    Raises:
        CommandError: naming the line and what is wrong with it, never quoting it: not JSON,
            nested deeper than `MAX_DEPTH`, an integer wider than 64 bits, NaN or Infinity,
            or a lone surrogate.
    """
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        _refuse_stdlib_json(line, number, name)
    # counted first, in C: only a line with that many brackets is walked
    if line.count("[") + line.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise _too_deep(number, name)
    if _LONG_DIGITS.search(line):
        # orjson reads an integer beyond 64 bits as a float: never change a value silently
        _refuse_wide_integers(_stdlib_value(line, number, name), number, name)
    return value


def _stdlib_value(line: str, number: int, name: str) -> Any:
    """The line as the standard library reads it (NaN, Infinity, integers of any width).

    Raises:
        CommandError: not JSON, nested deeper than `MAX_DEPTH`, or an integer of more digits
            than Python converts (`sys.get_int_max_str_digits`), far wider than 64 bits.
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        raise CommandError(f"{name}: line {number} is not JSON", code="invalid-file") from None
    except RecursionError:
        raise _too_deep(number, name) from None
    except ValueError:  # only an integer too long to convert gets here
        raise _too_wide(number, name) from None
    if _deeper_than(value, MAX_DEPTH):
        raise _too_deep(number, name)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays and objects more than `limit` levels deep (no recursion)."""
    level = [value]
    for _ in range(limit):
        level = [
            item
            for container in level
            if isinstance(container, dict | list)
            for item in (container.values() if isinstance(container, dict) else container)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) for item in level)


def _too_deep(number: int, name: str) -> CommandError:
    return CommandError(
        f"{name}: line {number} is nested deeper than {MAX_DEPTH} levels", code="invalid-file"
    )


def _too_wide(number: int, name: str) -> CommandError:
    return CommandError(
        f"{name}: line {number} holds an integer wider than 64 bits", code="invalid-file"
    )


def _refuse_wide_integers(value: Any, number: int, name: str) -> None:
    """Refuse a line holding an integer no store keeps exactly (wider than 64 bits).

    Raises:
        CommandError: naming the line.
    """
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if value not in _INTEGER_RANGE:
            raise _too_wide(number, name)
    elif isinstance(value, dict):
        for item in value.values():
            _refuse_wide_integers(item, number, name)
    elif isinstance(value, list):
        for item in value:
            _refuse_wide_integers(item, number, name)


def _refuse_stdlib_json(line: str, number: int, name: str) -> NoReturn:
    """Refuse a line orjson refused: not JSON, or JSON holding a value no store keeps.

    Raises:
        CommandError: always, naming the line and what is wrong with it.
    """
    value = _stdlib_value(line, number, name)
    # orjson reads an integer of more than 309 digits as infinity, and refuses it
    _refuse_wide_integers(value, number, name)
    # the standard library also reads NaN, Infinity and lone surrogate escapes (\\ud800)
    what = "NaN or Infinity"
    if _has_lone_surrogate(value):
        what = "text that is not valid Unicode (a lone surrogate)"
    raise CommandError(f"{name}: line {number} holds {what}", code="invalid-file")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False


def _catalog(host: MemoryHost) -> dict[str, ManagementEntry]:
    """The mounted Sources with a management plane, by key (taken once per command)."""
    return {entry.source_key: entry for entry in host.management_catalog()}


def _target(
    catalog: Mapping[str, ManagementEntry], kind: str, source: str, mapping: dict[str, str]
) -> str:
    """The mounted Source a record goes to: the same key and type, else the first of its type."""
    wanted_type = _KINDS[kind]
    entry = catalog.get(source)
    if entry is not None and entry.type_id == wanted_type:
        return source
    if source not in mapping:
        for key, candidate in catalog.items():
            if candidate.type_id == wanted_type:
                mapping[source] = key
                break
        else:
            raise CommandError(
                f"the file holds {kind} records of {source}, and no {wanted_type} "
                "Source is mounted: nothing more was imported",
                code="unknown-source",
            )
    return mapping[source]


def _type_of(catalog: Mapping[str, ManagementEntry], key: str) -> str | None:
    entry = catalog.get(key)
    return None if entry is None else entry.type_id


def _refused_alone(exc: ActionError | ManagementError) -> bool:
    """Whether one record was refused by itself with nothing written: the import goes on.

    The host's own input checks, or a Source's final refusal of that record (an input it
    refuses, a store that is full): whatever the Source, by the failure class it gave. Anything
    retryable or about access, or a write that may have happened, stops the import.
    """
    if exc.code in _HOST_REFUSALS:
        return True
    if exc.kind != "terminal":
        return False
    receipt = getattr(exc, "receipt", None)
    return receipt is None or getattr(receipt, "completion", None) == "failed"


async def _write_action(
    turn: MemoryTurn, offer_id: str, payload: dict[str, Any], key: str
) -> dict[str, Any]:
    def authorize(offer: ActionOffer) -> bool:
        return True  # the person confirmed the whole import before it started

    try:
        receipt = await turn.execute_action(offer_id, payload, authorize, idempotency_key=key)
    except ActionError as exc:
        if _refused_alone(exc):
            return {"status": "refused", "code": exc.code, "message": _said(exc)}
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


@dataclass(slots=True)
class ImportTally:
    """How far an import got: counted as it goes, so an interruption can say it too."""

    written: int = 0
    unchanged: int = 0
    refused: int = 0
    #: records of the write under way: they may or may not be stored when it is cut short
    in_flight: int = 0
    refusals: list[dict[str, Any]] = field(default_factory=list)
    #: the vectors the written memories still lacked, given after the writes
    vectors: list[Reindexed] = field(default_factory=list)

    def refuse(self, number: int, code: str, message: str) -> None:
        """Count record `number` as refused, with a code and a message naming no content."""
        self.refused += 1
        self.refusals.append({"record": number, "code": code, "message": message})

    def interrupted(self) -> str:
        """What an interruption (Ctrl-C) left behind, in one line."""
        done = self.written + self.unchanged
        if not done and not self.in_flight:
            return "interrupted: nothing was imported"
        line = f"interrupted: {self.written} record(s) written and {self.unchanged} already there"
        if self.in_flight:
            line += f"; the {self.in_flight} being written may or may not have been stored"
        return line + ". Run the same import again to finish: it never duplicates"


@dataclass(frozen=True, slots=True)
class _Memory:
    """A memory record ready to send: what `import` takes, its size, and its content's key."""

    number: int
    source: str  # the Source and space the record names
    space: str
    key: str  # its idempotency key, made from its content: the same content, the same key
    item: dict[str, Any]  # text, tags, entities and the idempotency key
    size: int  # bytes of its compact JSON


def _memory(number: int, record: dict[str, Any]) -> _Memory:
    key = _memory_key(record)
    item = {
        "text": record["text"],
        "tags": _labels(record.get("tags")),
        "entities": _labels(record.get("entities")),
        "idempotency_key": key,
    }
    size = len(orjson.dumps(item))
    return _Memory(number, str(record["source"]), str(record["space"]), key, item, size)


def _labels(value: Any) -> Any:
    # a value that is not a list goes as it is, for the Source to refuse by name
    return list(value) if isinstance(value, list | tuple) else value if value else []


async def _import(path: Path, scope: Scope, records: ExportRecords, tally: ImportTally) -> None:
    async with AsyncExitStack() as stack:
        profile, host = await stack.enter_async_context(open_memory(path, operator=True))
        catalog = _catalog(host)
        mapping: dict[str, str] = {}
        present: dict[str, set[tuple[str, ...]]] = {}
        known: dict[str, set[str]] = {}  # the keys of the memories in each spaces Source
        # each (kind, Source) of the file resolved once to the mounted Source it goes to
        resolved = {pair: _target(catalog, *pair, mapping) for pair in records.sources}
        targets = sorted(set(resolved.values()))
        # a View is composed only for Sources written through the model's actions
        one_by_one = [
            k for k in targets if _type_of(catalog, k) == "spaces" and not _bulk(catalog, k)
        ]
        turn = await stack.enter_async_context(operator_turn(host, scope)) if one_by_one else None
        offers = set() if turn is None else {offer.id for offer in turn.view.offers}
        # every Source the file writes to must take writes in this scope before one is made
        for key in targets:
            operation, probe = _PROBES[_type_of(catalog, key) or ""]
            try:
                await host.management_client(key, scope).read(operation, probe)
            except ManagementError as exc:
                flags = missing_flags(profile, key, _type_of(catalog, key), scope)
                add = f"; add {' and '.join(flags)}" if missing_scope(exc) and flags else ""
                raise CommandError(
                    f"nothing was imported: {key} cannot be written in this scope "
                    f"({visible_text(str(exc), keep_newlines=False)}{add})",
                    code="missing-scope" if missing_scope(exc) else exc.code,
                ) from None
            if key in one_by_one and f"{key}/remember" not in offers:
                raise CommandError(
                    f"nothing was imported: {key} offers no remember action in this scope "
                    "(see `mnemon inspect` with the same flags)",
                    code="no-action",
                )
        spaces: dict[str, list[str]] = {}  # the names of the spaces of each spaces Source
        # memories written before without a key (by `remember`) are recognised by content
        for key in sorted({to for (kind, _), to in resolved.items() if kind == "memory"}):
            client = host.management_client(key, scope)
            known[key], spaces[key] = await _memory_keys(client, key)
        # memories are listed newest first: written oldest first, they keep their order
        memories = (_memory(n, record) for n, record in records.numbered(memories=True))
        with progress("import", total=len(records)) as advance:
            for number, record in records.numbered(memories=False):
                kind = record["kind"]
                key = _target(catalog, kind, record["source"], mapping)
                if kind in ("fact", "note"):
                    await _import_entry(host, key, scope, number, record, present, tally)
                else:
                    await _import_document(host, key, scope, number, record, present, tally)
                advance(1)
            budget = profile.settings.max_input_bytes - _ENVELOPE
            writable = _in_spaces(memories, catalog, mapping, spaces, tally, advance)
            for key, space, batch in _memory_batches(catalog, mapping, writable, budget):
                if _bulk(catalog, key):
                    await _import_batch(host, key, scope, space, batch, known[key], tally, budget)
                else:
                    assert turn is not None
                    for memory in batch:
                        await _import_memory(turn, key, space, memory, known[key], tally)
                advance(len(batch))
        # what the writes left without vectors gets them now, so recall finds it by meaning
        for entry in reindexable(host):
            if entry.source_key in targets:
                vectors = Reindexed(entry.source_key)
                try:
                    if await fill_vectors(host, entry.source_key, scope, vectors):
                        tally.vectors.append(vectors)
                except (ManagementError, CommandError) as exc:
                    # the records are stored: vectors that cannot be given now follow later
                    vectors.failed = exc.code
                    tally.vectors.append(vectors)


async def _memory_keys(client: ManagementClient, key: str) -> tuple[set[str], list[str]]:
    """The key each memory of the Source's spaces makes from its content; the spaces' names.

    Read a page at a time and kept as keys only, so a large space costs no copy of its
    texts; a progress bar counts the memories read, since a space of a million takes about
    half a minute before the first write.
    """
    spaces = await space_names(client)
    counts = [space["memories"] for space in spaces if type(space.get("memories")) is int]
    total = sum(counts) if len(counts) == len(spaces) else None  # a Provider may not count
    keys: set[str] = set()
    with progress(f"reading {key}", total=total) as advance:
        async for page in memory_pages(client, key):
            keys.update(_memory_key(item) for item in page)
            advance(len(page))
    return keys, [str(space.get("name")) for space in spaces]


def _in_spaces(
    memories: Iterable[_Memory],
    catalog: Mapping[str, ManagementEntry],
    mapping: dict[str, str],
    spaces: Mapping[str, list[str]],
    tally: ImportTally,
    advance: Callable[[int], None],
) -> Iterator[_Memory]:
    """The memories whose space their Source has in this scope; the others are refused alone.

    The Source would refuse the whole batch naming such a space: refused here, a record
    naming a space that does not exist (or is not in this scope) costs no other record.
    """
    for memory in memories:
        key = _target(catalog, "memory", memory.source, mapping)
        if memory.space in spaces[key]:
            yield memory
            continue
        # the space's name comes from the file: not shown, like the record's content
        tally.refuse(
            memory.number,
            "unknown-space",
            f"its space is not one of the spaces of {key} in this scope "
            f"({', '.join(spaces[key]) or 'none'})",
        )
        advance(1)


def _bulk(catalog: Mapping[str, ManagementEntry], key: str) -> bool:
    """Whether the Source's management plane takes many memories at once (`import`)."""
    entry = catalog.get(key)
    return entry is not None and any(op.id == "import" for op in entry.operations)


def _memory_batches(
    catalog: Mapping[str, ManagementEntry],
    mapping: dict[str, str],
    memories: Iterable[_Memory],
    budget: int,
) -> Iterator[tuple[str, str, list[_Memory]]]:
    """Runs of memories for one Source and space, at most `IMPORT_BATCH` and `budget` bytes."""
    batch: list[_Memory] = []
    where: tuple[str, str] | None = None
    size = 0
    for memory in memories:
        here = (_target(catalog, "memory", memory.source, mapping), memory.space)
        item = memory.size + 8  # its comma, with room to spare
        if batch and (here != where or len(batch) >= IMPORT_BATCH or size + item > budget):
            assert where is not None
            yield where[0], where[1], batch
            batch, size = [], 0
        where = here
        batch.append(memory)
        size += item
    if batch and where is not None:
        yield where[0], where[1], batch


async def _import_batch(
    host: MemoryHost,
    key: str,
    scope: Scope,
    space: str,
    batch: list[_Memory],
    known: set[str],
    tally: ImportTally,
    budget: int,
) -> None:
    """Write one batch through the Source's `import`; count and keep each memory's result.

    Raises:
        CommandError: the batch failed as a whole, or was stored but not confirmed durable.
    """
    sent: list[_Memory] = []
    for memory in batch:
        if memory.key in known:
            tally.unchanged += 1
        elif memory.size > budget:
            # the host would refuse the whole call: this one memory alone is refused
            tally.refuse(memory.number, "too-large", "larger than max_input_bytes")
        else:
            sent.append(memory)
    if not sent:
        return
    tally.in_flight = len(sent)
    payload = {"space": space, "memories": [memory.item for memory in sent]}
    try:
        result = await mutate(host, key, scope, "import", payload)
    except ManagementError as exc:
        raise CommandError(
            f"{key}/import: {exc.code}: a batch of {len(sent)} memories failed and may or may "
            f"not have been stored; {_kept(tally)}. Run the same import again to finish: it "
            "never duplicates",
            code=exc.code,
        ) from None
    output = result.output if isinstance(result.output, Mapping) else {}
    results = output.get("results")
    if not isinstance(results, Sequence) or len(results) != len(sent):
        raise CommandError(
            f"{key}/import: the Source answered with "
            f"{len(results) if isinstance(results, Sequence) else 0} results for "
            f"{len(sent)} memories: stopped here; run the same import again to finish",
            code="provider_error",
        )
    tally.in_flight = 0
    accepted = 0
    for memory, outcome in zip(sent, results, strict=True):
        completion = outcome.get("completion") if isinstance(outcome, Mapping) else None
        if completion == "refused":
            tally.refuse(
                memory.number,
                str(outcome.get("code", "refused")),
                visible_text(str(outcome.get("message", "")), keep_newlines=False),
            )
            continue
        known.add(memory.key)
        if outcome.get("replayed") is True:
            tally.unchanged += 1
        else:
            tally.written += 1
        accepted += completion != "committed"
    if accepted:
        raise CommandError(
            f"{key}/import: {accepted} memories were accepted, not committed (the store does "
            "not confirm durability): stopped here",
            code="not-committed",
        )


async def _import_memory(
    turn: MemoryTurn,
    key: str,
    space: str,
    memory: _Memory,
    known: set[str],
    tally: ImportTally,
) -> None:
    if memory.key in known:
        tally.unchanged += 1
        return
    item = memory.item
    payload = {"text": item["text"], "space": space, "tags": item["tags"]}
    payload["entities"] = item["entities"]
    tally.in_flight = 1
    outcome = await _write_action(turn, f"{key}/remember", payload, item["idempotency_key"])
    tally.in_flight = 0
    if outcome["status"] == "refused":
        tally.refuse(memory.number, outcome["code"], outcome["message"])
        return
    known.add(memory.key)
    if outcome["status"] == "written":
        tally.written += 1
    else:
        tally.unchanged += 1


def _memory_key(record: dict[str, Any]) -> str:
    tags = _labels_json(record.get("tags"))
    entities = _labels_json(record.get("entities"))
    return _key("memory", str(record["space"]), str(record["text"]), tags, entities)


def _labels_json(value: Any) -> str:
    # part of the idempotency key: the same text for the same labels in every version
    return _json_text(_sorted(value)) if value else "[]"


def _sorted(value: Any) -> Any:
    # labels are strings, sorted as such; anything else (to be refused) keeps its shape
    return sorted(value, key=str) if isinstance(value, list | tuple) else value or []


async def _import_entry(
    host: MemoryHost,
    key: str,
    scope: Scope,
    number: int,
    record: dict[str, Any],
    present: dict[str, set[tuple[str, ...]]],
    tally: ImportTally,
) -> None:
    target = "user" if record["kind"] == "fact" else "memory"
    if key not in present:
        client = host.management_client(key, scope)
        present[key] = {
            (str(item["target"]), str(item["text"])) for item in await runtime_records(client, key)
        }
    if (target, record["text"]) in present[key]:
        tally.unchanged += 1
        return
    change: dict[str, Any] = {"target": target, "operation": "add", "text": record["text"]}
    if isinstance(record.get("importance"), int):
        change["importance"] = record["importance"]
    if await _write_record(host, key, scope, "mutate", change, number, tally):
        present[key].add((target, record["text"]))


async def _import_document(
    host: MemoryHost,
    key: str,
    scope: Scope,
    number: int,
    record: dict[str, Any],
    present: dict[str, set[tuple[str, ...]]],
    tally: ImportTally,
) -> None:
    if key not in present:
        client = host.management_client(key, scope)
        present[key] = {
            (str(item["title"]), str(item["body"]))
            for item in await document_records(client, key, bodies=True)
        }
    if (record["title"], record["body"]) in present[key]:
        tally.unchanged += 1
        return
    document = {"title": record["title"], "body": record["body"]}
    if await _write_record(host, key, scope, "create", document, number, tally):
        present[key].add((record["title"], record["body"]))


async def _write_record(
    host: MemoryHost,
    key: str,
    scope: Scope,
    operation: str,
    payload: dict[str, Any],
    number: int,
    tally: ImportTally,
) -> bool:
    """Write record `number` and count it; False when the Source refused it (counted too).

    Raises:
        CommandError: the write failed otherwise (a timeout, a damaged store): it may or may
            not have been stored, and the import stops there.
    """
    tally.in_flight = 1
    try:
        await mutate(host, key, scope, operation, payload)
    except ManagementError as exc:
        tally.in_flight = 0
        if _refused_alone(exc):
            tally.refuse(number, exc.code, _said(exc))  # that record alone: the others go on
            return False
        raise CommandError(
            f"{key}/{operation}: {exc.code}: record {number} failed and may or may not have "
            f"been stored; {_kept(tally)}. Run the same import again to finish: it never "
            "duplicates",
            code=exc.code,
        ) from None
    tally.in_flight = 0
    tally.written += 1
    return True


def _said(exc: ActionError | ManagementError) -> str:
    # the host's words name the field and the rule, never the value; a Source's only its code
    return visible_text(str(exc), keep_newlines=False)


def _kept(tally: ImportTally) -> str:
    if tally.written:
        return f"the {tally.written} record(s) written before it are kept"
    return "nothing was written before it"


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
    if str(file) == "-" and not yes:
        raise FlagError("FILE from standard input needs --yes (the prompt reads the same input)")
    with _spool() as spool:
        records = ExportRecords(spool)
        if str(file) == "-":
            header = read_export(sys.stdin.buffer, name, records)
        else:
            try:
                with file.open("rb") as handle:
                    header = read_export(handle, name, records)
            except OSError as exc:
                raise CommandError(
                    f"{name}: cannot be read ({exc.strerror or 'error'})", code="invalid-file"
                ) from None
        scope = scope_of(options)
        where = ""
        if not scope.model_dump(exclude_none=True):
            scope = scope_of_header(header)
            where = " (the scope the file was exported from)"
        question = f"Import {len(records)} record(s) into {_scope_words(scope)}{where}?"
        if not yes and not confirm(question, err=as_json):
            raise CommandError("nothing was imported: you did not confirm", code="not-confirmed")
        tally = ImportTally()
        job = functools.partial(_import, profile_path(ctx), scope, records, tally)
        run(job, tally.interrupted)
    refusals = sorted(tally.refusals, key=lambda refusal: refusal["record"])
    summary = {
        "records": len(records),
        "written": tally.written,
        "unchanged": tally.unchanged,
        "refused": tally.refused,
        "refusals": refusals,
        "vectors": [vectors.as_json() for vectors in tally.vectors],
        "scope": scope.model_dump(exclude_none=True),
    }
    if as_json:
        echo_json(summary)
    else:
        # only what was written is called imported: replays and refusals are counted apart
        refused = f", {tally.refused} refused" if tally.refused else ""
        printer_of(ctx).ok(
            f"imported {tally.written} of {len(records)} record(s); "
            f"{tally.unchanged} already there{refused}"
        )
        for vectors in tally.vectors:
            if vectors.failed:
                printer_of(ctx).warn(
                    f"{vectors.source}: the vectors could not be given now ({vectors.failed}); "
                    "the memories are found by keyword, and by meaning once they follow"
                )
            elif vectors.remaining:
                printer_of(ctx).warn(
                    f"{vectors.source}: {vectors.remaining} memory(ies) still wait for their "
                    "vectors (found by keyword now, by meaning once they follow; "
                    "`mnemon reindex` finishes them)"
                )
        for refusal in refusals[:_SHOWN_REFUSALS]:
            printer_of(ctx).warn(
                f"record {refusal['record']} refused ({refusal['code']}): {refusal['message']}"
            )
        if len(refusals) > _SHOWN_REFUSALS:
            printer_of(ctx).warn(f"... and {len(refusals) - _SHOWN_REFUSALS} more refused")
    if refusals:
        ctx.exit(1)  # the others were imported: the summary above says what was refused


def _scope_words(scope: Scope) -> str:
    """The scope as the person gave it: `tenant 'acme', user 'ada', workspace 'billing'`."""
    flags = {field: flag for flag, field, _ in IDENTITY}
    given = scope.model_dump(exclude_none=True)
    words = [
        f"{flags.get(field, field)} {visible_text(str(value), keep_newlines=False)!r}"
        for field, value in given.items()
    ]
    return ", ".join(words) or "the scope without ids (no user, agent, workspace or tenant)"


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
