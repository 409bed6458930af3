"""`mnemon maintain`: show how full memory is, propose what to move, move it once confirmed.

Everything comes through contracts: the serving Strategy's maintenance policy plans (a
Strategy without one has no maintenance), Sources report their usage in their facts, and the
host runs the plan through the records contract and the write-scope preflight. The plan shown
is the plan applied: the real run is given the dry run's digest and refuses a plan that
changed meanwhile.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from .._models import ActionOffer, MaintenanceReport, Scope
from ._options import (
    echo_json,
    identity,
    json_option,
    printer_of,
    profile_path,
    require_confirmation,
    run,
    scope_of,
)
from ._render import Printer
from ._session import open_memory

__all__ = ["maintain", "register"]

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


async def _plan(path: Path, scope: Scope, expected: str | None) -> MaintenanceReport:
    async with open_memory(path) as (_, host):
        return await host.maintain(
            scope=scope,
            authorize=_confirmed,
            dry_run=expected is None,
            expected_plan=expected,
        )


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


@click.command()
@click.option("--dry-run", is_flag=True, help="Show the plan; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Apply the plan without asking.")
@identity
@json_option
@click.pass_context
def maintain(
    ctx: click.Context, /, dry_run: bool, yes: bool, as_json: bool, **options: Any
) -> None:
    """Show how full this scope's memory is, and make room as the Strategy plans.

    Lists each Source's use against its cap and the entries the serving Strategy would
    archive (with the layered Strategy: the least important, oldest working-memory entries,
    into the writable long-term memory); applies that plan after you confirm, and says per
    entry what happened.
    """
    scope = scope_of(options)
    path = profile_path(ctx)
    printer = printer_of(ctx)
    # a refusal (no policy, an ambiguous archive, a denied write scope, ...) fails with its code
    planned = run(functools.partial(_plan, path, scope, None))
    pending = bool(planned.entries or planned.tasks)
    if dry_run or not pending:
        if as_json:
            echo_json({"scope": scope.model_dump(exclude_none=True), "plan": _json(planned)})
            return
        _show(printer, planned)
        printer.line("dry run: nothing was changed" if dry_run else "nothing to do")
        return
    if not as_json:
        _show(printer, planned)
    count = len(planned.entries)
    require_confirmation(
        yes, f"Archive {count} entr{'y' if count == 1 else 'ies'}?", as_json=as_json
    )
    done = run(functools.partial(_plan, path, scope, planned.plan_digest))
    if as_json:
        echo_json(
            {
                "scope": scope.model_dump(exclude_none=True),
                "plan": _json(planned),
                "done": _json(done),
            }
        )
    else:
        printer.heading("Done")
        _show(printer, done)
    if any(entry.outcome != "archived" for entry in done.entries):
        ctx.exit(1)  # the lines above say which entries stayed, and why


def _json(report: MaintenanceReport) -> dict[str, Any]:
    value: dict[str, Any] = report.model_dump(mode="json", exclude={"trigger", "view_id"})
    value["usage"] = [{"source": key, **usage} for key, usage in value["usage"]]
    return value


def register(group: click.Group) -> None:
    """Add `maintain` to `group`."""
    group.add_command(maintain)
