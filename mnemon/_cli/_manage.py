"""Memory management from the terminal: list, forget, and any Source's route or action.

Everything here is a person's operation on the management plane (confirmed, fenced by the
Source's current revision) or on the operator's View; none of it is what the model sees.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from .._errors import ActionError, ManagementError, MnemonError
from .._host import ManagementClient, MemoryHost
from .._models import ActionOffer, ManagementEntry, MutationReceipt, RecordKind, Scope
from ._options import (
    CommandError,
    FlagError,
    confirm,
    echo_json,
    error_code,
    identity,
    json_input,
    json_option,
    not_confirmed,
    printer_of,
    profile_path,
    require_confirmation,
    run,
    scope_of,
    user_message,
)
from ._records import (
    missing_scope,
    mutate,
    record_groups,
    record_kinds,
    record_pages,
    unreadable_kinds,
)
from ._session import missing_flags, open_memory, operator_turn

__all__ = ["act", "forget", "list_memory", "route"]


def _reason(exc: MnemonError, entry: ManagementEntry, scope: Scope) -> str:
    if isinstance(exc, ManagementError) and missing_scope(exc):
        flags = missing_flags(entry.partition_keys, scope)
        add = f" (add {' and '.join(flags)})" if flags else ""
        return f"missing-scope: the scope lacks an id this Source partitions by{add}"
    return f"{error_code(exc)}: {user_message(exc)}"


# ---------------------------------------------------------------------- list


async def _records_of(
    client: ManagementClient,
    key: str,
    kind: RecordKind,
    space: str | None,
    limit: int | None,
) -> tuple[list[dict[str, Any]], bool]:
    """The records of one kind, at most `limit` (of each group); whether any were left out.

    One more than `limit` is read to know whether there are more.

    Raises:
        CommandError: `space` is not one of the kind's groups in this scope.
    """
    groups: list[str | None] = [None]
    if kind.group_field is not None and (space is not None or limit is not None):
        names = await record_groups(client, kind)
        if space is not None and space not in names:
            raise CommandError(
                f"--space: no {kind.group_field} {space!r} in {key} for this scope "
                f"({kind.group_field}s: {', '.join(names) or 'none'})",
                code="unknown-space",
            )
        groups = [space] if space is not None else list(names)
    records: list[dict[str, Any]] = []
    more = False
    for group in groups:
        read: list[dict[str, Any]] = []
        wanted = None if limit is None else limit + 1
        async for page in record_pages(client, kind, group=group, limit=wanted):
            read += page
        if limit is not None and len(read) > limit:
            more = True
            read = read[:limit]
        records += read
    return records, more


async def _list(
    path: Path,
    scope: Scope,
    source: str | None,
    space: str | None,
    kinds: set[str] | None,
    limit: int | None,
) -> tuple[dict[str, Any], list[tuple[str, str, str, str]]]:
    """The report `--json` prints, and a line per record: kind, group, id and label."""
    async with open_memory(path) as (_, host):
        items: list[dict[str, Any]] = []
        shown: list[tuple[str, str, str, str]] = []
        skipped: list[dict[str, str]] = []
        more = False
        pairs = record_kinds(host, "readable", source=source)
        unlisted = unreadable_kinds(host, source=source, kinds=kinds)
        if kinds is not None:
            unknown = sorted(kinds - {kind.id for _, kind in pairs})
            if unknown:
                declared = sorted({kind.id for _, kind in pairs})
                # a kind declared but not readable is named as such, not as unknown
                held = [u for u in unlisted if u["kind"] == unknown[0]]
                why = "".join(f"; {u['source_key']}: {u['reason']}" for u in held)
                raise CommandError(
                    f"--kind: no mounted Source lists records of kind {unknown[0]!r} "
                    f"(kinds: {', '.join(declared) or 'none'}){why}",
                    code="unknown-kind",
                )
        failed: set[str] = set()
        for entry, kind in pairs:
            if kinds is not None and kind.id not in kinds:
                continue
            if entry.source_key in failed or (space is not None and kind.group_field is None):
                continue
            client = host.management_client(entry.source_key, scope)
            try:
                records, cut = await _records_of(client, entry.source_key, kind, space, limit)
            except ManagementError as exc:
                failed.add(entry.source_key)  # one reason per Source, not one per kind
                reason = _reason(exc, entry, scope)
                skipped.append({"source_key": entry.source_key, "reason": reason})
                continue
            base = {"kind": kind.id, "source": entry.source_key, "type": entry.type_id}
            items += [{**base, **record} for record in records]
            shown += [_shown(kind, record) for record in records]
            more = more or cut
        report = {
            "scope": scope.model_dump(exclude_none=True),
            "items": items,
            "more": more,
            "skipped": skipped,
            "unlisted": unlisted,
        }
        return report, shown


def _shown(kind: RecordKind, record: dict[str, Any]) -> tuple[str, str, str, str]:
    group = "" if kind.group_field is None else record.get(kind.group_field)
    label = "" if kind.label_field is None else record.get(kind.label_field)
    return kind.id, str(group or ""), str(record["id"]), str(label or "")


@click.command("list")
@click.option("--source", default=None, help="Only this Source (its key, e.g. source:spaces).")
@click.option("--space", default=None, help="Only the records of this group (a space).")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    help="Only these kinds of record (repeatable), e.g. memory, fact, note, document.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, None),
    default=None,
    help="At most this many of each kind (of each group of a grouped kind: the newest "
    "memories of each space), in the order the Source lists them.",
)
@identity
@json_option
@click.pass_context
def list_memory(
    ctx: click.Context,
    /,
    source: str | None,
    space: str | None,
    kinds: tuple[str, ...],
    limit: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """List the records (memories, facts, notes, documents, ...) the scope's flags see."""
    report, shown = run(
        functools.partial(
            _list,
            profile_path(ctx),
            scope_of(options),
            source,
            space,
            set(kinds) if kinds else None,
            limit,
        )
    )
    if as_json:
        echo_json(report)
        return
    printer = printer_of(ctx)
    printer.heading(f"{len(report['items'])} item(s)")
    for kind, where, record_id, label in shown:
        printer.line(f"{kind:<9} {where:<10} {record_id}  {label}".replace("\n", " "))
    if report["more"]:
        printer.line(
            f"more not shown: --limit {limit} shows at most {limit} of each kind "
            "(memories: of each space)"
        )
    for skipped in report["skipped"]:
        printer.warn(f"{skipped['source_key']} skipped: {skipped['reason']}")
    for unlisted in report["unlisted"]:
        # not a failure: what the Source declared it cannot do, said so the count is not read
        # as everything there is
        printer.line(f"not listed: {unlisted['source_key']}: {unlisted['reason']}")


# ---------------------------------------------------------------------- forget


async def _forget(
    path: Path,
    scope: Scope,
    record: str,
    space: str | None,
    source: str | None,
    kinds: set[str] | None,
) -> dict[str, Any]:
    async with open_memory(path) as (_, host):
        pairs = [
            (entry, kind)
            for entry, kind in record_kinds(host, "deletable", source=source)
            if kinds is None or kind.id in kinds
        ]
        if not pairs:
            mounted = ", ".join(e.source_key for e in host.management_catalog()) or "none"
            raise CommandError(
                "no mounted Source has records that can be deleted"
                + (" of that kind" if kinds else "")
                + f" (mounted: {mounted})",
                code="unknown-source",
            )
        for entry, kind in pairs:
            if space is not None and kind.group_field is None:
                continue
            payload: dict[str, Any] = {"kind": kind.id, "id": record}
            if space is not None:
                payload["group"] = space
            result = await mutate(host, entry.source_key, scope, "records-delete", payload)
            output = result.output
            if output["deleted"]:
                deleted = {
                    "source_key": entry.source_key,
                    "kind": kind.id,
                    "id": output["id"],
                    "forgotten": True,
                }
                if kind.group_field is not None and output.get("group") is not None:
                    deleted[kind.group_field] = output["group"]
                return deleted
        # the id is opaque: whether it is gone or lives in a narrower scope cannot be told
        # (nor should it: another scope's data is not this scope's to probe), so say both
        narrower = missing_flags(["workspace", "agent_id", "session_id", "tenant_id"], scope)
        elsewhere = ""
        if narrower:
            named = narrower[0] if len(narrower) == 1 else ", ".join(narrower[:-1])
            named += f" or {narrower[-1]}" if len(narrower) > 1 else ""
            elsewhere = f"; one written with {named} is seen only when that flag is given"
        raise CommandError(
            f"no record with that id in what this scope sees in "
            f"{', '.join(sorted({entry.source_key for entry, _ in pairs}))}: it is already "
            f"gone, or it was written in another scope{elsewhere} (ids are shown by "
            "`mnemon list` and `mnemon recall`)",
            code="not-found",
        )


@click.command()
@click.argument("record_id", metavar="ID")
@click.option("--space", default=None, help="The record's group (space), found if not given.")
@click.option("--source", default=None, help="Only this Source (default: every Source).")
@click.option(
    "--kind", "kinds", multiple=True, help="Only records of this kind (repeatable), e.g. memory."
)
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def forget(
    ctx: click.Context,
    /,
    record_id: str,
    space: str | None,
    source: str | None,
    kinds: tuple[str, ...],
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Delete the record ID (a long-term memory, as `mnemon list` or `mnemon recall` shows it).

    Every Source whose records can be deleted is asked, in order, until one deletes it.
    """
    scope = scope_of(options)
    require_confirmation(yes, "Delete this memory?", as_json=as_json)
    output = run(
        functools.partial(
            _forget,
            profile_path(ctx),
            scope,
            record_id,
            space,
            source,
            set(kinds) if kinds else None,
        )
    )
    if as_json:
        echo_json(output)
        return
    where = next(
        (f" in {field} {value}" for field, value in output.items()
         if field not in ("source_key", "kind", "id", "forgotten")),
        "",
    )  # fmt: skip
    printer_of(ctx).ok(f"forgotten: {output['kind']} {output['id']}{where}")


# ---------------------------------------------------------------------- route and act


def _qualified(identifier: str) -> str:
    return identifier if identifier.startswith("source:") else f"source:{identifier}"


async def _route(path: Path, scope: Scope, route_id: str, payload: dict[str, Any]) -> Any:
    async with open_memory(path, operator=True) as (_, host), operator_turn(host, scope) as turn:
        wanted = _qualified(route_id)
        if turn.view.route(wanted) is None:
            raise _unknown("route", wanted, [r.id for r in turn.view.routes], host)
        return await turn.execute_route(wanted, payload)


def _unknown(kind: str, wanted: str, offered: list[str], host: MemoryHost) -> CommandError:
    del host
    return CommandError(
        f"no {kind} {wanted} in the operator's View for this scope "
        f"({kind}s: {', '.join(offered) or 'none'}; see `mnemon inspect` for why)",
        code=f"unknown-{kind}",
    )


@click.command()
@click.argument("route_id", metavar="ID")
@click.argument("payload", metavar="JSON", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the JSON input from this file (default: JSON, else {}).",
)
@identity
@json_option
@click.pass_context
def route(
    ctx: click.Context,
    /,
    route_id: str,
    payload: str | None,
    file: Path | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Read through any Source's route ID (e.g. source:todo/lookup) with the JSON input."""
    value = json_input(payload, file)
    found = run(functools.partial(_route, profile_path(ctx), scope_of(options), route_id, value))
    if as_json:
        echo_json(found.model_dump_json(indent=2))
        return
    printer_of(ctx).evidence(found)


async def _act(
    path: Path,
    scope: Scope,
    offer_id: str,
    payload: dict[str, Any],
    key: str | None,
    authorize: Any,
) -> MutationReceipt:
    async with open_memory(path, operator=True) as (_, host), operator_turn(host, scope) as turn:
        wanted = _qualified(offer_id)
        if all(offer.id != wanted for offer in turn.view.offers):
            raise _unknown("action", wanted, [o.id for o in turn.view.offers], host)
        try:
            return await turn.execute_action(wanted, payload, authorize, idempotency_key=key)
        except ActionError as exc:
            if exc.code == "not-authorized":  # the person answered no to the prompt
                raise not_confirmed() from None
            detail = {}
            if isinstance(exc.receipt, MutationReceipt):
                # how far the write got, said by its receipt: refused, or unknown
                detail["receipt"] = exc.receipt.model_dump(mode="json")
            raise CommandError(
                f"{exc.code}: {user_message(exc)}", code=exc.code, detail=detail
            ) from None


@click.command()
@click.argument("offer_id", metavar="ID")
@click.argument("payload", metavar="JSON", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the JSON input from this file (default: JSON, else {}).",
)
@click.option("--key", "idempotency_key", default=None, help="An idempotency key.")
@click.option("--yes", "-y", is_flag=True, help="Authorize the write without asking.")
@identity
@json_option
@click.pass_context
def act(
    ctx: click.Context,
    /,
    offer_id: str,
    payload: str | None,
    file: Path | None,
    idempotency_key: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Write through any Source's action ID (e.g. source:todo/add) with the JSON input."""
    value = json_input(payload, file)
    if payload == "-" and not yes:
        raise FlagError("JSON from standard input needs --yes (the prompt reads the same input)")

    def authorize(offer: ActionOffer) -> bool:
        return yes or confirm(f"Write through {offer.id}?", err=as_json)

    receipt = run(
        functools.partial(
            _act, profile_path(ctx), scope_of(options), offer_id, value, idempotency_key, authorize
        )
    )
    if as_json:
        echo_json(receipt.model_dump_json(indent=2))
        return
    printer_of(ctx).receipt(receipt)


def register(group: click.Group) -> None:
    """Add the management commands to `group`."""
    for command in (list_memory, forget, route, act):
        group.add_command(command)
