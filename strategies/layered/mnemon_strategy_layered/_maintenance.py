"""The three-tier action workflow: make room in working memory by archiving to long-term memory.

A pure maintenance policy (the host consults it, then executes its plan): when a working
memory write is refused for capacity, or an operator runs maintenance on a nearly full
working memory, the least important and oldest entries are archived into the View's one
writable long-term memory, inside the write scope that memory answered for this View.
Entries marked essential (importance 4 or 5) are never moved by the policy: when only they
are left, it asks the host's agent, through a maintenance task, to merge or shorten them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from mnemon.sdk import (
    MaintenancePlan,
    MaintenanceRequest,
    MaintenanceSource,
    RecordKind,
)

from ._policy import EVIDENCE, WORKING

__all__ = [
    "CAPACITY_CODES",
    "NEARLY_FULL_PERCENT",
    "TARGET_PERCENT",
    "three_tier_action_workflow",
]

# the refusal codes of a working-memory write past its cap
CAPACITY_CODES = frozenset({"runtime-capacity", "capacity"})
# an operator's maintenance archives only from this full, down to TARGET_PERCENT
NEARLY_FULL_PERCENT = 80
TARGET_PERCENT = 60
# essential entries (importance 4 and 5) are left to the model's judgment
ESSENTIAL = 4
DEFAULT_IMPORTANCE = 3
# what one entry costs beyond its text in a working-memory store (id, times, indentation)
ENTRY_OVERHEAD = 160
# beyond the refused write itself, a capacity refusal frees this share of the cap, so the
# next writes fit too instead of each triggering maintenance again
HEADROOM_SHARE = 4
TASK_KIND = "maintenance-task"
TAGS = ("working-memory",)


def _refuse(code: str, message: str) -> MaintenancePlan:
    return MaintenancePlan.model_validate(
        {
            "explanation": f"three-tier: no maintenance ({code})",
            "refusal": {"code": code, "message": message},
        }
    )


def _size(record: Mapping[str, Any]) -> int:
    return len(orjson.dumps(record.get("text", ""))) + ENTRY_OVERHEAD


def _importance(record: Mapping[str, Any]) -> int:
    value = record.get("importance")
    return value if isinstance(value, int) else DEFAULT_IMPORTANCE


def _age(record: Mapping[str, Any]) -> str:
    value = record.get("updated_at") or record.get("created_at")
    return value if isinstance(value, str) else ""


def _archive_kind(source: MaintenanceSource) -> RecordKind | None:
    """The kind a long-term memory takes archived entries as: its first writable one."""
    return next(
        (kind for kind in source.record_kinds if kind.writable and kind.id != TASK_KIND), None
    )


def _movable_kinds(source: MaintenanceSource) -> list[RecordKind]:
    return [
        kind
        for kind in source.record_kinds
        if kind.readable and kind.deletable and kind.id != TASK_KIND
    ]


def _goal(request: MaintenanceRequest, origin: MaintenanceSource) -> int | None:
    """How many bytes to free in `origin`; None when nothing needs to move."""
    trigger = request.trigger
    usage = origin.usage
    if trigger.kind == "refused-write":
        text = (trigger.input or {}).get("text")
        needed = len(orjson.dumps(text)) + ENTRY_OVERHEAD if isinstance(text, str) else 0
        headroom = usage.limit // HEADROOM_SHARE if usage is not None else needed
        return needed + headroom
    if usage is None or usage.percent < NEARLY_FULL_PERCENT:
        return None
    return usage.used - usage.limit * TARGET_PERCENT // 100


def three_tier_action_workflow(request: MaintenanceRequest) -> MaintenancePlan:
    """Plan working-memory maintenance for a layered View (pure).

    - A write refused for capacity (`runtime-capacity`) by a working-context Source, or an
      operator's run on one at least 80% full, is maintained; anything else is refused.
    - The archive is the View's writable long-term memory (`durable-evidence`) that answers
      the write-scope preflight: none is `no-archive-source`, several `ambiguous-archive`,
      an empty write scope `write-scope-denied`.
    - Entries go least important first, then least recently updated, until the refused write
      fits with a quarter of the cap to spare (an operator's run: until 60% full), each
      archived as a memory tagged `working-memory` and its kind, in the first space of the
      write scope. Essential entries (importance 4 and 5) never move: when the others do
      not free enough, a `review` task asks the host's agent to merge or shorten them.
    """
    trigger = request.trigger
    sources = {source.source_key: source for source in request.sources}
    if trigger.kind == "refused-write":
        origin = sources.get(trigger.source_key or "")
        if origin is None or origin.role != WORKING or trigger.code not in CAPACITY_CODES:
            return _refuse(
                "not-capacity",
                "only a working-memory write refused for capacity makes room by archiving",
            )
        origins = [origin]
    else:
        origins = [s for s in request.sources if s.role == WORKING and s.resident]
    archives = [
        source
        for source in request.sources
        if source.role == EVIDENCE and source.writable and source.write_scope is not None
    ]
    if len(archives) > 1:
        keys = ", ".join(source.source_key for source in archives)
        return _refuse(
            "ambiguous-archive",
            f"several writable long-term memories could take the archive ({keys}); "
            "make one writable (write_sources, or the scoped selection)",
        )
    if not archives:
        return _refuse(
            "no-archive-source", "this View has no writable long-term memory to archive into"
        )
    archive = archives[0]
    kind = _archive_kind(archive)
    scope = archive.write_scope
    assert scope is not None
    if kind is None:
        return _refuse("no-archive-source", f"{archive.source_key} takes no records")
    if not scope.groups:
        return _refuse(
            "write-scope-denied",
            f"{archive.source_key} allows this View to write nowhere; nothing is archived",
        )
    moves: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    for origin in origins:
        goal = _goal(request, origin)
        if goal is None:
            continue
        planned, left = _plan_origin(origin, goal, archive.source_key, kind, scope.groups[0])
        moves += planned
        if left > 0:
            tasks += _review(origin)
    if not moves and not tasks:
        used = ", ".join(
            f"{o.source_key} {o.usage.percent}%" for o in origins if o.usage is not None
        )
        return MaintenancePlan(
            explanation=f"three-tier: working memory has room ({used or 'no usage reported'})"
        )
    explanation = (
        f"three-tier: archive {len(moves)} working-memory entr"
        f"{'y' if len(moves) == 1 else 'ies'} into {archive.source_key}"
        + (f", {len(tasks)} task(s) for the agent" if tasks else "")
    )
    return MaintenancePlan.model_validate(
        {"explanation": explanation, "archive": moves, "tasks": tasks}
    )


def _plan_origin(
    origin: MaintenanceSource, goal: int, target: str, kind: RecordKind, group: str
) -> tuple[list[dict[str, Any]], int]:
    """The moves freeing `goal` bytes of `origin`, and how many bytes are still missing."""
    candidates: list[tuple[int, str, str, str, Mapping[str, Any]]] = []
    for movable in _movable_kinds(origin):
        for record in origin.records.get(movable.id, ()):
            if _importance(record) >= ESSENTIAL:
                continue
            identity = str(record.get("id", ""))
            candidates.append((_importance(record), _age(record), identity, movable.id, record))
    candidates.sort(key=lambda item: item[:3])
    moves = []
    left = goal
    for _, _, identity, kind_id, record in candidates:
        if left <= 0:
            break
        copy: dict[str, Any] = {"text": record.get("text", ""), "tags": [*TAGS, kind_id]}
        if kind.group_field is not None:
            copy[kind.group_field] = group
        moves.append(
            {
                "source_key": origin.source_key,
                "kind": kind_id,
                "record_id": identity,
                "to_source_key": target,
                "to_kind": kind.id,
                "record": _fitting(copy, kind),
            }
        )
        left -= _size(record)
    return moves, left


def _fitting(copy: dict[str, Any], kind: RecordKind) -> dict[str, Any]:
    """`copy` with only the fields the archive's kind declares."""
    properties = kind.record_schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return copy
    return {name: value for name, value in copy.items() if name in properties}


def _review(origin: MaintenanceSource) -> list[dict[str, Any]]:
    essential: Sequence[str] = [
        str(record.get("id"))
        for movable in _movable_kinds(origin)
        for record in origin.records.get(movable.id, ())
        if _importance(record) >= ESSENTIAL
    ][:64]
    return [
        {
            "task": "review",
            "instruction": (
                "Working memory is full and what is left is marked essential. Merge entries "
                "that say the same thing and shorten long ones, keeping every fact; write the "
                "result back through the working memory's own action."
            ),
            "source_key": origin.source_key,
            "record_ids": list(essential),
        }
    ]
