"""A small, correct reference Source for the suite's own tests, with switchable defects."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from mnemon import (
    DefinitionError,
    Evidence,
    EvidenceItem,
    Fragment,
    ManagementResult,
    MutationReceipt,
    ReadGrant,
    RevisionConflict,
    Scope,
)
from mnemon.sdk import (
    FactsRequest,
    ManageRequest,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_source,
    install_memory,
    run_blocking,
    source_data_directory,
)

DEFECTS = (
    "leak_scope",
    "shared_files",
    "leak_secret",
    "volatile",
    "lax_input",
    "racy",
    "overflow",
    "ignore_tenant",
    "shared_notes",
    "live_reads",
    "blocking",
    "shared_snapshot",
    "shows_file_name",
    "shows_path",
    "writes_on_read",
    "creates_on_read",
    "counts_reads",
    "caches_snapshot",
    "caches_revision",
    "claims_workspace",
)
TEXT = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["text"],
    "additionalProperties": False,
}
FIND = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
NOTHING = {"type": "object", "properties": {}, "additionalProperties": False}
MANIFEST = {
    "type_id": "journal",
    "package_name": "mnemon-test-journal",
    "role": "notes",
    "capabilities": ["project", "search", "write"],
    "consistency": "exact-snapshot",
    "partition_keys": ["user_id"],
    "routes": [
        {
            "id": "find",
            "description": "Find entries.",
            "capability": "search",
            "input_schema": FIND,
            "max_calls": 3,
        }
    ],
    "actions": [
        {"id": "add", "description": "Add an entry.", "capability": "write", "input_schema": TEXT},
        {
            "id": "note",
            "description": "Add one of your own notes.",
            "capability": "write",
            "input_schema": TEXT,
        },
    ],
    "management": {
        "label": "Journal",
        "description": "Entries of one user.",
        "operations": [
            {"id": "list", "kind": "read", "description": "All entries.", "input_schema": NOTHING},
            {"id": "add", "kind": "mutate", "description": "Add one.", "input_schema": TEXT},
        ],
    },
}
LAX = {
    **MANIFEST,
    "actions": [
        {**MANIFEST["actions"][0], "input_schema": {"type": "object"}},  # type: ignore[index]
        MANIFEST["actions"][1],  # type: ignore[index]
    ],
}


class Journal:
    """Entries per (tenant, user) and the agent's own notes per (tenant, user, agent).

    Each partition is one JSON file under the instance's folder.
    """

    def __init__(self, init: SourceInit) -> None:
        config = dict(init.configuration)
        self.key = init.instance_key
        self.defects = {name for name in DEFECTS if config.pop(name, False)}
        self.token = config.pop("token", None)
        data_dir = config.pop("data_dir", None)
        if config:
            raise DefinitionError(f"journal configuration: unknown key {sorted(config)[0]!r}")
        folder = source_data_directory(init, data_dir)
        self.folder = Path(str(data_dir)) if "shared_files" in self.defects else folder
        self.memory: dict[str, list[str]] = {}
        self.lock = anyio.Lock()
        self.last: list[str] = []  # used only by the shared_snapshot defect
        # the snapshot and the revision the last facts() read, kept in one attribute each
        # (used only by the caches_snapshot and caches_revision defects)
        self.cached: list[str] = []
        self.cached_revision: str | None = None
        self.reads = 0  # used only by the counts_reads defect
        if "claims_workspace" in self.defects:
            # declares a scope id it serves without
            self.partition_keys = ("user_id", "workspace")

    def _user(self, scope: Scope) -> str | None:
        if "leak_scope" in self.defects:
            return "everyone"
        if scope.user_id is None:
            return None
        tenant = None if "ignore_tenant" in self.defects else scope.tenant_id
        return json.dumps(["user", tenant, scope.user_id])

    def _notes(self, scope: Scope) -> str:
        user = self._user(scope)
        agent = None if "shared_notes" in self.defects else scope.agent_id
        return json.dumps(["notes", user, agent])

    def _everything(self, scope: Scope) -> list[str]:
        return self._load(str(self._user(scope))) + self._load(self._notes(scope))

    def _file(self, user: str) -> Path:
        return self.folder / journal_file_name(user)

    async def _read(self, scope: Scope) -> list[str]:
        if "blocking" in self.defects:
            return self._everything(scope)  # the defect: file reads on the event loop
        if self.defects & {"caches_snapshot", "caches_revision"}:
            # read without suspending, as a Source serving an in-memory index does: its turns
            # then never overlap unless the suite makes them
            return self._everything(scope)
        return await run_blocking(self._everything, scope)

    def _load(self, user: str) -> list[str]:
        if "volatile" in self.defects:
            return list(self.memory.get(user, []))
        try:
            return list(json.loads(self._file(user).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return []

    def _save(self, user: str, entries: list[str]) -> None:
        if "volatile" in self.defects:
            self.memory[user] = entries
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self._file(user).with_suffix(".tmp")
        temporary.write_text(json.dumps(entries), encoding="utf-8")
        temporary.replace(self._file(user))

    @staticmethod
    def _revision(entries: list[str]) -> str:
        return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]

    async def _append(self, user: str, text: str) -> str:
        if "racy" in self.defects:
            entries = self._load(user)
            await anyio.sleep(0.001)
            entries.append(text)
            self._save(user, entries)
            return self._revision(entries)
        async with self.lock:
            return await run_blocking(self._append_now, user, text)

    def _append_now(self, user: str, text: str) -> str:
        entries = self._load(user)
        entries.append(text)
        self._save(user, entries)
        return self._revision(entries)

    async def facts(self, request: FactsRequest) -> SourceFacts:
        user = self._user(request.scope)
        hints = {"token": self.token} if "leak_secret" in self.defects else {}
        if user is None:
            return SourceFacts(
                instance_key=self.key,
                type_id="journal",
                role="notes",
                availability="unavailable",
                reason="missing-scope",
            )
        return SourceFacts(
            instance_key=self.key,
            type_id="journal",
            role="notes",
            availability="ready",
            revision=await self._facts_revision(request.scope),
            capabilities=("project", "search", "write"),
            route_ids=("find",),
            action_ids=("add", "note"),
            hints=hints,
        )

    async def _facts_revision(self, scope: Scope) -> str:
        entries = await self._read(scope)
        revision = self._revision(entries)
        if self.defects & {"caches_snapshot", "caches_revision"}:
            self.cached, self.cached_revision = entries, revision
        if "writes_on_read" in self.defects:
            self.folder.mkdir(parents=True, exist_ok=True)
            marker = self.folder / "last-read.json"
            count = json.loads(marker.read_text()) if marker.exists() else 0
            await anyio.Path(marker).write_text(json.dumps(count + 1))
        if "creates_on_read" in self.defects:
            self.reads += 1
            await anyio.Path(self.folder).mkdir(parents=True, exist_ok=True)
            await anyio.Path(self.folder / f"seen-{self.reads}.log").write_text("seen")
        if "counts_reads" in self.defects:
            self.reads += 1
            revision = f"{revision}-{self.reads}"
        return revision

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        user = self._user(request.scope)
        assert user is not None
        entries = await self._read(request.scope)
        if "caches_snapshot" in self.defects:
            entries = self.cached  # the defect: the snapshot of whichever facts() ran last
        self.last = entries
        text = "\n".join(entries)
        if "shows_file_name" in self.defects:
            text = f"(from {self._file(user).name}) {text}"
        if "shows_path" in self.defects:
            text = f"(from {self.folder}) {text}"
        if "overflow" not in self.defects:
            text = text[: request.max_characters]
        fragments = (Fragment(source_key=self.key, mode=request.mode, text=text),) if text else ()
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(source_key=self.key, value={"entries": entries}),
            revision=self._projected_revision(request, entries),
        )

    def _projected_revision(self, request: ProjectionRequest, entries: list[str]) -> str | None:
        if "caches_revision" in self.defects:
            return self.cached_revision  # the defect: the revision whichever facts() saw last
        return request.expected_revision or self._revision(entries)

    async def query(self, request: QueryRequest) -> Evidence:
        query = request.input["query"]
        entries = request.grant.value["entries"]
        if "live_reads" in self.defects:
            entries = await self._read(request.view.scope)
        if "shared_snapshot" in self.defects:
            entries = self.last
        hits = [e for e in entries if query in e]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self.key,
            items=tuple(EvidenceItem(id=str(i), text=t) for i, t in enumerate(hits)),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        user = self._user(request.view.scope)
        assert user is not None
        partition = self._notes(request.view.scope) if request.offer.action_id == "note" else user
        await self._append(partition, str(request.input.get("text", "")))
        revision = self._revision(await self._read(request.view.scope))
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=datetime.now(UTC).isoformat(),
            revision=revision,
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        user = self._user(request.scope)
        assert user is not None
        if request.operation.id == "list":
            entries = await self._read(request.scope)
            return ManagementResult(
                source_key=self.key, operation="list", output={"entries": entries}
            )
        async with self.lock:
            if self._revision(await self._read(request.scope)) != request.expected_revision:
                raise RevisionConflict("revision conflict")
        await self._append(user, request.input["text"])
        revision = self._revision(await self._read(request.scope))
        return ManagementResult(source_key=self.key, operation="add", revision=revision)


JOURNAL = define_memory_source(MANIFEST, Journal)
LAX_JOURNAL = define_memory_source(LAX, Journal)


class JournalPlugin:
    """Mounts the journal; `lax` uses a manifest whose write input schema checks nothing."""

    def __init__(self, *, lax: bool = False) -> None:
        self.definition = LAX_JOURNAL if lax else JOURNAL

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, sources=[self.definition])


def journal_config(directory: Path, *defects: str) -> dict[str, Any]:
    return {"data_dir": str(directory), **dict.fromkeys(defects, True)}


def journal_file_name(partition: str) -> str:
    """The file one partition is kept in (its name does not say whose it is)."""
    return f"{hashlib.sha256(partition.encode()).hexdigest()[:16]}.json"


def seed_journal(directory: Path, instance: str, scope: dict[str, Any], text: str) -> None:
    """Add `text` to the journal of `scope` straight in its file, as a person would."""
    user = json.dumps(["user", scope.get("tenant_id"), scope["user_id"]])
    path = directory / "sources" / "journal" / instance / journal_file_name(user)
    entries = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([*entries, text]), encoding="utf-8")
