"""`mnemon export` and `mnemon import`: one scope's records as versioned JSON Lines.

The first line is a header (`{"format": "mnemon-export", "version": 2, ...}`), then one line
per record (`{"source": <key>, "type": <Source type>, "kind": <record kind>, "record": {...}}`)
of every Source that declares readable records, then a trailer (`{"kind": "end", "records":
N}`) so a file cut short is refused rather than half imported. Version 1 files (flat lines of
the kinds `memory`, `fact`, `note` and `document`) are still read: their kinds are record kinds,
and go to the Sources that declare them.

Import never duplicates: each record is written with an idempotency key derived from its
kind's `key_fields` (so a second import replays instead of writing), and a record already
present with the same content is left as it is. Records go in batches through the Source's
`records-write` (one result per record), so one refused record costs no other.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import re
import sys
import tempfile
from array import array
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NoReturn

import click
import orjson

from .._errors import ManagementError, SourceError
from .._host import ManagementClient, MemoryHost
from .._models import ID_PATTERN, MAX_RECORD_PAGE, ManagementEntry, RecordKind, Scope
from .._schema import input_problems
from .._storage import open_private, temporary_path
from .._text import visible_text
from ._options import (
    IDENTITY,
    CommandError,
    FlagError,
    confirm,
    echo_json,
    identity,
    json_option,
    not_confirmed,
    printer_of,
    profile_path,
    run,
    scope_of,
    user_message,
)
from ._paths import shown_path
from ._progress import progress
from ._records import (
    content_key,
    missing_scope,
    mutate,
    record_kinds,
    record_pages,
    unreadable_kinds,
)
from ._reindex import Reindexed, fill_vectors, reindexable
from ._session import missing_flags, open_memory

__all__ = ["FORMAT", "VERSION", "ImportTally", "export", "import_"]

FORMAT = "mnemon-export"
VERSION = 2
READS = (1, 2)  # the versions import reads
# version 1 named four kinds, each line flat, with these string fields at least
_V1_FIELDS = {
    "memory": ("source", "text", "space"),
    "fact": ("source", "text"),
    "note": ("source", "text"),
    "document": ("source", "title", "body"),
}
_V1_LINE = ("kind", "source", "type")  # the fields of a version 1 line that are not the record's
_KIND = re.compile(ID_PATTERN)
_SHOWN_REFUSALS = 10
IMPORT_BATCH = MAX_RECORD_PAGE  # the most records one `records-write` takes
_ENVELOPE = 1_024  # room for the batch's own JSON around its records
_PER_RECORD = 48  # room for the JSON around one record and its idempotency key in a batch


# ---------------------------------------------------------------------- export


async def _export(path: Path, scope: Scope, write: Callable[[str], object]) -> _Exported:
    """Write the scope's export line by line with `write`: its header, records, end line.

    The Sources are probed first (the header names the ones this scope cannot reach); then
    each one's records are written as they are read, a page at a time, so a large store is
    never held in memory. A failure part way leaves no end line: `import` refuses what was
    written.
    """
    async with open_memory(path) as (_, host):
        kinds: dict[str, tuple[ManagementEntry, list[RecordKind]]] = {}
        for entry, kind in record_kinds(host, "readable"):
            kinds.setdefault(entry.source_key, (entry, []))[1].append(kind)
        sources = []
        skipped = []
        chosen = []
        for key, (entry, declared) in kinds.items():
            probe = {"kind": declared[0].id, "limit": 1}
            try:
                await host.management_client(key, scope).read("records-read", probe)
            except ManagementError as exc:
                if not missing_scope(exc):
                    raise
                skipped.append(key)  # this scope has no data there
                continue
            chosen.append((entry, declared))
            sources.append(
                {"source": key, "type": entry.type_id, "kinds": [kind.id for kind in declared]}
            )
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
        with progress("export", total=len(chosen)) as advance:
            for entry, declared in chosen:
                client = host.management_client(entry.source_key, scope)
                where = {"source": entry.source_key, "type": entry.type_id}
                for kind in declared:
                    async for page in record_pages(client, kind):
                        for record in page:
                            line = {**where, "kind": kind.id, "record": record}
                            write(json.dumps(line, ensure_ascii=False))
                        count += len(page)
                advance(1)
        write(json.dumps({"kind": "end", "records": count}))
        return _Exported(header, count, unreadable_kinds(host))


@dataclass(frozen=True, slots=True)
class _Exported:
    header: dict[str, Any]
    records: int
    # the kinds declared but not readable: not in the file, and said so
    unexported: list[dict[str, str]]


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
    """Export the memory of the scope the flags describe as JSON Lines (format version 2).

    It covers every Source that declares readable records: with the first-party Sources,
    long-term memories, user facts, agent notes and documents with their bodies (documents
    need --workspace).
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
        "unexported": exported.unexported,
    }
    if as_json:
        echo_json(summary)
        return
    printer_of(ctx).ok(f"exported {exported.records} record(s) to {summary['out']}")
    for key in header["skipped"]:
        printer_of(ctx).warn(f"{key} skipped: the scope lacks an id it partitions by")
    for unexported in exported.unexported:
        printer_of(ctx).line(f"not exported: {unexported['source_key']}: {unexported['reason']}")


def _export_to(
    out: Path, shown: str, job: Callable[[Callable[[str], object]], Awaitable[_Exported]]
) -> _Exported:
    """Run the export `job` into `out`: a private file, complete or not there at all.

    The lines go to a temporary file beside `out` with a fresh random name, created
    exclusively, 0600 and never through a link (`mnemon.sdk.storage`), so nothing planted in the
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


# ---------------------------------------------------------------------- import


class ExportRecords:
    """The records of an export file, checked whole, kept on disk and read back one by one.

    `read_export` copies each record's line to `spool` (a private temporary file) as it
    checks it and keeps only where the line starts and which (kind, Source) it is of (10
    bytes a record), so a file of a million records is not held in memory; and what is
    imported is exactly what was checked, whatever happens to the file meanwhile.
    """

    def __init__(self, spool: IO[bytes]) -> None:
        self._spool = spool
        self._starts = array("q")
        self._pairs = array("H")
        self._pair_codes: dict[tuple[str, str, str | None], int] = {}
        self.version = VERSION

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def sources(self) -> list[tuple[str, str, str | None]]:
        """The (kind, Source key, Source type) of the records, in the order first seen."""
        return list(self._pair_codes)

    def add(self, line: bytes, pair: tuple[str, str, str | None]) -> None:
        """Keep one checked record: its line, as read, and its (kind, Source, type).

        Raises:
            CommandError: the temporary copy cannot be written (a full disk), or the file
                names more than 65,535 (kind, Source) pairs.
        """
        code = self._pair_codes.setdefault(pair, len(self._pair_codes))
        if code > 0xFFFF:
            raise CommandError(
                "nothing was imported: the file names too many Sources and kinds",
                code="invalid-file",
            )
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
        self._pairs.append(code)

    def numbered(
        self, pairs: set[tuple[str, str, str | None]], *, backwards: bool
    ) -> Iterator[tuple[int, tuple[str, str, str | None], dict[str, Any]]]:
        """(record number, pair, record) of each record of `pairs`, in file order or backwards."""
        codes = {self._pair_codes[pair]: pair for pair in pairs if pair in self._pair_codes}
        wanted = range(len(self) - 1, -1, -1) if backwards else range(len(self))
        for index in wanted:
            pair = codes.get(self._pairs[index])
            if pair is not None:
                yield index + 1, pair, self._record(index)

    def _record(self, index: int) -> dict[str, Any]:
        self._spool.seek(self._starts[index])
        value: dict[str, Any] = orjson.loads(self._spool.readline())
        if self.version == 1:
            return {key: item for key, item in value.items() if key not in _V1_LINE}
        record: dict[str, Any] = value["record"]
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
    version = VERSION
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
            given = value.get("version")
            if not _is_integer(given):
                raise CommandError(
                    f"{name}: not a mnemon export (its first line has no version number)",
                    code="invalid-file",
                )
            if given not in READS:
                raise CommandError(
                    f"{name}: written in export format version {given}; this "
                    f"mnemon reads versions {READS[0]} to {READS[-1]} only. Export it again "
                    f"with a mnemon that writes version {VERSION}.",
                    code="unsupported-version",
                )
            header = value
            records.version = version = given
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
        pair = _v1_pair(value, number, name) if version == 1 else _v2_pair(value, number, name)
        records.add(raw, pair)
    if header is None:
        raise CommandError(f"{name}: empty, not a mnemon export", code="invalid-file")
    if not ended:
        raise CommandError(
            f"{name}: cut short (no end line): nothing was imported", code="invalid-file"
        )
    return header


def _v1_pair(value: dict[str, Any], number: int, name: str) -> tuple[str, str, str | None]:
    """The (kind, Source, type) of a version 1 line, checked as that version defined it.

    Raises:
        CommandError: not one of version 1's kinds, or a field it needs is missing.
    """
    kind = value.get("kind")
    if kind not in _V1_FIELDS:
        # a kind of a later version is named; anything else in its place is not shown
        shown = f" {kind!r}" if isinstance(kind, str) and _KIND_NAME.match(kind) else ""
        raise CommandError(
            f"{name}: line {number}: unknown record kind{shown}", code="invalid-file"
        )
    missing = [field for field in _V1_FIELDS[kind] if not isinstance(value.get(field), str)]
    if missing:
        raise CommandError(
            f"{name}: line {number}: a {kind} record needs {missing[0]!r} (a string)",
            code="invalid-file",
        )
    kept = value.get("type")
    return kind, value["source"], kept if isinstance(kept, str) else None


def _v2_pair(value: dict[str, Any], number: int, name: str) -> tuple[str, str, str | None]:
    """The (kind, Source, type) of a version 2 line: its record is checked when written.

    Raises:
        CommandError: the line lacks a record kind, a Source or a record object.
    """
    kind = value.get("kind")
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise CommandError(f"{name}: line {number}: no record kind", code="invalid-file")
    for needed, what in (("source", str), ("record", dict)):
        if not isinstance(value.get(needed), what):
            article = "a string" if what is str else "an object"
            raise CommandError(
                f"{name}: line {number}: a record line needs {needed!r} ({article})",
                code="invalid-file",
            )
    kept = value.get("type")
    return kind, value["source"], kept if isinstance(kept, str) else None


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


@dataclass(slots=True)
class ImportTally:
    """How far an import got: counted as it goes, so an interruption can say it too."""

    written: int = 0
    #: of those written, the ones a store took without confirming they are durable
    accepted: int = 0
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


def _target(
    writable: Sequence[tuple[ManagementEntry, RecordKind]], pair: tuple[str, str, str | None]
) -> tuple[ManagementEntry, RecordKind]:
    """The mounted Source and kind a file's records of `pair` go to.

    The same Source key if it takes that kind, else the first Source of the same type that
    does, else the first that does.

    Raises:
        CommandError: no mounted Source takes records of that kind.
    """
    kind, source, type_id = pair
    takers = [(entry, declared) for entry, declared in writable if declared.id == kind]
    for wanted in (
        lambda entry: entry.source_key == source,
        lambda entry: type_id is not None and entry.type_id == type_id,
        lambda entry: True,
    ):
        found = next((taker for taker in takers if wanted(taker[0])), None)
        if found is not None:
            return found
    raise CommandError(
        f"the file holds {kind} records of {source}, and no mounted Source takes {kind} "
        "records: nothing was imported",
        code="unknown-source",
    )


@dataclass(frozen=True, slots=True)
class _Item:
    """A record ready to send: its number in the file, content key and size."""

    number: int
    record: dict[str, Any]
    key: str  # its idempotency key, made from its content: the same content, the same key
    size: int  # bytes of its compact JSON


def _batches(
    items: Iterator[tuple[tuple[str, str], _Item]], budget: int
) -> Iterator[tuple[tuple[str, str], list[_Item]]]:
    """Runs of items for one Source and kind, at most `IMPORT_BATCH` and `budget` bytes."""
    batch: list[_Item] = []
    where: tuple[str, str] | None = None
    size = 0
    for here, item in items:
        # as sent: `{"record": ..., "idempotency_key": "..."}` and its comma (35 bytes around
        # the record and key), with room to spare
        cost = item.size + len(item.key) + _PER_RECORD
        if batch and (here != where or len(batch) >= IMPORT_BATCH or size + cost > budget):
            assert where is not None
            yield where, batch
            batch, size = [], 0
        where = here
        batch.append(item)
        size += cost
    if batch and where is not None:
        yield where, batch


@contextmanager
def _long_lived_frozen() -> Iterator[None]:
    """Keep the cyclic garbage collector off what start-up made, for a bulk job's length.

    Start-up (the modules, their models and schemas) leaves a few hundred thousand objects
    that live as long as the command. A batch's requests and results outlive the young
    generations, so the collector's full passes come often, and each walked all of those
    objects again. `gc.freeze()` sets them aside (reference counting still frees them);
    `gc.unfreeze()` puts them back after.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _import(path: Path, scope: Scope, records: ExportRecords, tally: ImportTally) -> None:
    async with open_memory(path, operator=True) as (profile, host):
        gc.freeze()  # and what the host's start-up made (`_long_lived_frozen` thaws it)
        writable = record_kinds(host, "writable")
        # each (kind, Source) of the file resolved once to the mounted Source it goes to
        targets = {pair: _target(writable, pair) for pair in records.sources}
        chosen = {(entry.source_key, kind.id): (entry, kind) for entry, kind in targets.values()}
        # every Source the file writes to must take writes in this scope before one is made
        for key in sorted({key for key, _ in chosen}):
            readable = next(
                (k for (s, _), (_, k) in chosen.items() if s == key and k.readable), None
            )
            try:
                client = host.management_client(key, scope)
                if readable is not None:
                    await client.read("records-read", {"kind": readable.id, "limit": 1})
                elif await client.revision() is None:
                    # a write is fenced by the revision: a Source with none in this scope (it
                    # is unavailable there, often for want of an id) takes none
                    entry = next(entry for (s, _), (entry, _) in chosen.items() if s == key)
                    lacking = missing_flags(entry.partition_keys, scope)
                    raise ManagementError(
                        "it is unavailable in this scope",
                        code="missing-scope" if lacking else "unavailable",
                    )
            except ManagementError as exc:
                entry = next(entry for (s, _), (entry, _) in chosen.items() if s == key)
                flags = missing_flags(entry.partition_keys, scope)
                add = f"; add {' and '.join(flags)}" if missing_scope(exc) and flags else ""
                raise CommandError(
                    f"nothing was imported: {key} cannot be written in this scope "
                    f"({user_message(exc)}{add})",
                    code="missing-scope" if missing_scope(exc) else exc.code,
                ) from None
        # records written before without a key are recognised by content
        known: dict[tuple[str, str], set[str]] = {}
        for (key, kind_id), (_, kind) in sorted(chosen.items(), key=lambda item: item[0]):
            client = host.management_client(key, scope)
            known[key, kind_id] = await _known_keys(client, key, kind) if kind.readable else set()
        budget = profile.settings.max_input_bytes - _ENVELOPE
        # a kind listed newest first is written oldest first, after the others: order is kept
        forwards = {pair for pair, (_, kind) in targets.items() if not kind.newest_first}
        backwards = set(targets) - forwards

        def items() -> Iterator[tuple[tuple[str, str], _Item]]:
            for pairs, back in ((forwards, False), (backwards, True)):
                for number, pair, record in records.numbered(pairs, backwards=back):
                    entry, kind = targets[pair]
                    size = len(orjson.dumps(record))
                    yield (
                        (entry.source_key, kind.id),
                        _Item(number, record, content_key(kind, record), size),
                    )

        with progress("import", total=len(records)) as advance:
            for where, batch in _batches(items(), budget):
                entry, kind = chosen[where]
                await _write_batch(
                    host, scope, entry.source_key, kind, batch, known[where], tally, budget
                )
                advance(len(batch))
        # what the writes left without vectors gets them now, so recall finds it by meaning
        written = {key for key, _ in chosen}
        for entry in reindexable(host):
            if entry.source_key in written:
                vectors = Reindexed(entry.source_key)
                try:
                    if await fill_vectors(host, entry.source_key, scope, vectors):
                        tally.vectors.append(vectors)
                except (ManagementError, CommandError) as exc:
                    # the records are stored: vectors that cannot be given now follow later
                    vectors.failed = exc.code
                    tally.vectors.append(vectors)


async def _known_keys(client: ManagementClient, key: str, kind: RecordKind) -> set[str]:
    """The content key of each record of `kind` the Source holds in this scope.

    Read a page at a time and kept as keys only, so a large store costs no copy of its
    records; a progress bar counts the records read, since a million take about half a minute
    before the first write.
    """
    keys: set[str] = set()
    with progress(f"reading {key}", total=None) as advance:
        async for page in record_pages(client, kind):
            keys.update(content_key(kind, record) for record in page)
            advance(len(page))
    return keys


async def _write_batch(
    host: MemoryHost,
    scope: Scope,
    key: str,
    kind: RecordKind,
    batch: list[_Item],
    known: set[str],
    tally: ImportTally,
    budget: int,
) -> None:
    """Write one batch through the Source's `records-write`; count each record's result.

    A record already there, too large for one call, or outside its kind's schema is counted
    here, and the others are sent.

    Raises:
        CommandError: the batch failed as a whole, or was stored but not confirmed durable.
    """
    sent: list[_Item] = []
    for item in batch:
        if item.key in known:
            tally.unchanged += 1
        elif item.size > budget:
            # the host would refuse the whole call: this one record alone is refused
            tally.refuse(item.number, "too-large", "larger than max_input_bytes")
        elif problems := input_problems(kind.record_schema, item.record):
            # the schema's words name the property and the rule, never the value
            tally.refuse(item.number, "invalid-input", f"{kind.id} record: {'; '.join(problems)}")
        else:
            sent.append(item)
    if not sent:
        return
    tally.in_flight = len(sent)
    payload = {
        "kind": kind.id,
        "records": [{"record": item.record, "idempotency_key": item.key} for item in sent],
    }
    try:
        result = await mutate(host, key, scope, "records-write", payload)
    except ManagementError as exc:
        raise CommandError(
            f"{key}/records-write: {exc.code}: a batch of {len(sent)} records failed and may "
            f"or may not have been stored; {_kept(tally)}. Run the same import again to "
            "finish: it never duplicates",
            code=exc.code,
        ) from None
    tally.in_flight = 0
    # the core checked the answer: one result per record, in order
    for item, outcome in zip(sent, result.output["results"], strict=True):
        if outcome["completion"] == "refused":
            message = visible_text(str(outcome.get("message") or ""), keep_newlines=False)
            tally.refuse(item.number, str(outcome["code"]), message)
            continue
        known.add(item.key)
        if outcome.get("replayed") is True:
            tally.unchanged += 1
        else:
            tally.written += 1
            # an external store that took the record without confirming it is durable
            tally.accepted += outcome["completion"] == "accepted"


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
            raise not_confirmed()
        tally = ImportTally()
        job = functools.partial(_import, profile_path(ctx), scope, records, tally)
        with _long_lived_frozen():
            run(job, tally.interrupted)
    refusals = sorted(tally.refusals, key=lambda refusal: refusal["record"])
    summary = {
        "records": len(records),
        "written": tally.written,
        "accepted": tally.accepted,
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
        # a store that only accepted records is never said to have saved them
        taken = (
            f" ({tally.accepted} of them accepted by a store that does not confirm durability)"
            if tally.accepted
            else ""
        )
        printer_of(ctx).ok(
            f"imported {tally.written} of {len(records)} record(s){taken}; "
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
