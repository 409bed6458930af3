"""The documents Source runtime: facts, cover projection, pinned search, fenced writes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import anyio

from mnemon.sdk import (
    Evidence,
    EvidenceItem,
    FactsRequest,
    Fragment,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    guarded_call,
    truncate_text,
)

from ._config import DocumentsSettings, read_settings
from ._files import (
    FileStat,
    derived_document_id,
    is_document_id,
    new_document_id,
    partition_name,
)
from ._index import DocumentRecord, Hit, match_expression
from ._manifest import ACTION_IDS, CAPABILITIES, DEFAULT_SEARCH_LIMIT, ROLE, ROUTE_IDS, TYPE_ID
from ._markdown import check_body, check_title
from ._workspace import VerifiedState, Workspace, WorkspaceState, WriteOutcome

__all__ = ["DocumentsSource", "create_documents_source"]

_T = TypeVar("_T")
# snapshots announced by facts() and kept for project(): at most this many, and at most this
# many pinned documents over all of them (a turn's project follows its facts within seconds)
_SNAPSHOTS_KEPT = 64
_SNAPSHOT_DOCUMENTS_KEPT = 200_000
# grants of the latest revisions, reused turn after turn while a workspace does not change
_GRANTS_KEPT = 8
# partitions whose last facts are kept (as many as workspace states, see _workspace.py)
_GIVEN_KEPT = 64
_ELLIPSIS = "…"
#: SourceError code -> the coded reason facts give (anything else is `storage-error`)
_FACTS_REASONS = {"timeout": "storage-busy", "unsafe-lock": "unsafe-lock"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _moment(stat: FileStat) -> str:
    return datetime.fromtimestamp(stat.mtime_ns / 1e9, UTC).isoformat(timespec="seconds")


def cover(count: int, limit: int) -> str:
    """The compact cover of a workspace: a count and how to read, never titles or text.

    Returns the longest wording that fits `limit` characters, or "" when none does.
    """
    if count == 0:
        wordings = ("This workspace has no documents yet.", "no documents")
    elif count == 1:
        wordings = ("1 Markdown document in this workspace; search to read it.", "1 document")
    else:
        wordings = (
            f"{count} Markdown documents in this workspace; search to read them.",
            f"{count} documents",
        )
    return next((text for text in wordings if len(text) <= limit), "")


def excerpt(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at a grapheme boundary, marked when cut."""
    if len(text) <= limit:
        return text
    if limit <= len(_ELLIPSIS):
        return truncate_text(text, limit)
    return truncate_text(text, limit - len(_ELLIPSIS)).rstrip() + _ELLIPSIS


def _pinned(value: Any) -> tuple[str, Mapping[str, str]]:
    """The workspace partition and pinned documents of a grant this Source issued."""
    if isinstance(value, Mapping):
        workspace = value.get("workspace")
        documents = value.get("documents")
        if isinstance(workspace, str) and isinstance(documents, Mapping):
            return workspace, documents
    raise SourceError("schema_mismatch", "documents: the read grant is not one this Source issued")


class _SharedCheck:
    """One state check of a workspace that several turns' facts() may wait for."""

    __slots__ = ("done", "outcome", "started")

    def __init__(self) -> None:
        self.started = False  # set in the worker thread, just before the check begins
        self.done = anyio.Event()
        self.outcome: WorkspaceState | SourceError | None = None


def _begun(
    check: _SharedCheck,
    state: Callable[[threading.Event], WorkspaceState],
    *,
    abandon: threading.Event,
) -> WorkspaceState:
    check.started = True  # from now on, a turn that asks needs a check of its own
    return state(abandon)


class DocumentsSource:
    """Markdown documents of each workspace, with a search index rebuilt from the files."""

    def __init__(self, key: str, settings: DocumentsSettings) -> None:
        self._key = key
        self._settings = settings
        # stat of each index file when this runtime last verified or wrote it
        self._stamps: dict[str, FileStat] = {}
        # per workspace folder, the last state read: reused while nothing changed
        self._verified: dict[str, VerifiedState] = {}
        # one writer per workspace in this runtime; flock serializes the rest
        self._write_locks: dict[str, anyio.Lock] = {}
        # (partition, revision) facts announced -> the documents pinned at that revision; the
        # revision is a digest of exactly these pairs, so an entry never changes meaning
        self._snapshots: OrderedDict[tuple[str, str], Mapping[str, str]] = OrderedDict()
        # (partition, revision) -> the read grant project() gives for it
        self._grants: OrderedDict[tuple[str, str], ReadGrant] = OrderedDict()
        # per partition, the state check that turns asking now may still join
        self._checks: dict[str, _SharedCheck] = {}
        # per partition, the facts given for its last state: the same frozen object while the
        # state is the same, so the core need not check them again
        self._given: OrderedDict[str, tuple[WorkspaceState, SourceFacts]] = OrderedDict()
        # (partition, revision, mode, characters) -> the contribution project() gives for it
        self._contributions: OrderedDict[tuple[str, str, str, int], ViewContribution] = (
            OrderedDict()
        )

    # ------------------------------------------------------------------ plumbing

    def _workspace(self, partition: str) -> Workspace:
        return Workspace(
            self._settings.root / "workspaces" / partition,
            self._settings,
            self._stamps,
            self._verified,
        )

    def _partition(self, scope: Scope) -> str:
        partition = partition_name(scope)
        if partition is None:
            raise SourceError(
                "missing-scope", "documents: the scope has no workspace", kind="terminal"
            )
        return partition

    def _write_lock(self, partition: str) -> anyio.Lock:
        lock = self._write_locks.get(partition)
        if lock is None:
            lock = self._write_locks[partition] = anyio.Lock()
        return lock

    async def _blocking(self, call: Callable[..., _T]) -> _T:
        # a caller who stops waiting tells the worker thread, so it never writes afterwards
        abandon = threading.Event()
        return await guarded_call(
            partial(call, abandon=abandon), subject="the documents store", abandon=abandon
        )

    def _facts(self, availability: str, **values: Any) -> SourceFacts:
        return SourceFacts.model_validate(
            {
                "instance_key": self._key,
                "type_id": TYPE_ID,
                "role": ROLE,
                "availability": availability,
                **values,
            }
        )

    # ------------------------------------------------------------------ the View

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Report the workspace revision; `unavailable` when the scope has no workspace."""
        partition = partition_name(request.scope)
        if partition is None:
            return self._facts("unavailable", reason="missing-scope")
        found = await self._shared_state(partition)
        if isinstance(found, SourceError):  # an OSError arrives as `forbidden` or `provider_error`
            reason = _FACTS_REASONS.get(found.code, "storage-error")
            return self._facts("unavailable", reason=reason)
        state = found
        self._remember(partition, state)
        given = self._given.get(partition)
        if given is not None and given[0] is state:
            return given[1]
        facts = self._state_facts(state)
        self._given[partition] = (state, facts)
        self._given.move_to_end(partition)
        while len(self._given) > _GIVEN_KEPT:
            self._given.popitem(last=False)
        return facts

    def _state_facts(self, state: WorkspaceState) -> SourceFacts:
        hints: dict[str, Any] = {"documents": len(state.documents)}
        if state.skipped:
            # still served, but not everything named like a document is: a count, never a name
            hints["skipped"] = state.skipped
        return self._facts(
            "degraded" if state.skipped else "ready",
            reason="skipped-files" if state.skipped else None,
            revision=state.revision,
            capabilities=CAPABILITIES,
            route_ids=ROUTE_IDS,
            action_ids=ACTION_IDS,
            hints=hints,
        )

    async def _shared_state(self, partition: str) -> WorkspaceState | SourceError:
        """The workspace's state for facts(), one check shared by the turns asking at once.

        A turn joins a check only while it has not begun (it waits in the worker queue): one
        that begins after the turn asked sees what a check of the turn's own would see. When
        the turn that started it stops waiting, the others check on their own.
        """
        workspace = self._workspace(partition)
        check = self._checks.get(partition)
        if check is not None and not check.started:
            await check.done.wait()
            if check.outcome is not None:
                return check.outcome
        else:
            check = _SharedCheck()
            self._checks[partition] = check
            try:
                check.outcome = await self._blocking(partial(_begun, check, workspace.state))
            except SourceError as exc:
                check.outcome = exc
            finally:
                check.done.set()
                if self._checks.get(partition) is check:
                    del self._checks[partition]
            return check.outcome
        try:
            return await self._blocking(workspace.state)
        except SourceError as exc:
            return exc

    def _remember(self, partition: str, state: WorkspaceState) -> None:
        key = (partition, state.revision)
        if key not in self._snapshots:
            self._snapshots[key] = {id_: record.revision for id_, record in state.documents.items()}
        self._snapshots.move_to_end(key)
        kept = sum(len(pinned) for pinned in self._snapshots.values())
        # bounded in count and in documents; the newest snapshot is always kept
        while len(self._snapshots) > 1 and (
            len(self._snapshots) > _SNAPSHOTS_KEPT or kept > _SNAPSHOT_DOCUMENTS_KEPT
        ):
            _, dropped = self._snapshots.popitem(last=False)
            kept -= len(dropped)

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """A compact cover, and a grant pinning the documents of the revision facts announced.

        A write between `facts()` and `project()` does not matter: the snapshot facts saw is
        served, so the View's revision, cover and grant agree.

        Raises:
            SourceError: `degraded` when that snapshot is no longer kept and the workspace has
                moved on since.
        """
        partition = self._partition(request.scope)
        expected = request.expected_revision
        pinned = self._snapshots.get((partition, expected)) if expected is not None else None
        revision = expected
        if pinned is None:
            state = await self._blocking(self._workspace(partition).state)
            if expected is not None and state.revision != expected:
                raise SourceError("degraded", "documents: the workspace changed since facts()")
            pinned = {key: record.revision for key, record in state.documents.items()}
            revision = state.revision
        key = (partition, revision or "", request.mode, request.max_characters)
        contribution = self._contributions.get(key)
        if contribution is None:
            text = cover(len(pinned), request.max_characters)
            fragments = (
                (Fragment(source_key=self._key, mode=request.mode, text=text),) if text else ()
            )
            contribution = ViewContribution(
                fragments=fragments,
                grant=self._grant(partition, revision, pinned),
                revision=revision,
            )
            self._contributions[key] = contribution
            while len(self._contributions) > _GRANTS_KEPT:
                self._contributions.popitem(last=False)
        self._contributions.move_to_end(key)
        return contribution

    def _grant(self, partition: str, revision: str | None, pinned: Mapping[str, str]) -> ReadGrant:
        # a grant names every pinned document: built (and frozen) once per revision, not per turn
        key = (partition, revision or "")
        grant = self._grants.get(key)
        if grant is None:
            grant = ReadGrant(
                source_key=self._key,
                value={"workspace": partition, "revision": revision, "documents": dict(pinned)},
            )
            self._grants[key] = grant
            while len(self._grants) > _GRANTS_KEPT:
                self._grants.popitem(last=False)
        self._grants.move_to_end(key)
        return grant

    async def query(self, request: QueryRequest) -> Evidence:
        """Search the pinned documents; excerpts fit the route's ceilings."""
        workspace, pinned = _pinned(request.grant.value)
        if partition_name(request.view.scope) != workspace:
            raise SourceError("forbidden", "documents: the grant belongs to another workspace")
        route = request.route
        limit = request.input.get("limit", DEFAULT_SEARCH_LIMIT)
        count = max(1, min(limit, route.max_results, route.max_characters))
        # every item is an excerpt: within the configured size, its share of the read, and
        # the route's per-item ceiling
        share = min(
            self._settings.excerpt_characters,
            route.max_characters // count,
            route.max_item_characters,
        )
        expression = match_expression(str(request.input["query"]))
        hits: list[Hit] = []
        if expression is not None:
            hits = await self._blocking(
                partial(self._workspace(workspace).search, expression, pinned, count + 1)
            )
        items = tuple(
            EvidenceItem(
                id=hit.id,
                text=excerpt(hit.excerpt.strip() or hit.title, share),
                provenance={
                    "document": hit.id,
                    "title": hit.title,
                    "revision": hit.revision,
                    "rank": rank,
                    "score": round(hit.score, 6),
                    "excerpt": True,
                },
            )
            for rank, hit in enumerate(hits[:count], start=1)
        )
        return Evidence(
            view_id=request.view.id,
            route_id=route.id,
            source_key=self._key,
            items=items,
            truncated=len(hits) > count,
        )

    # ------------------------------------------------------------------ writes

    async def _create(
        self, partition: str, value: Mapping[str, Any], key: str | None, expected: str | None
    ) -> WriteOutcome:
        title = check_title(str(value["title"]), "create")
        body = check_body(str(value["body"]), "create")
        document_id = new_document_id() if key is None else derived_document_id(partition, key)
        async with self._write_lock(partition):
            return await self._blocking(
                partial(
                    self._workspace(partition).create,
                    document_id,
                    title,
                    body,
                    expected_revision=expected,
                )
            )

    async def _update(
        self,
        partition: str,
        value: Mapping[str, Any],
        *,
        retry: bool,
        expected: str | None,
    ) -> WriteOutcome:
        document_id = str(value["document"])
        if not is_document_id(document_id):
            raise SourceError("invalid_payload", "documents update: malformed document handle")
        title = check_title(str(value["title"]), "update") if "title" in value else None
        body = check_body(str(value["body"]), "update") if "body" in value else None
        if title is None and body is None:
            raise SourceError(
                "invalid_payload", "documents update: give a new title, a new body, or both"
            )
        revision = value.get("expected_revision")
        async with self._write_lock(partition):
            return await self._blocking(
                partial(
                    self._workspace(partition).update,
                    document_id,
                    title=title,
                    body=body,
                    document_revision_expected=None if revision is None else str(revision),
                    expected_revision=expected,
                    accept_applied=retry,
                )
            )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Create or update a document; the receipt says committed only once it is durable."""
        partition = self._partition(request.view.scope)
        action = request.offer.action_id
        key = request.idempotency_key
        if action == "create":
            outcome = await self._create(partition, request.input, key, None)
        elif action == "update":
            outcome = await self._update(
                partition, request.input, retry=key is not None, expected=None
            )
        else:
            raise SourceError("invalid_payload", f"documents: no action {action!r}")
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=_now(),
            revision=outcome.revision,
            detail={"document": outcome.record.id, "document_revision": outcome.record.revision},
        )

    # ------------------------------------------------------------------ management

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """List, read, create or update documents of the scope's workspace, as they are now."""
        partition = self._partition(request.scope)
        operation = request.operation.id
        value = request.input
        workspace = self._workspace(partition)
        output: dict[str, Any]
        if operation == "list":
            # for a person: as the files are now, never the rolling re-check's bound
            state = await self._blocking(partial(workspace.state, fresh=True))
            ordered = sorted(
                state.documents.values(), key=lambda record: (record.title.casefold(), record.id)
            )
            offset = int(value.get("offset", 0))
            page = ordered[offset : offset + int(value.get("limit", 100))]
            output = {
                "revision": state.revision,
                "total": len(ordered),
                "documents": [_listed(record) for record in page],
            }
            return self._result(operation, output, state.revision)
        if operation == "read":
            document = await self._blocking(partial(workspace.read, str(value["document"])))
            if document is None:
                raise SourceError("not_found", "documents read: no such document here")
            output = {**_listed(document.record), "body": document.body}
            return self._result(operation, output, None)
        if operation == "records-read":
            return await self._read_records(workspace, value)
        if operation == "records-write":
            return await self._write_records(partition, request)
        if operation == "create":
            outcome = await self._create(partition, value, None, request.expected_revision)
        elif operation == "update":
            outcome = await self._update(
                partition, value, retry=False, expected=request.expected_revision
            )
        else:
            raise SourceError("invalid_payload", f"documents: no operation {operation!r}")
        output = {
            "document": outcome.record.id,
            "revision": outcome.record.revision,
            "workspace_revision": outcome.revision,
            # the file was written atomically (synced) before this answer: durable
            "completion": "committed",
        }
        return self._result(operation, output, outcome.revision)

    async def _read_records(self, workspace: Any, value: Mapping[str, Any]) -> ManagementResult:
        """One page of the documents, with their bodies, ordered by title (`records-read`)."""
        state = await self._blocking(partial(workspace.state, fresh=True))
        ordered = sorted(
            state.documents.values(), key=lambda record: (record.title.casefold(), record.id)
        )
        cursor = str(value.get("cursor", "0"))
        start = int(cursor) if cursor.isdigit() else 0
        end = start + int(value["limit"])
        records = []
        for record in ordered[start:end]:
            document = await self._blocking(partial(workspace.read, record.id))
            if document is None:
                continue  # deleted since the listing: not part of this page
            records.append(
                {
                    "id": record.id,
                    "title": document.record.title,
                    "body": document.body,
                    "revision": document.record.revision,
                }
            )
        output = {"records": records, "next_cursor": str(end) if end < len(ordered) else None}
        return self._result("records-read", output, state.revision)

    async def _write_records(self, partition: str, request: ManageRequest) -> ManagementResult:
        """Create a document per record, in order, each fenced by the revision before it.

        A record the workspace refuses (too large) is refused alone; anything else stops the
        batch, with the earlier documents created.

        Raises:
            RevisionConflict: the workspace moved on from the expected revision.
            SourceError: the workspace cannot be written.
        """
        expected = request.expected_revision
        results: list[dict[str, Any]] = []
        for index, item in enumerate(request.input["records"]):
            record = item["record"]
            try:
                outcome = await self._create(partition, record, None, expected)
            except SourceError as exc:
                if exc.kind != "terminal":
                    raise
                results.append(
                    {"index": index, "completion": "refused", "code": exc.code, "message": str(exc)}
                )
                continue
            expected = outcome.revision
            results.append({"index": index, "completion": "committed", "id": outcome.record.id})
        return self._result("records-write", {"results": results}, expected)

    def _result(self, operation: str, output: Any, revision: str | None) -> ManagementResult:
        return ManagementResult(
            source_key=self._key, operation=operation, output=output, revision=revision
        )


def _listed(record: DocumentRecord) -> dict[str, Any]:
    return {
        "document": record.id,
        "title": record.title,
        "revision": record.revision,
        "bytes": record.stat.size,
        "updated_at": _moment(record.stat),
    }


def create_documents_source(init: SourceInit) -> DocumentsSource:
    """The factory: check the configuration and make the runtime (nothing touches the disk).

    Raises:
        DefinitionError: the configuration is invalid; the message names the key.
    """
    return DocumentsSource(init.instance_key, read_settings(init))
