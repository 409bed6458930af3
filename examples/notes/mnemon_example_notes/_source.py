"""The notes Source: one file, exact snapshots, a `read` route and a `replace` action."""

from __future__ import annotations

import hashlib
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import anyio

from mnemon import (
    DefinitionError,
    Evidence,
    EvidenceItem,
    FactsRequest,
    Fragment,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    RevisionConflict,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    run_blocking,
    truncate_text,
)

PACKAGE = "mnemon-example-notes"
MAX_NOTES_CHARACTERS = 200_000

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Notes file",
    description="One notes file, projected eagerly and pinned by exact snapshot.",
    roles=["source"],
    provides=["notes.file"],
)

MANIFEST = {
    "type_id": "notes",
    "package_name": PACKAGE,
    "role": "notes",
    "capabilities": ["project", "read", "write"],
    "consistency": "exact-snapshot",
    "routes": [
        {
            "id": "read",
            "description": "Read the whole notes file as it was when this turn began.",
            "capability": "read",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "max_calls": 2,
            "max_results": 1,
        }
    ],
    "actions": [
        {
            "id": "replace",
            "description": "Replace the whole notes file with new text.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": MAX_NOTES_CHARACTERS},
                },
                "required": ["text"],
                "additionalProperties": False,
            },
        }
    ],
    "management": {
        "label": "Notes file",
        "description": "Read the notes as they are now, or replace them (revision-fenced).",
        "operations": [
            {
                "id": "read",
                "kind": "read",
                "description": "The current notes and their revision.",
                "input_schema": {
                    "type": "object",
                    "properties": {},
                    "additionalProperties": False,
                },
            },
            {
                "id": "replace",
                "kind": "mutate",
                "description": "Replace the notes, if they are still at the expected revision.",
                "input_schema": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "maxLength": MAX_NOTES_CHARACTERS}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            },
        ],
    },
}


def _revision(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class NotesSource:
    """One notes file; every request reads its own snapshot."""

    def __init__(self, key: str, path: Path) -> None:
        self._key = key
        self._path = path
        # writes of this instance are serialized, so a fenced replace checks and writes at once
        self._write_lock = anyio.Lock()

    async def _snapshot(self) -> tuple[str, str]:
        text = await run_blocking(_read, self._path)
        return text, _revision(text)

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Report the current revision of the file."""
        _, revision = await self._snapshot()
        return SourceFacts(
            instance_key=self._key,
            type_id="notes",
            role="notes",
            availability="ready",
            revision=revision,
            capabilities=("project", "read", "write"),
            route_ids=("read",),
            action_ids=("replace",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Project the snapshot matching the expected revision, and pin it in the grant."""
        text, revision = await self._snapshot()
        if request.expected_revision is not None and revision != request.expected_revision:
            raise SourceError("degraded", "the notes changed since facts were read")
        shown = truncate_text(text, request.max_characters)
        fragments: tuple[Fragment, ...] = ()
        if shown:
            fragments = (Fragment(source_key=self._key, mode=request.mode, text=shown),)
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(source_key=self._key, value={"revision": revision, "text": text}),
            revision=revision,
        )

    async def query(self, request: QueryRequest) -> Evidence:
        """Return the pinned text from the grant, never the file as it is now."""
        pinned = request.grant.value
        text = str(pinned["text"])
        items: tuple[EvidenceItem, ...] = ()
        if len(text) <= request.route.max_characters:
            items = (
                EvidenceItem(id="notes", text=text, provenance={"revision": pinned["revision"]}),
            )
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=items,
            truncated=not items and bool(text),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Replace the file atomically and report the committed revision."""
        text = request.input["text"]
        async with self._write_lock:
            await run_blocking(_write_atomically, self._path, text)
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=datetime.now(UTC).isoformat(),
            revision=_revision(text),
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """Read the notes as they are now, or replace them if still at the expected revision."""
        operation = request.operation.id
        if operation == "read":
            text, revision = await self._snapshot()
            return ManagementResult(
                source_key=self._key,
                operation=operation,
                output={"text": text, "revision": revision},
                revision=revision,
            )
        async with self._write_lock:
            _, current = await self._snapshot()
            if current != request.expected_revision:
                raise RevisionConflict(
                    f"revision conflict: the notes are at {current}, "
                    f"not {request.expected_revision}"
                )
            text = request.input["text"]
            await run_blocking(_write_atomically, self._path, text)
        revision = _revision(text)
        return ManagementResult(
            source_key=self._key,
            operation=operation,
            output={"revision": revision},
            revision=revision,
        )


def _create(init: SourceInit) -> NotesSource:
    raw = init.configuration.get("path")
    if not isinstance(raw, str) or not raw:
        raise DefinitionError("notes configuration.path: a file path is required")
    path = Path(raw)
    if not path.is_absolute():
        raise DefinitionError("notes configuration.path: must be an absolute path")
    unknown = sorted(set(init.configuration) - {"path"})
    if unknown:
        raise DefinitionError(f"notes configuration: unknown key {unknown[0]!r}")
    return NotesSource(init.instance_key, path)


NOTES_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one notes Source for this entry."""
    install_memory(ctx, sources=[NOTES_SOURCE])
