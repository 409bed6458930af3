"""Host maintenance: what a Strategy's maintenance policy is shown, and how its plan runs.

The policy is pure and plans in the core's terms; the host executes the plan only through
operations Sources declare: `records-read`, `records-write` (idempotent) and `records-delete`
(revision-fenced) of the records contract, and the `write-scope` preflight. The order cannot
lose data: an entry's copy is committed before the entry is removed, and the removal is
fenced by a revision at which the entry was read unchanged. A run stopped between the two
leaves a duplicate at worst; running it again replays the copy (same idempotency key) and
removes the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .._awaited import awaited
from .._errors import MaintenanceError, ManagementError, MnemonError, RevisionConflict
from .._json import thaw_json
from .._models import (
    MAX_MAINTENANCE_RECORDS,
    TASK_KIND,
    ActionOffer,
    ArchiveMove,
    Authorize,
    FactsRequest,
    MaintenanceEntry,
    MaintenancePlan,
    MaintenanceReport,
    MaintenanceRequest,
    MaintenanceSource,
    MaintenanceTask,
    MaintenanceTrigger,
    ManagementEntry,
    ManagementRequest,
    RecordKind,
    Scope,
    SourceFacts,
    WriteScope,
    validate_model,
)
from .._models.manifests import WRITE_SCOPE_OPERATION
from .._schema import input_problems
from .assembly import PinnedView
from .checks import checked_facts
from .generation import Generation
from .management import management_catalog, run_management
from .reads import call_source

__all__ = ["archive_key", "run_maintenance"]

# a removal fenced by a revision that moved on is tried again this many times
_FENCE_ATTEMPTS = 3
_PAGE = 100


def archive_key(move: ArchiveMove, record: Mapping[str, Any]) -> str:
    """The idempotency key of a record's archive copy: its identity and its content.

    The same entry in the same state always gets the same key, so the copy of a run that
    stopped before removing the original is replayed by the next run, never written twice.
    """
    identity = [move.source_key, move.kind, move.record_id, move.to_source_key, move.to_kind]
    body = orjson.dumps([identity, thaw_json(record)], option=orjson.OPT_SORT_KEYS)
    return f"mnemon-archive:{hashlib.sha256(body).hexdigest()[:48]}"


def _task_key(view_scope: Scope, draft: Mapping[str, Any]) -> str:
    body = orjson.dumps([view_scope.model_dump(mode="json"), draft], option=orjson.OPT_SORT_KEYS)
    return f"mnemon-task:{hashlib.sha256(body).hexdigest()[:48]}"


def _digest(plan: MaintenancePlan) -> str:
    body = orjson.dumps(plan.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()


class _Run:
    """One maintenance run on one pinned View."""

    def __init__(
        self, pinned: PinnedView, trigger: MaintenanceTrigger, authorize: Authorize
    ) -> None:
        self.pinned = pinned
        self.generation: Generation = pinned.generation
        self.view = pinned.view
        self.scope = pinned.view.request.scope
        self.trigger = trigger
        self.authorize = authorize
        self.catalog: dict[str, ManagementEntry] = {
            entry.source_key: entry for entry in management_catalog(self.generation)
        }

    # ------------------------------------------------------------------ Source calls

    async def facts(self, key: str) -> SourceFacts | None:
        """Fresh facts of `key` in the View's scope; None when they fail."""
        slot = self.generation.by_key.get(key)
        if slot is None:
            return None
        request = FactsRequest(instance_key=key, scope=self.scope, scenario="maintenance")
        value, failure, timed_out = await call_source(
            lambda: slot.runtime.facts(request), self.generation.plan.settings.source_timeout
        )
        if timed_out or failure is not None:
            return None
        try:
            return checked_facts(slot, value)
        except MnemonError:
            return None

    async def manage(
        self,
        key: str,
        operation: str,
        payload: Mapping[str, Any],
        *,
        revision: str | None = None,
    ) -> tuple[Any, str | None]:
        """Run one management operation in the View's scope: (output, revision after)."""
        mutation = operation in ("records-write", "records-delete")
        request = ManagementRequest(
            source_key=key,
            operation=operation,
            input=payload,
            scope=self.scope,
            confirmed=mutation,
            expected_revision=revision if mutation else None,
        )
        result = await run_management(self.generation, request)
        return result.output, result.revision

    async def records(self, key: str, kind: RecordKind) -> tuple[list[dict[str, Any]], str | None]:
        """The records of `kind` now (at most `MAX_MAINTENANCE_RECORDS`), and the revision."""
        records: list[dict[str, Any]] = []
        cursor = None
        revision = None
        while len(records) < MAX_MAINTENANCE_RECORDS:
            payload: dict[str, Any] = {
                "kind": kind.id,
                "limit": min(_PAGE, MAX_MAINTENANCE_RECORDS - len(records)),
            }
            if cursor:
                payload["cursor"] = cursor
            output, page_revision = await self.manage(key, "records-read", payload)
            revision = revision or page_revision
            records += [thaw_json(record) for record in output["records"]]
            cursor = output.get("next_cursor")
            if not cursor:
                break
        return records, revision

    async def write_scope(self, key: str) -> WriteScope:
        """The `write-scope` preflight of `key` for this View, checked; fails closed.

        Raises:
            MaintenanceError: `write-scope-refused` (the Source refused or failed),
                `write-scope-malformed` (an answer of another shape) or `write-scope-mismatch`
                (an answer for another View or Source).
        """
        grant = self.pinned.grants.get(key)
        payload = {
            "write_scope": {
                "view_id": self.view.id,
                "grant": None if grant is None else grant.value,
            }
        }
        try:
            output, _ = await self.manage(key, WRITE_SCOPE_OPERATION, payload)
        except (ManagementError, RevisionConflict) as exc:
            code = getattr(exc, "code", "revision-conflict")
            raise MaintenanceError(
                f"{key} refused the write-scope preflight ({code}); nothing was written",
                code="write-scope-refused",
            ) from exc
        if not isinstance(output, Mapping) or set(output) != {"write_scope"}:
            raise _malformed(key)
        try:
            answer = validate_model(
                WriteScope, output["write_scope"], subject="write scope", error=MaintenanceError
            )
        except MaintenanceError:
            raise _malformed(key) from None
        if answer.view_id != self.view.id or answer.source_key != key:
            raise MaintenanceError(
                f"{key} answered the write-scope preflight for another View or Source; "
                "nothing was written",
                code="write-scope-mismatch",
            )
        return answer

    # ------------------------------------------------------------------ the request

    async def request(self) -> tuple[MaintenanceRequest, dict[str, MaintenanceSource]]:
        view = self.view
        eager = {fragment.source_key for fragment in view.fragments if fragment.mode == "eager"}
        sources: dict[str, MaintenanceSource] = {}
        for pinned in view.consistency:
            key = pinned.source_key
            facts = await self.facts(key)
            entry = self.catalog.get(key)
            kinds = entry.records if entry is not None else ()
            resident = key in eager or key == self.trigger.source_key
            writable = any(offer.source_key == key for offer in view.offers)
            records: dict[str, Any] = {}
            if resident and facts is not None and facts.availability != "unavailable":
                for kind in kinds:
                    if kind.readable and kind.id != TASK_KIND:
                        try:
                            records[kind.id], _ = await self.records(key, kind)
                        except (ManagementError, RevisionConflict):
                            records.pop(kind.id, None)
            scope_answer = None
            declares = entry is not None and any(
                op.id == WRITE_SCOPE_OPERATION for op in entry.operations
            )
            if writable and declares:
                scope_answer = await self.write_scope(key)
            sources[key] = MaintenanceSource(
                source_key=key,
                role=pinned.role or (facts.role if facts is not None else "unknown"),
                availability=facts.availability if facts is not None else "unavailable",
                revision=facts.revision if facts is not None else None,
                usage=facts.usage if facts is not None else None,
                hints=facts.hints if facts is not None else {},
                resident=resident,
                writable=writable,
                record_kinds=kinds,
                records=records,
                write_scope=scope_answer,
            )
        request = MaintenanceRequest(
            view=view, trigger=self.trigger, sources=tuple(sources.values())
        )
        return request, sources

    def plan(self, request: MaintenanceRequest) -> MaintenancePlan:
        """The policy's plan, asked twice: a policy that answers two plans is refused.

        Raises:
            MaintenanceError: `policy-failed`, `policy-not-pure` or `invalid-plan`.
        """
        policy = self.pinned.strategy.maintain
        assert policy is not None
        plans = []
        for _ in range(2):
            try:
                produced = policy(request)
            except MnemonError:
                raise
            except Exception as exc:
                raise MaintenanceError(
                    "the Strategy's maintenance policy failed", code="policy-failed"
                ) from exc
            plans.append(
                validate_model(
                    MaintenancePlan, produced, subject="maintenance plan", error=MaintenanceError
                )
            )
        if plans[0] != plans[1]:
            raise MaintenanceError(
                "the Strategy's maintenance policy answered two different plans for one request",
                code="policy-not-pure",
            )
        return plans[0]

    # ------------------------------------------------------------------ checking a plan

    def check(self, plan: MaintenancePlan, sources: Mapping[str, MaintenanceSource]) -> None:
        """Refuse a plan outside what the View and the preflight allow; nothing is written.

        Raises:
            MaintenanceError: `invalid-plan`, `ambiguous-archive` or `write-scope-denied`.
        """
        targets = {move.to_source_key for move in plan.archive}
        if len(targets) > 1:
            raise MaintenanceError(
                "a plan archives into one Source; this one names several", code="ambiguous-archive"
            )
        for move in plan.archive:
            origin = sources.get(move.source_key)
            if origin is None or not origin.resident:
                raise _invalid(f"archive: {move.source_key} is not a resident Source of the View")
            kind = _kind(origin, move.kind)
            if kind is None or not (kind.readable and kind.deletable):
                raise _invalid(f"archive: {move.source_key} has no readable, deletable kind here")
            if not any(
                record.get("id") == move.record_id for record in origin.records.get(move.kind, ())
            ):
                raise _invalid(f"archive: {move.source_key} has no such {move.kind} record")
            target = sources.get(move.to_source_key)
            if target is None or not target.writable:
                raise _invalid(f"archive: {move.to_source_key} takes no writes in this View")
            if target.write_scope is None:
                raise _invalid(
                    f"archive: {move.to_source_key} does not answer the write-scope preflight"
                )
            to_kind = _kind(target, move.to_kind)
            if to_kind is None or not to_kind.writable:
                raise _invalid(f"archive: {move.to_source_key} has no writable {move.to_kind}")
            problems = input_problems(to_kind.record_schema, move.record)
            if problems:
                raise _invalid(f"archive: the copy breaks {move.to_kind}'s schema")
            groups = target.write_scope.groups
            group = move.record.get(to_kind.group_field) if to_kind.group_field else None
            allowed = bool(groups) and (to_kind.group_field is None or group in groups)
            if not allowed:
                raise MaintenanceError(
                    f"{move.to_source_key}'s write scope for this View does not include where "
                    "the plan archives; nothing was written",
                    code="write-scope-denied",
                )
            rivals = [
                source.source_key
                for source in sources.values()
                if source.role == target.role
                and source.writable
                and source.write_scope is not None
                and source.source_key != target.source_key
            ]
            if rivals:
                raise MaintenanceError(
                    f"several writable {target.role} Sources could take the archive "
                    f"({target.source_key}, {', '.join(rivals)}); nothing was written",
                    code="ambiguous-archive",
                )
        for draft in plan.tasks:
            if draft.source_key not in sources:
                raise _invalid(f"tasks: {draft.source_key} is not a Source of the View")

    # ------------------------------------------------------------------ executing a plan

    def _offer(self, key: str) -> ActionOffer | None:
        return next((offer for offer in self.view.offers if offer.source_key == key), None)

    def _observe(self, step: str, outcome: str) -> None:
        self.generation.observers.emit("mnemon_observe_maintenance", step=step, outcome=outcome)

    async def _live(self, key: str) -> str | None:
        """Why `key` may not be written now (None: authorized again, still offering writes)."""
        offer = self._offer(key)
        if offer is None or not await awaited(self.authorize(offer)):
            return "not-authorized"
        facts = await self.facts(key)
        live = (
            facts is not None
            and facts.availability != "unavailable"
            and offer.action_id in facts.action_ids
        )
        return None if live else "target-unavailable"

    async def _current(self, move: ArchiveMove) -> tuple[dict[str, Any] | None, str | None]:
        """The record as its Source holds it now, and the revision it was read at."""
        origin = self.catalog[move.source_key]
        kind = next(kind for kind in origin.records if kind.id == move.kind)
        records, revision = await self.records(move.source_key, kind)
        found = next((record for record in records if record.get("id") == move.record_id), None)
        return found, revision

    async def archive(
        self, move: ArchiveMove, seen: Mapping[str, Any]
    ) -> tuple[MaintenanceEntry, bool]:
        """Archive one record; (its entry, whether the run may go on)."""
        entry = {
            "source_key": move.source_key,
            "kind": move.kind,
            "record_id": move.record_id,
            "to_source_key": move.to_source_key,
        }
        why = await self._live(move.to_source_key)
        if why is not None:
            self._observe("archive-copy", "refused")
            return _entry(entry, "refused", code=why), False
        try:
            current, _ = await self._current(move)
        except (ManagementError, RevisionConflict):
            return _entry(entry, "kept", code="read-failed"), False
        if current is None:
            # gone since the plan was made (another run archived it, or a person removed it)
            self._observe("archive-copy", "gone")
            return _entry(entry, "unknown", code="record-gone"), True
        if current != seen:
            self._observe("archive-copy", "kept")
            return _entry(entry, "kept", code="record-changed"), True
        copy = await self._copy(move, seen)
        self._observe("archive-copy", copy.get("state", "unknown"))
        state = copy.get("state")
        details = {**entry, "copied": state, "copy_id": copy.get("id")}
        details["replayed"] = bool(copy.get("replayed"))
        if state == "unknown":
            return _entry(details, "unknown", code=copy.get("code")), False
        if state == "refused":
            return _entry(details, "refused", code=copy.get("code")), True
        if state == "accepted":
            # durability of the copy is not confirmed: the original stays
            return _entry(details, "kept", code="copy-unconfirmed"), True
        return await self._remove(move, seen, details)

    async def _copy(self, move: ArchiveMove, seen: Mapping[str, Any]) -> dict[str, Any]:
        key = move.to_source_key
        payload = {
            "kind": move.to_kind,
            "records": [{"record": move.record, "idempotency_key": archive_key(move, seen)}],
        }
        for _ in range(_FENCE_ATTEMPTS):
            revision = (await self.facts(key) or _NO_FACTS).revision
            try:
                output, _ = await self.manage(key, "records-write", payload, revision=revision)
            except RevisionConflict:
                continue
            except ManagementError as exc:
                nothing = exc.kind == "terminal" or exc.code in ("invalid-input", "unconfirmed")
                return {"state": "refused" if nothing else "unknown", "code": exc.code}
            (outcome,) = output["results"]
            if outcome["completion"] == "refused":
                return {"state": "refused", "code": outcome.get("code")}
            return {
                "state": outcome["completion"],
                "id": outcome.get("id"),
                "replayed": outcome.get("replayed", False),
            }
        return {"state": "refused", "code": "revision-conflict"}

    async def _remove(
        self, move: ArchiveMove, seen: Mapping[str, Any], details: dict[str, Any]
    ) -> tuple[MaintenanceEntry, bool]:
        for _ in range(_FENCE_ATTEMPTS):
            try:
                current, revision = await self._current(move)
            except (ManagementError, RevisionConflict):
                self._observe("archive-remove", "unknown")
                return _entry(details, "kept", code="read-failed"), False
            if current is None:
                # another run removed it after its own copy (the same copy: replayed here)
                self._observe("archive-remove", "gone")
                return _entry(details, "archived", removed=False), True
            if current != seen:
                self._observe("archive-remove", "kept")
                return _entry(details, "kept", code="record-changed"), True
            try:
                output, _ = await self.manage(
                    move.source_key,
                    "records-delete",
                    {"kind": move.kind, "id": move.record_id},
                    revision=revision,
                )
            except RevisionConflict:
                continue  # the Source moved on: read the entry again
            except ManagementError as exc:
                if exc.kind == "terminal":
                    self._observe("archive-remove", "refused")
                    return _entry(details, "kept", code=exc.code), True
                self._observe("archive-remove", "unknown")
                return _entry(details, "unknown", code=exc.code), False
            removed = bool(output.get("deleted"))
            self._observe("archive-remove", "removed" if removed else "gone")
            return _entry(details, "archived", removed=removed), True
        self._observe("archive-remove", "kept")
        return _entry(details, "kept", code="revision-conflict"), True

    async def create_task(
        self, draft_json: dict[str, Any], stores: Sequence[str], dry_run: bool
    ) -> MaintenanceTask:
        draft = draft_json
        store = next(iter(stores), None)
        base = {"draft": draft, "source_key": store, "id": None}
        if store is None:
            return MaintenanceTask.model_validate({**base, "completion": "unstored"})
        if dry_run:
            return MaintenanceTask.model_validate({**base, "completion": "planned"})
        record = {
            "task": draft["task"],
            "instruction": draft["instruction"],
            "source_key": draft["source_key"],
            "record_ids": list(draft["record_ids"]),
        }
        payload = {
            "kind": TASK_KIND,
            "records": [{"record": record, "idempotency_key": _task_key(self.scope, draft)}],
        }
        revision = (await self.facts(store) or _NO_FACTS).revision
        try:
            output, _ = await self.manage(store, "records-write", payload, revision=revision)
        except (ManagementError, RevisionConflict):
            self._observe("task", "unknown")
            return MaintenanceTask.model_validate({**base, "completion": "unknown"})
        (outcome,) = output["results"]
        self._observe("task", outcome["completion"])
        return MaintenanceTask.model_validate(
            {**base, "completion": outcome["completion"], "id": outcome.get("id")}
        )


class _NoFacts:
    revision = None


_NO_FACTS: Any = _NoFacts()


def _kind(source: MaintenanceSource, kind_id: str) -> RecordKind | None:
    return next((kind for kind in source.record_kinds if kind.id == kind_id), None)


def _entry(details: Mapping[str, Any], outcome: str, **extra: Any) -> MaintenanceEntry:
    return MaintenanceEntry.model_validate({**details, "outcome": outcome, **extra})


def _malformed(key: str) -> MaintenanceError:
    return MaintenanceError(
        f"{key} answered the write-scope preflight in another shape; nothing was written",
        code="write-scope-malformed",
    )


def _invalid(message: str) -> MaintenanceError:
    return MaintenanceError(f"maintenance plan: {message}", code="invalid-plan")


def _task_stores(sources: Mapping[str, MaintenanceSource], preferred: str | None) -> list[str]:
    """The Sources of the View that store maintenance tasks, the preferred one first."""
    stores = [
        source.source_key
        for source in sources.values()
        if any(kind.id == TASK_KIND and kind.writable for kind in source.record_kinds)
    ]
    return sorted(stores, key=lambda key: key != preferred)


async def run_maintenance(
    pinned: PinnedView,
    trigger: MaintenanceTrigger,
    authorize: Authorize,
    *,
    dry_run: bool = False,
    expected_plan: str | None = None,
) -> MaintenanceReport:
    """Plan maintenance for `pinned` with its Strategy's policy, and run the plan.

    A dry run reads and plans but writes nothing; a run given `expected_plan` (a dry run's
    `plan_digest`) applies that plan or nothing.

    Raises:
        MaintenanceError: the Strategy has no policy, the policy refused, the plan is
            invalid or outside the write scope, the preflight failed or answered malformed,
            or the plan changed since the dry run; nothing was written. After writes began,
            failures are per entry in the report instead.
    """
    if pinned.strategy.maintain is None:
        raise MaintenanceError(
            f"Strategy {pinned.view.strategy_type_id!r} has no maintenance policy",
            code="no-maintenance-policy",
        )
    run = _Run(pinned, trigger, authorize)
    request, sources = await run.request()
    plan = run.plan(request)
    digest = _digest(plan)
    usage = tuple(
        (source.source_key, source.usage) for source in sources.values() if source.usage is not None
    )
    counts = {
        source.source_key: {kind: len(records) for kind, records in source.records.items()}
        for source in sources.values()
        if source.records
    }
    base: dict[str, Any] = {
        "view_id": pinned.view.id,
        "scope": pinned.view.request.scope,
        "strategy_type_id": pinned.view.strategy_type_id,
        "trigger": trigger,
        "dry_run": dry_run,
        "explanation": plan.explanation,
        "plan_digest": digest,
        "usage": usage,
        "record_counts": counts,
    }
    if plan.refusal is not None:
        run._observe("plan", "refused")
        report = MaintenanceReport.model_validate({**base, "refusal": plan.refusal})
        raise MaintenanceError(
            f"maintenance refused: {plan.refusal.message}", code=plan.refusal.code, report=report
        )
    run.check(plan, sources)
    if expected_plan is not None and expected_plan != digest:
        raise MaintenanceError(
            "the memory changed since the plan was shown; nothing was written (plan again)",
            code="plan-changed",
            report=MaintenanceReport.model_validate(base),
        )
    run._observe("plan", "planned")
    seen = {
        (move.source_key, move.kind, move.record_id): thaw_json(
            next(
                record
                for record in sources[move.source_key].records[move.kind]
                if record.get("id") == move.record_id
            )
        )
        for move in plan.archive
    }
    entries: list[MaintenanceEntry] = []
    going = True
    for move in plan.archive:
        details = {
            "source_key": move.source_key,
            "kind": move.kind,
            "record_id": move.record_id,
            "to_source_key": move.to_source_key,
        }
        if dry_run:
            entries.append(_entry(details, "planned"))
            continue
        if not going:
            entries.append(_entry(details, "kept", code="run-stopped"))
            continue
        entry, going = await run.archive(move, seen[(move.source_key, move.kind, move.record_id)])
        entries.append(entry)
    stores = _task_stores(sources, trigger.source_key)
    tasks = [
        await run.create_task(draft.model_dump(mode="json"), stores, dry_run)
        for draft in plan.tasks
    ]
    report = MaintenanceReport.model_validate({**base, "entries": entries, "tasks": tasks})
    denied = next((entry for entry in entries if entry.code == "not-authorized"), None)
    if denied is not None:
        raise MaintenanceError(
            f"maintenance stopped: writing to {denied.to_source_key} is not authorized now; "
            "the entries not archived stay where they were",
            code="not-authorized",
            report=report,
        )
    return report
