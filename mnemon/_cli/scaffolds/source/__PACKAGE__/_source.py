"""The __TITLE__ Source: short items per tenant, user and agent, pinned by exact snapshot."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mnemon.sdk import (
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
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    run_blocking,
    source_data_directory,
    truncate_text,
)
from mnemon.sdk.storage import private_folder, write_atomically

PACKAGE = "__DIST__"
TYPE_ID = "__TYPE_ID__"
ROLE = "notes"
MAX_ITEMS = 500
MAX_TEXT = 2_000

TEXT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}},
    "required": ["text"],
    "additionalProperties": False,
}
QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["query"],
    "additionalProperties": False,
}
NOTHING: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="__TITLE__",
    description="Short items per user, projected, searchable and pinned per turn.",
    roles=["source"],
    provides=["source.__TYPE_ID__"],
)

MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": ROLE,
    "capabilities": ["project", "search", "write"],
    "consistency": "exact-snapshot",
    # a scope without a user finds it unavailable; tools then ask for one (`--user`)
    "partition_keys": ["user_id"],
    "routes": [
        {
            "id": "search",
            "description": "Find items containing a word or phrase.",
            "capability": "search",
            "input_schema": QUERY,
            "max_calls": 3,
            "max_results": 20,
        }
    ],
    "actions": [
        {
            "id": "add",
            "description": "Add one short item.",
            "capability": "write",
            "input_schema": TEXT,
        }
    ],
    "management": {
        "label": "__TITLE__",
        "description": "The items of one user, for people rather than the model.",
        "operations": [
            {"id": "list", "kind": "read", "description": "All items.", "input_schema": NOTHING},
            {"id": "add", "kind": "mutate", "description": "Add one.", "input_schema": TEXT},
        ],
    },
}


def _revision(items: list[str]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


def _read(path: Path) -> list[str]:
    try:
        return [str(item) for item in json.loads(path.read_text(encoding="utf-8"))]
    except FileNotFoundError:
        return []


def _write(path: Path, items: list[str]) -> None:
    # a private folder, and a file replaced in one step: a reader sees the old or the new list
    private_folder(path.parent)
    write_atomically(path, json.dumps(items).encode("utf-8"))


def _append(path: Path, text: str) -> list[str]:
    items = _read(path)
    if len(items) >= MAX_ITEMS:
        raise SourceError("invalid_payload", f"at most {MAX_ITEMS} items are kept")
    items.append(text)
    _write(path, items)
    return items


class __CLASS__Source:
    """The Source runtime: every request reads its own snapshot of its scope's items."""

    def __init__(self, key: str, folder: Path) -> None:
        self._key = key
        self._folder = folder
        # writes of this entry are serialized, so a fenced write checks and writes at once
        self._lock = anyio.Lock()

    def _file(self, scope: Scope) -> Path | None:
        """The file of the scope's partition; its name says nothing about whose it is."""
        if scope.user_id is None:
            return None
        partition = json.dumps([scope.tenant_id, scope.user_id, scope.agent_id])
        return self._folder / f"{hashlib.sha256(partition.encode()).hexdigest()[:32]}.json"

    def _path(self, scope: Scope) -> Path:
        path = self._file(scope)
        if path is None:
            raise SourceError("invalid_payload", "the scope has no user id")
        return path

    async def _items(self, scope: Scope) -> list[str]:
        # file access blocks: it runs in a worker thread, never on the event loop
        return await run_blocking(_read, self._path(scope))

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Cheap and read-only: availability and the revision of the scope's items."""
        if self._file(request.scope) is None:
            return SourceFacts(
                instance_key=self._key,
                type_id=TYPE_ID,
                role=ROLE,
                availability="unavailable",
                reason="missing-scope",
            )
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role=ROLE,
            availability="ready",
            revision=_revision(await self._items(request.scope)),
            capabilities=("project", "search", "write"),
            route_ids=("search",),
            action_ids=("add",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """The items within the characters allotted, and a grant pinning this snapshot."""
        items = await self._items(request.scope)
        revision = _revision(items)
        if request.expected_revision is not None and revision != request.expected_revision:
            raise SourceError("degraded", "the items changed since facts were read")
        text = truncate_text("\n".join(f"- {item}" for item in items), request.max_characters)
        fragments = (Fragment(source_key=self._key, mode=request.mode, text=text),) if text else ()
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(source_key=self._key, value={"items": items}),
            revision=revision,
        )

    async def query(self, request: QueryRequest) -> Evidence:
        """Search the snapshot pinned in the grant, never the items as they are now."""
        wanted = str(request.input["query"]).casefold()
        items = [str(item) for item in request.grant.value["items"]]
        hits = [(index, item) for index, item in enumerate(items) if wanted in item.casefold()]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(EvidenceItem(id=f"item-{index}", text=item) for index, item in hits),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Add one item and report the committed revision."""
        path = self._path(request.view.scope)
        async with self._lock:
            items = await run_blocking(_append, path, str(request.input["text"]))
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=datetime.now(UTC).isoformat(),
            revision=_revision(items),
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """List the items as they are now, or add one if still at the expected revision."""
        path = self._path(request.scope)
        if request.operation.id == "list":
            items = await run_blocking(_read, path)
            return ManagementResult(
                source_key=self._key,
                operation="list",
                output={"items": items},
                revision=_revision(items),
            )
        async with self._lock:
            current = _revision(await run_blocking(_read, path))
            if current != request.expected_revision:
                raise RevisionConflict("revision conflict: the items changed")
            items = await run_blocking(_append, path, str(request.input["text"]))
        return ManagementResult(source_key=self._key, operation="add", revision=_revision(items))


def _create(init: SourceInit) -> __CLASS__Source:
    unknown = sorted(set(init.configuration) - {"data_dir"})
    if unknown:
        raise DefinitionError(f"__TYPE_ID__ configuration: unknown key {unknown[0]!r}")
    folder = source_data_directory(init, init.configuration.get("data_dir"))
    return __CLASS__Source(init.instance_key, folder)


SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one Source for this profile entry."""
    install_memory(ctx, sources=[SOURCE])


class __CLASS__Plugin:
    """The plugin object named by `mnemon-plugin.toml`; mounting it installs the Source."""

    memory_plugin = memory_plugin

    def apply(self, ctx: PluginContext) -> None:
        """Install one Source for this profile entry."""
        apply(ctx)


plugin = __CLASS__Plugin()
