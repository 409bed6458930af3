"""The notes Source: notes files, exact snapshots, a `read` route, `add` and `replace` actions.

Two ways to configure it:

- `data_dir` (or nothing: the host's data folder): one notes file per partition, that is per
  tenant, user and agent of the scope, under the entry's own folder. A scope without a user
  is `unavailable`. File names are digests: they say nothing about whose notes they hold.
- `path`: one file the user names, shown to every scope of this entry (a single-user
  profile's notes). Two entries naming the same file share it, on purpose.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import BeforeValidator, Field, model_validator

from mnemon.sdk import (
    ConfigPath,
    Configuration,
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
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    check_memory_text,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    memory_text_schema,
    read_configuration,
    run_blocking,
    source_data_directory,
    truncate_text,
)
from mnemon.sdk.storage import private_folder, write_atomically

PACKAGE = "mnemon-example-notes"
MAX_NOTES_CHARACTERS = 200_000
MAX_NOTE_CHARACTERS = 2_000

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Notes file",
    description="Notes per user and agent, projected eagerly and pinned by exact snapshot.",
    roles=["source"],
    provides=["notes.file"],
)

MANIFEST = {
    "type_id": "notes",
    "package_name": PACKAGE,
    "role": "notes",
    "capabilities": ["project", "read", "write"],
    "consistency": "exact-snapshot",
    # a scope without a user has no notes file: tools then ask for one (`--user`)
    "partition_keys": ["user_id"],
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
            "id": "add",
            "description": "Add one line to the notes.",
            "capability": "write",
            "input_schema": {
                "type": "object",
                # a note is one line: text holding a line break could add lines that read as
                # other notes, so the core refuses it before the Source is called
                "properties": {"text": memory_text_schema(MAX_NOTE_CHARACTERS, single_line=True)},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
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
        },
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


def _write(path: Path, text: str, private: bool) -> None:
    if private:
        private_folder(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    # a reader sees the old notes or the new ones, never a mix, even after a crash
    write_atomically(path, text.encode("utf-8"))


def _append(path: Path, line: str, private: bool) -> str:
    text = _read(path)
    if text and not text.endswith("\n"):
        text += "\n"
    text += f"- {line}\n"
    if len(text) > MAX_NOTES_CHARACTERS:
        raise SourceError("invalid_payload", "the notes would exceed their size limit")
    _write(path, text, private)
    return text


class NotesSource:
    """Notes files; every request reads its own snapshot of the file for its scope."""

    def __init__(self, key: str, *, folder: Path | None = None, path: Path | None = None) -> None:
        self._key = key
        self._folder = folder
        self._shared = path
        # the entry's own folder is made private; the folder of a file the user named is theirs
        self._private = path is None
        #: one file the user named serves every scope: no scope id is needed then
        self.partition_keys = ("user_id",) if path is None else ()
        # writes of this instance are serialized, so a fenced replace checks and writes at once
        self._write_lock = anyio.Lock()

    def _file(self, scope: Scope) -> Path | None:
        """The file of the scope's partition (tenant, user, agent), or None if it has none."""
        if self._shared is not None:
            return self._shared
        if scope.user_id is None or self._folder is None:
            return None
        partition = json.dumps([scope.tenant_id, scope.user_id, scope.agent_id])
        return self._folder / f"{hashlib.sha256(partition.encode()).hexdigest()[:32]}.md"

    def _path(self, scope: Scope) -> Path:
        path = self._file(scope)
        if path is None:
            raise SourceError("invalid_payload", "the scope has no user id")
        return path

    async def _snapshot(self, scope: Scope) -> tuple[str, str]:
        text = await run_blocking(_read, self._path(scope))
        return text, _revision(text)

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Report the current revision of the scope's notes."""
        if self._file(request.scope) is None:
            return SourceFacts(
                instance_key=self._key,
                type_id="notes",
                role="notes",
                availability="unavailable",
                reason="missing-scope",
            )
        _, revision = await self._snapshot(request.scope)
        return SourceFacts(
            instance_key=self._key,
            type_id="notes",
            role="notes",
            availability="ready",
            revision=revision,
            capabilities=("project", "read", "write"),
            route_ids=("read",),
            action_ids=("add", "replace"),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """Project the snapshot matching the expected revision, and pin it in the grant."""
        text, revision = await self._snapshot(request.scope)
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
        """Add a line or replace the file, atomically, and report the committed revision."""
        path = self._path(request.view.scope)
        text = request.input["text"]
        if request.offer.action_id == "add":
            # the Source's own check, by the rule its input schema states: one line per note
            check_memory_text(text, max_characters=MAX_NOTE_CHARACTERS, single_line=True)
        async with self._write_lock:
            if request.offer.action_id == "add":
                text = await run_blocking(_append, path, text, self._private)
            else:
                await run_blocking(_write, path, text, self._private)
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
            text, revision = await self._snapshot(request.scope)
            return ManagementResult(
                source_key=self._key,
                operation=operation,
                output={"text": text, "revision": revision},
                revision=revision,
            )
        async with self._write_lock:
            _, current = await self._snapshot(request.scope)
            if current != request.expected_revision:
                raise RevisionConflict(
                    f"revision conflict: the notes are at {current}, "
                    f"not {request.expected_revision}"
                )
            text = request.input["text"]
            await run_blocking(_write, self._path(request.scope), text, self._private)
        revision = _revision(text)
        return ManagementResult(
            source_key=self._key,
            operation=operation,
            output={"revision": revision},
            revision=revision,
        )


def _named(value: object) -> object:
    # said before the SDK's own path rule, in the words this example has always used
    if value == "":
        raise ValueError("a file path is required")
    return value


class NotesConfiguration(Configuration):
    """What a profile may say about a notes Source: a file to serve, or where to keep files."""

    path: Annotated[ConfigPath, BeforeValidator(_named)] | None = Field(
        default=None,
        description="One notes file, shown to every scope of the entry (a single-user profile).",
    )
    data_dir: ConfigPath | None = Field(
        default=None,
        description="The base folder of the per-partition notes files (default: the host's).",
    )

    @model_validator(mode="after")
    def _one_way(self) -> NotesConfiguration:
        if self.path is not None and self.data_dir is not None:
            raise ValueError("give either path or data_dir, not both")
        return self


def _create(init: SourceInit) -> NotesSource:
    # an unknown key, a value of the wrong type or a relative path without a profile folder
    # is refused here, by the SDK, naming the key and never the value
    configuration = read_configuration(NotesConfiguration, init, subject="notes")
    if configuration.path is not None:
        return NotesSource(init.instance_key, path=configuration.path)
    data_dir = configuration.data_dir
    folder = source_data_directory(init, None if data_dir is None else str(data_dir))
    return NotesSource(init.instance_key, folder=folder)


NOTES_SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one notes Source for this entry."""
    install_memory(ctx, sources=[NOTES_SOURCE])
