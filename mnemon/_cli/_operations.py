"""`mnemon manage`: run any Source's management operation from the terminal.

A Source declares its operations in its manifest (`status`, `enable`, `inspect`, ...): a
`read` runs as asked; a `mutate` is confirmed by the person and fenced by the Source's
revision, as every change the command makes. Inputs are never echoed: they may hold secrets.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from .._errors import ManagementError, RevisionConflict
from .._host import MemoryHost
from .._models import ManagementEntry, ManagementOperation, Scope
from .._schema import input_problems
from ._options import (
    CommandError,
    FlagError,
    confirm,
    echo_json,
    hint,
    identity,
    json_input,
    json_option,
    not_confirmed,
    printer_of,
    profile_path,
    run,
    scope_of,
)
from ._session import missing_flags, open_memory

__all__ = ["manage"]


def _entry_named(host: MemoryHost, name: str) -> ManagementEntry:
    """The manageable Source `name` names: its key, or its profile entry's id.

    Raises:
        CommandError: no such Source, one without management operations, or an entry that
            installs several (the message lists the choices).
    """
    catalog = host.management_catalog()
    key = name if name.startswith("source:") else f"source:{name}"
    found = [e for e in catalog if e.source_key == key or e.source_key.startswith(f"{key}/")]
    exact = [entry for entry in found if entry.source_key == key]
    if len(exact) == 1 or len(found) == 1:
        return (exact or found)[0]
    manageable = ", ".join(entry.source_key for entry in catalog) or "none"
    if found:
        raise CommandError(
            f"{name!r} installs several Sources with management operations; name one: "
            f"{', '.join(entry.source_key for entry in found)}",
            code="ambiguous-source",
        )
    serving = (host.inspect().get("serving") or {}).get("sources", [])
    if any(source["key"] == key for source in serving):
        raise CommandError(
            f"{key} has no management operations (Sources with some: {manageable})",
            code="no-management",
        )
    raise CommandError(
        f"no Source {key} is mounted (Sources with management operations: {manageable})",
        code="unknown-source",
    )


def _operation_named(entry: ManagementEntry, name: str) -> ManagementOperation:
    for operation in entry.operations:
        if operation.id == name:
            return operation
    known = [operation.id for operation in entry.operations]
    close = difflib.get_close_matches(name, known, n=1)
    guess = f"; did you mean {close[0]!r}?" if close else ""
    raise CommandError(
        f"{entry.source_key} has no management operation {name!r} "
        f"(operations: {', '.join(known) or 'none'}){guess}",
        code="unknown-operation",
    )


def _listing(entry: ManagementEntry, revision: str | None) -> dict[str, Any]:
    return {
        "source_key": entry.source_key,
        "type_id": entry.type_id,
        "label": entry.label,
        "description": entry.description,
        "revision": revision,
        "operations": [
            {
                "id": operation.id,
                "kind": operation.kind,
                "description": operation.description,
                "input_schema": operation.input_schema,
            }
            for operation in entry.operations
        ],
    }


async def _revision(host: MemoryHost, entry: ManagementEntry, scope: Scope) -> str | None:
    try:
        return await host.management_client(entry.source_key, scope).revision()
    except ManagementError:
        return None  # a listing still helps when the Source's facts fail


async def _run_operation(
    path: Path,
    scope: Scope,
    name: str,
    operation_id: str | None,
    value: dict[str, Any],
    expected: str | None,
    confirmed: Callable[[str], bool],
) -> dict[str, Any]:
    async with open_memory(path) as (_, host):
        entry = _entry_named(host, name)
        if operation_id is None:
            return _listing(entry, await _revision(host, entry, scope))
        operation = _operation_named(entry, operation_id)
        problems = input_problems(operation.input_schema, value)
        if problems:
            raise CommandError(
                f"{entry.source_key}/{operation.id} input: {'; '.join(problems)}",
                code="invalid-input",
            )
        client = host.management_client(entry.source_key, scope)
        result: dict[str, Any] = {
            "source_key": entry.source_key,
            "operation": operation.id,
            "kind": operation.kind,
        }
        if operation.kind == "read":
            if expected is not None:
                raise FlagError(
                    f"--expected-revision: {operation.id} only reads; a change is what it fences"
                )
            result["output"] = await client.read(operation.id, value)
            result["revision"] = await _revision(host, entry, scope)
            return result
        if not confirmed(f"Run {operation.id} on {entry.source_key}?"):
            raise not_confirmed()
        if expected is None:
            # fenced on what the Source reports now: a change made meanwhile is refused
            expected = await client.revision()
            if expected is None:
                raise _unfenced(entry, operation, scope)
        try:
            done = await client.mutate(
                operation.id, value, confirmed=True, expected_revision=expected
            )
        except RevisionConflict as exc:
            raise CommandError(
                f"nothing was changed: {exc}; read it again with `mnemon manage {name}`",
                code="revision-conflict",
            ) from None
        result["output"] = done.output
        result["revision"] = done.revision
        return result


def _unfenced(entry: ManagementEntry, operation: ManagementOperation, scope: Scope) -> CommandError:
    flags = missing_flags(entry.partition_keys, scope)
    add = f" (add {' and '.join(flags)})" if flags else ""
    return CommandError(
        f"nothing was changed: {entry.source_key} reports no revision in this scope{add}, so "
        f"{operation.id} cannot be fenced",
        code="no-revision",
    )


def _print_listing(ctx: click.Context, listing: Mapping[str, Any]) -> None:
    printer = printer_of(ctx)
    printer.heading(f"{listing['source_key']} ({listing['type_id']}): {listing['label']}")
    printer.line(listing["description"])
    printer.field("revision", listing["revision"] or "none reported in this scope")
    for operation in listing["operations"]:
        properties = operation["input_schema"].get("properties", {})
        needed = set(operation["input_schema"].get("required", ()))
        inputs = ", ".join(f"{key}{'' if key in needed else '?'}" for key in properties)
        printer.field(
            operation["id"],
            f"{operation['kind']}: {operation['description']}"
            + (f" (input: {inputs})" if inputs else ""),
        )
    name = listing["source_key"].removeprefix("source:")
    printer.line(f"run one: {hint(ctx, f'manage {name} OPERATION [JSON]')}")


def _print_result(ctx: click.Context, result: Mapping[str, Any]) -> None:
    printer = printer_of(ctx)
    if result["kind"] == "mutate":
        # the Source ran the change and answered; its output says what it did
        printer.ok(f"{result['operation']}: done by {result['source_key']}")
    else:
        printer.heading(f"{result['source_key']} {result['operation']}")
    if result.get("revision"):
        printer.field("revision", result["revision"])
    if result.get("output") is not None:
        echo_json(result["output"])


@click.command("manage")
@click.argument("entry")
@click.argument("operation", required=False)
@click.argument("payload", metavar="[JSON]", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the JSON input from this file (default: JSON, else {}).",
)
@click.option(
    "--expected-revision",
    "expected",
    default=None,
    help="Change only if the Source is still at this revision (as `mnemon manage ENTRY` "
    "shows it); default: the revision it reports when the change starts.",
)
@click.option("--yes", "-y", is_flag=True, help="Run a change without asking.")
@identity
@json_option
@click.pass_context
def manage(
    ctx: click.Context,
    /,
    entry: str,
    operation: str | None,
    payload: str | None,
    file: Path | None,
    expected: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Run the management OPERATION of the Source ENTRY (its id or key) with the JSON input.

    Without OPERATION, list the Source's operations and its revision. A read runs as asked;
    a change asks first (unless --yes) and is refused if the Source changed meanwhile.
    """
    if operation is None and (payload is not None or file is not None):
        raise FlagError("JSON: name the OPERATION it is for")
    value = json_input(payload, file)
    if payload == "-" and not yes:
        raise FlagError("JSON from standard input needs --yes (the prompt reads the same input)")

    def confirmed(question: str) -> bool:
        return yes or confirm(question, err=as_json)

    result = run(
        functools.partial(
            _run_operation,
            profile_path(ctx),
            scope_of(options),
            entry,
            operation,
            value,
            expected,
            confirmed,
        )
    )
    if as_json:
        echo_json(result)
    elif operation is None:
        _print_listing(ctx, result)
    else:
        _print_result(ctx, result)
