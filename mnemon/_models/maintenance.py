"""Capacity maintenance: what a Strategy's maintenance policy sees, plans and is told.

A policy is pure: it reads a `MaintenanceRequest` (the View, what triggered maintenance, the
Sources with their usage and, for resident ones, their records) and answers a
`MaintenancePlan` in these terms: records to archive, by identity, from one Source into
another, and tasks that need a model's judgment. The host alone executes a plan, through the
records contract and the `write-scope` preflight; each entry gets a `MaintenanceEntry`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, StringConstraints, model_validator

from .base import Id, InstanceKey, JsonObject, JsonValue, Revision, StrictBool, WireModel
from .manifests import RecordKind
from .sources import Scope, SourceUsage
from .view import View

RecordId = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=1_000)]
GroupName = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=1_000)]
ShortText = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=500)]
# an error code as a Source gives it (`not_found`, a capacity refusal's own code)
ErrorCode = Annotated[
    str, Strict(), StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
]

MAX_MAINTENANCE_RECORDS = 1_000
"""The most records of one kind the host reads for a policy (resident memory is small)."""
MAX_PLAN_MOVES = 256
"""The most records one plan may archive."""
MAX_PLAN_TASKS = 16
"""The most maintenance tasks one plan may create."""


class MaintenanceTrigger(WireModel):
    """Why maintenance runs: a write refused by its Source, or an operator asking."""

    kind: Literal["refused-write", "operator"]
    """`refused-write` (the host runs it after a Source refused a write with nothing written)
    or `operator` (a person ran it, with `mnemon maintain` or `MemoryHost.maintain`)."""
    source_key: InstanceKey | None = None
    """The Source that refused the write (`refused-write` only)."""
    action_id: Id | None = None
    """The refused action's id within its Source (`refused-write` only)."""
    code: ErrorCode | None = None
    """The Source's error code, such as a capacity refusal's (`refused-write` only)."""
    input: JsonObject | None = None
    """The refused write's validated input (`refused-write` only); it stays host-side."""

    @model_validator(mode="after")
    def _check(self) -> MaintenanceTrigger:
        refused = self.kind == "refused-write"
        named = (self.source_key, self.action_id, self.code)
        if refused and any(value is None for value in named):
            raise ValueError("a refused-write trigger names its source_key, action_id and code")
        if not refused and any(value is not None for value in (*named, self.input)):
            raise ValueError("an operator trigger names no Source, action, code or input")
        return self


class WriteScope(WireModel):
    """A Source's answer to the `write-scope` preflight: where this View may write records."""

    view_id: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]
    """The View the scope was asked for (echoed; the host checks it)."""
    source_key: InstanceKey
    """The answering Source (echoed; the host checks it)."""
    groups: tuple[GroupName, ...] = Field(max_length=1_000)
    """The record groups (values of a kind's `group_field`, such as folders) this View may write;
    empty means it may write nowhere."""


class MaintenanceSource(WireModel):
    """One Source of the View as a maintenance policy sees it."""

    source_key: InstanceKey
    """The Source's instance key."""
    role: Id
    """Its role."""
    availability: Literal["ready", "degraded", "unavailable"]
    """Its availability now (fresh facts)."""
    revision: Revision | None = None
    """Its revision now (fresh facts)."""
    usage: SourceUsage | None = None
    """How full it is, when it says (fresh facts)."""
    hints: JsonObject
    """Its coarse hints now (fresh facts)."""
    resident: StrictBool
    """Whether the View projects it eagerly (its records are then read for the policy)."""
    writable: StrictBool
    """Whether the View offers writes to it."""
    record_kinds: tuple[RecordKind, ...]
    """The record kinds it declares."""
    records: JsonObject
    """A resident Source's records now, by kind id (at most `MAX_MAINTENANCE_RECORDS` each)."""
    write_scope: WriteScope | None = None
    """Its answer to the `write-scope` preflight, for a writable Source that declares it."""


class MaintenanceRequest(WireModel):
    """What a Strategy's `maintain` policy receives."""

    view: View
    """The View maintenance runs for (its scope, selection and offers)."""
    trigger: MaintenanceTrigger
    """Why it runs."""
    sources: tuple[MaintenanceSource, ...]
    """The View's Sources, in the View's order."""


class ArchiveMove(WireModel):
    """Archive one record: copy it into another Source, then remove the original."""

    source_key: InstanceKey
    """The Source holding the record (a resident Source of the request)."""
    kind: Id
    """The record's kind there (readable and deletable)."""
    record_id: RecordId
    """The record's id."""
    to_source_key: InstanceKey
    """The Source receiving the copy (writable in the View, answering `write-scope`)."""
    to_kind: Id
    """The kind the copy is written as (writable there)."""
    record: JsonObject
    """The copy, valid against `to_kind`'s schema (its group field inside the write scope)."""


class MaintenanceTaskDraft(WireModel):
    """Work that needs a model's judgment, which the host's agent does with its own model."""

    task: Id
    """What to do: `merge`, `summarize`, `review`, ..."""
    instruction: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
    """What the model is asked to do, trusted text without memory content."""
    source_key: InstanceKey
    """The Source whose records it concerns."""
    record_ids: tuple[RecordId, ...] = Field(default=(), max_length=64)
    """The records it concerns."""


class MaintenanceRefusal(WireModel):
    """Why a policy will not maintain this View (the triggering write then fails as it did)."""

    code: Id
    """A stable code, such as `ambiguous-archive` or `no-archive-source`."""
    message: ShortText
    """A sentence naming the rule, never memory content."""


class MaintenancePlan(WireModel):
    """A policy's answer: what to archive and which tasks to create, or a refusal."""

    explanation: ShortText
    """Why this plan, in a sentence (shown to people, not to the model)."""
    archive: tuple[ArchiveMove, ...] = Field(default=(), max_length=MAX_PLAN_MOVES)
    """The records to archive, in order."""
    tasks: tuple[MaintenanceTaskDraft, ...] = Field(default=(), max_length=MAX_PLAN_TASKS)
    """The maintenance tasks to create."""
    refusal: MaintenanceRefusal | None = None
    """Set when the policy refuses; a refusing plan archives nothing and creates no task."""

    @model_validator(mode="after")
    def _check(self) -> MaintenancePlan:
        if self.refusal is not None and (self.archive or self.tasks):
            raise ValueError("refusal: a refusing plan archives nothing and creates no task")
        seen = set()
        for move in self.archive:
            identity = (move.source_key, move.kind, move.record_id)
            if identity in seen:
                raise ValueError(f"archive: record {move.record_id!r} is archived twice")
            seen.add(identity)
        return self


EntryOutcome = Literal["planned", "archived", "kept", "refused", "unknown"]


class MaintenanceEntry(WireModel):
    """What happened to one record of a plan; never more than the host knows."""

    source_key: InstanceKey
    """The Source that held the record."""
    kind: Id
    """Its kind."""
    record_id: RecordId
    """Its id."""
    to_source_key: InstanceKey
    """Where it was to be archived."""
    outcome: EntryOutcome
    """`planned` (a dry run), `archived` (the copy is committed and the original is gone),
    `kept` (the original stays: nothing was removed), `refused` (a write was refused; the
    original stays) or `unknown` (a call failed in a way that cannot tell what happened)."""
    copied: Literal["none", "committed", "accepted", "refused", "unknown"] = "none"
    """How far the archive copy got: `committed` (durable), `accepted` (stored, durability not
    confirmed: the original is then kept), `refused`, `unknown`."""
    copy_id: RecordId | None = None
    """The copy's id in the receiving Source, when it said."""
    replayed: StrictBool = False
    """Whether the copy was already there (an earlier run wrote it): nothing new stored."""
    removed: StrictBool = False
    """Whether this run removed the original (false when another run already had)."""
    code: ErrorCode | None = None
    """Why it is not archived, when it is not."""


class MaintenanceTask(WireModel):
    """A maintenance task the host created, as its Source stores it."""

    source_key: InstanceKey | None
    """The Source holding the task record; None when no Source of the View stores tasks."""
    id: RecordId | None
    """The task record's id, when the Source said."""
    completion: Literal["planned", "committed", "accepted", "refused", "unknown", "unstored"]
    """How far its creation got: `planned` (a dry run), `committed`, `accepted` (stored,
    durability not confirmed), `refused`, `unknown`, or `unstored` (no Source of the View
    declares the `maintenance-task` kind: the task lives only in this report)."""
    draft: MaintenanceTaskDraft
    """What it asks for."""


class MaintenanceReport(WireModel):
    """What one maintenance run planned and did, entry by entry."""

    view_id: str
    """The View it ran for."""
    scope: Scope
    """Whose memory it maintained."""
    strategy_type_id: Id
    """The Strategy whose policy planned it."""
    trigger: MaintenanceTrigger
    """Why it ran."""
    dry_run: StrictBool
    """Whether this was a dry run (nothing written)."""
    explanation: str
    """The policy's explanation of its plan."""
    plan_digest: str
    """The SHA-256 of the plan's canonical JSON: a real run given it applies exactly that plan."""
    usage: tuple[tuple[InstanceKey, SourceUsage], ...] = ()
    """Each Source's usage when the run began, for those that report it."""
    entries: tuple[MaintenanceEntry, ...] = ()
    """One per archived record, in the plan's order."""
    tasks: tuple[MaintenanceTask, ...] = ()
    """The maintenance tasks created (or, in a dry run, planned)."""
    refusal: MaintenanceRefusal | None = None
    """The policy's refusal, when it refused."""
    record_counts: JsonValue = None
    """Per Source and kind, how many records the policy saw."""

    @property
    def archived(self) -> int:
        """How many records were archived."""
        return sum(entry.outcome == "archived" for entry in self.entries)


TASK_KIND = "maintenance-task"
"""The record kind a Source declares to store maintenance tasks (the core's schema)."""

TASK_RECORD_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "task": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,127}$"},
        "instruction": {"type": "string", "minLength": 1, "maxLength": 2_000},
        "source_key": {"type": "string", "minLength": 1, "maxLength": 400},
        "record_ids": {"type": "array", "items": {"type": "string"}, "maxItems": 64},
        "created_at": {"type": ["string", "null"]},
    },
    "required": ["task", "instruction", "source_key", "record_ids"],
    "additionalProperties": False,
}
"""The JSON Schema of a maintenance-task record (what a Source's `maintenance-task` kind holds)."""
