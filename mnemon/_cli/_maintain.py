"""`mnemon maintain`: show how full memory is, propose what to move, move it once confirmed.

Everything comes through contracts: the serving Strategy's maintenance policy plans (a
Strategy without one has no maintenance), Sources report their usage in their facts, and the
host runs the plan through the records contract and the write-scope preflight. A Source may
also keep limits of its own: it offers the management operations `maintenance-plan` (read,
`{}`: `{"usage", "plan", "plan_digest"}`) and `maintenance-apply` (mutate, `{"plan_digest"}`:
`{"results"}`). The plan shown is the plan applied: each real run is given the dry run's
digest and refuses a plan that changed meanwhile.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from .._errors import MaintenanceError, ManagementError
from .._host import MemoryHost
from .._models import ActionOffer, MaintenanceReport, Scope
from ._options import (
    CommandError,
    echo_json,
    identity,
    json_option,
    printer_of,
    profile_path,
    require_confirmation,
    run,
    scope_of,
)
from ._records import missing_scope, mutate
from ._render import Printer
from ._session import open_memory

__all__ = ["APPLY", "PLAN", "maintain", "register"]

PLAN = "maintenance-plan"
APPLY = "maintenance-apply"
# what a Source's step outcome says
_DONE = {"archived": "archived", "forgotten": "forgotten", "gone": "already gone"}

# what each entry's outcome says, never more than happened
_SAID = {
    "planned": "would be archived",
    "archived": "archived",
    "kept": "kept in place",
    "refused": "refused; kept in place",
    "unknown": "unknown: see the Sources",
}


def _confirmed(offer: ActionOffer) -> bool:
    # the person confirmed the plan that names these writes (or passed --yes)
    return True


@dataclass(slots=True)
class _Survey:
    """What maintenance would do: the Strategy's plan and each Source's own."""

    strategy: MaintenanceReport | None = None
    #: (source key, its `maintenance-plan` answer)
    sources: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        strategy = self.strategy is not None and bool(self.strategy.entries or self.strategy.tasks)
        return strategy or any(plan["plan"] for _, plan in self.sources)


def _checked_plan(key: str, output: Any) -> dict[str, Any]:
    ok = (
        isinstance(output, Mapping)
        and isinstance(output.get("usage"), list | tuple)
        and isinstance(output.get("plan"), list | tuple)
        and isinstance(output.get("plan_digest"), str)
        and all(isinstance(step, Mapping) for step in output["plan"])
    )
    if not ok:
        raise CommandError(f"{key} answered {PLAN} in another shape", code="contract")
    return {"usage": list(output["usage"]), "plan": list(output["plan"]),
            "plan_digest": output["plan_digest"]}  # fmt: skip


def _maintainable(host: MemoryHost) -> list[str]:
    return [
        entry.source_key
        for entry in host.management_catalog()
        if {PLAN, APPLY} <= {operation.id for operation in entry.operations}
    ]


async def _survey(path: Path, scope: Scope) -> _Survey:
    survey = _Survey()
    async with open_memory(path) as (_, host):
        policy: MaintenanceError | None = None
        try:
            survey.strategy = await host.maintain(scope=scope, authorize=_confirmed, dry_run=True)
        except MaintenanceError as exc:
            if exc.code != "no-maintenance-policy":
                raise
            policy = exc
        keys = _maintainable(host)
        for key in keys:
            try:
                output = await host.management_client(key, scope).read(PLAN)
            except ManagementError as exc:
                if missing_scope(exc):
                    continue  # this scope has no such memory: nothing to maintain there
                raise
            survey.sources.append((key, _checked_plan(key, output)))
        if policy is not None and not keys:
            raise CommandError(
                f"nothing to maintain: {policy} and no Source offers maintenance of its own",
                code="no-maintenance-policy",
            )
    return survey


async def _apply(path: Path, scope: Scope, survey: _Survey) -> _Survey:
    done = _Survey()
    async with open_memory(path) as (_, host):
        planned = survey.strategy
        if planned is not None and (planned.entries or planned.tasks):
            done.strategy = await host.maintain(
                scope=scope, authorize=_confirmed, expected_plan=planned.plan_digest
            )
        for key, plan in survey.sources:
            if not plan["plan"]:
                continue
            result = await mutate(host, key, scope, APPLY, {"plan_digest": plan["plan_digest"]})
            output = result.output if isinstance(result.output, Mapping) else {}
            results = output.get("results")
            if not isinstance(results, list | tuple):
                raise CommandError(f"{key} answered {APPLY} in another shape", code="contract")
            done.sources.append((key, {"results": [dict(r) for r in results]}))
    return done


def _show(printer: Printer, report: MaintenanceReport) -> None:
    for key, usage in report.usage:
        printer.field(key, f"{usage.used:,} of {usage.limit:,} {usage.unit} ({usage.percent}%)")
    printer.line(report.explanation)
    for entry in report.entries:
        where = f"{entry.source_key} {entry.kind} {entry.record_id} -> {entry.to_source_key}"
        said = _SAID[entry.outcome]
        if entry.outcome == "archived" and not entry.removed:
            said += " (another run had already removed the original)"
        if entry.code is not None:
            said += f" ({entry.code})"
        if entry.outcome == "archived":
            printer.ok(f"{where}: {said}")
        elif entry.outcome == "planned":
            printer.line(f"  {where}: {said}")
        else:
            printer.warn(f"{where}: {said}")
    for task in report.tasks:
        stored = {
            "planned": "would be created",
            "committed": f"created in {task.source_key}",
            "accepted": f"accepted by {task.source_key} (durability not confirmed)",
            "refused": f"refused by {task.source_key}",
            "unknown": f"unknown: see {task.source_key}",
            "unstored": "not stored: no Source of this View keeps maintenance tasks",
        }[task.completion]
        printer.line(f"  task {task.draft.task} for {task.draft.source_key}: {stored}")


def _show_source(printer: Printer, key: str, answer: Mapping[str, Any]) -> None:
    for usage in answer.get("usage", ()):
        rules = []
        if usage.get("limit") is not None:
            rules.append(f"keeps {usage['limit']:,}")
        if usage.get("max_age_days") is not None:
            rules.append(f"up to {usage['max_age_days']:g} days old")
        then = usage.get("then")
        if then == "archive":
            rules.append(f"then archive into {usage.get('archive_to')}")
        elif then:
            rules.append(f"then {then}")
        printer.field(
            f"{key} {usage.get('group')}",
            f"{usage.get('used', 0):,} {usage.get('unit', 'records')} ({', '.join(rules)})",
        )
    for step in answer.get("plan", ()):
        to = f" into {step['to_group']}" if step.get("to_group") else ""
        printer.line(
            f"  {key} {step.get('group')} {step.get('id')}: would {step.get('action')}{to}"
        )
    for result in answer.get("results", ()):
        outcome = result.get("outcome")
        where = f"{key} {result.get('group')} {result.get('id')}"
        code = f" ({result['code']})" if result.get("code") else ""
        if outcome in _DONE:
            printer.ok(f"{where}: {_DONE[outcome]}")
        else:
            printer.warn(f"{where}: {'kept in place' if outcome == 'kept' else 'unknown'}{code}")


def _show_survey(printer: Printer, survey: _Survey) -> None:
    if survey.strategy is not None:
        _show(printer, survey.strategy)
    for key, answer in survey.sources:
        _show_source(printer, key, answer)


def _steps(survey: _Survey) -> int:
    entries = len(survey.strategy.entries) if survey.strategy is not None else 0
    return entries + sum(len(plan["plan"]) for _, plan in survey.sources)


@click.command()
@click.option("--dry-run", is_flag=True, help="Show the plan; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Apply the plan without asking.")
@identity
@json_option
@click.pass_context
def maintain(
    ctx: click.Context, /, dry_run: bool, yes: bool, as_json: bool, **options: Any
) -> None:
    """Show how full this scope's memory is, and make room as the Strategy and Sources plan.

    Lists each Source's use against its cap, the entries the serving Strategy's maintenance
    policy would archive (into the View's writable long-term memory), and the limits Sources
    keep of their own with what is past them; applies that plan after you confirm, and says
    per entry what happened. Nothing of this runs in the background.
    """
    scope = scope_of(options)
    path = profile_path(ctx)
    printer = printer_of(ctx)
    # a refusal (an ambiguous archive, a denied write scope, ...) fails with its code
    planned = run(functools.partial(_survey, path, scope))
    if dry_run or not planned.pending:
        if as_json:
            echo_json({"scope": scope.model_dump(exclude_none=True), **_json(planned, "")})
            return
        _show_survey(printer, planned)
        printer.line("dry run: nothing was changed" if dry_run else "nothing to do")
        return
    if not as_json:
        _show_survey(printer, planned)
    count = _steps(planned)
    require_confirmation(yes, f"Apply {count} change{'' if count == 1 else 's'}?", as_json=as_json)
    done = run(functools.partial(_apply, path, scope, planned))
    if as_json:
        echo_json(
            {
                "scope": scope.model_dump(exclude_none=True),
                **_json(planned, ""),
                **_json(done, "done_"),
            }
        )
    else:
        printer.heading("Done")
        _show_survey(printer, done)
    entries = done.strategy.entries if done.strategy is not None else ()
    results = [r for _, answer in done.sources for r in answer["results"]]
    if any(entry.outcome != "archived" for entry in entries) or any(
        r.get("outcome") not in _DONE for r in results
    ):
        ctx.exit(1)  # the lines above say which entries stayed, and why


def _report_json(report: MaintenanceReport) -> dict[str, Any]:
    value: dict[str, Any] = report.model_dump(mode="json", exclude={"trigger", "view_id"})
    value["usage"] = [{"source": key, **usage} for key, usage in value["usage"]]
    return value


def _json(survey: _Survey, prefix: str) -> dict[str, Any]:
    name = "done" if prefix else "plan"
    return {
        name: None if survey.strategy is None else _report_json(survey.strategy),
        f"{prefix}sources": [{"source": key, **answer} for key, answer in survey.sources],
    }


def register(group: click.Group) -> None:
    """Add `maintain` to `group`."""
    group.add_command(maintain)
