"""Memory management from the terminal: list, forget, facts, docs, and any Source's route or action.

Everything here is a person's operation on the management plane (confirmed, fenced by the
Source's current revision) or on the operator's View; none of it is what the model sees.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path
from typing import Any

import click

from .._errors import ActionError, ManagementError, MnemonError
from .._host import MemoryHost
from .._models import ActionOffer, ManagementEntry, MutationReceipt, Scope
from .._profile import Profile
from .._text import visible_text
from ._options import (
    CommandError,
    FlagError,
    confirm,
    echo_json,
    error_code,
    identity,
    json_input,
    json_option,
    printer_of,
    profile_path,
    read_text_argument,
    run,
    scope_of,
)
from ._paths import shown_path
from ._progress import progress
from ._records import (
    FIRST_PARTY,
    document_records,
    management_entry,
    memory_pages,
    memory_records,
    missing_scope,
    mutate,
    runtime_records,
)
from ._session import missing_flags, open_memory, operator_turn

__all__ = ["act", "docs", "facts", "forget", "list_memory", "route"]

_KINDS = ("memory", "fact", "note", "document")


def _confirmed(yes: bool, question: str, as_json: bool) -> None:
    if not yes and not confirm(question, err=as_json):
        raise CommandError("nothing was changed: you did not confirm", code="not-confirmed")


def _reason(exc: MnemonError, profile: Profile, entry: ManagementEntry, scope: Scope) -> str:
    if isinstance(exc, ManagementError) and missing_scope(exc):
        flags = missing_flags(profile, entry.source_key, entry.type_id, scope)
        add = f" (add {' and '.join(flags)})" if flags else ""
        return f"missing-scope: the scope lacks an id this Source partitions by{add}"
    return f"{error_code(exc)}: {visible_text(str(exc), keep_newlines=False)}"


# ---------------------------------------------------------------------- list


def _first(
    records: list[dict[str, Any]], kinds: set[str], limit: int | None
) -> tuple[list[dict[str, Any]], bool]:
    """The records of `kinds`, at most `limit` of each kind, in order; whether any were cut."""
    wanted = [record for record in records if record["kind"] in kinds]
    if limit is None:
        return wanted, False
    seen: Counter[str] = Counter()
    kept = []
    for record in wanted:
        seen[record["kind"]] += 1
        if seen[record["kind"]] <= limit:
            kept.append(record)
    return kept, len(kept) < len(wanted)


async def _list(
    path: Path,
    scope: Scope,
    source: str | None,
    space: str | None,
    kinds: set[str],
    limit: int | None,
) -> dict[str, Any]:
    async with open_memory(path) as (profile, host):
        items: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []
        more = False
        for entry in host.management_catalog():
            if entry.type_id not in FIRST_PARTY:
                continue
            if source is not None and entry.source_key not in (source, f"source:{source}"):
                continue
            client = host.management_client(entry.source_key, scope)
            try:
                if entry.type_id == "spaces" and "memory" in kinds:
                    records, cut = await memory_records(
                        client, entry.source_key, space, limit=limit
                    )
                elif entry.type_id == "runtime" and kinds & {"fact", "note"} and space is None:
                    read = await runtime_records(client, entry.source_key)
                    records, cut = _first(read, kinds, limit)
                elif entry.type_id == "documents" and "document" in kinds and space is None:
                    read = await document_records(client, entry.source_key)
                    records, cut = _first(read, kinds, limit)
                else:
                    continue
                items += records
                more = more or cut
            except ManagementError as exc:
                reason = _reason(exc, profile, entry, scope)
                skipped.append({"source_key": entry.source_key, "reason": reason})
            except CommandError as exc:
                if exc.code == "unknown-space":
                    raise
                skipped.append({"source_key": entry.source_key, "reason": exc.format_message()})
        return {
            "scope": scope.model_dump(exclude_none=True),
            "items": items,
            "more": more,
            "skipped": skipped,
        }


@click.command("list")
@click.option("--source", default=None, help="Only this Source (its key, e.g. source:spaces).")
@click.option("--space", default=None, help="Only the memories of this space.")
@click.option(
    "--kind",
    "kinds",
    type=click.Choice(_KINDS),
    multiple=True,
    help="Only these kinds (repeatable): memory, fact, note, document.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, None),
    default=None,
    help="At most this many of each kind: the newest memories of each space, the first "
    "facts, notes and documents.",
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
    """List the memories, facts, notes and documents the scope's flags see."""
    report = run(
        functools.partial(
            _list,
            profile_path(ctx),
            scope_of(options),
            source,
            space,
            set(kinds or _KINDS),
            limit,
        )
    )
    if as_json:
        echo_json(report)
        return
    printer = printer_of(ctx)
    printer.heading(f"{len(report['items'])} item(s)")
    for item in report["items"]:
        where = item.get("space") or item.get("target") or ""
        label = item.get("title") or item.get("text", "")
        printer.line(f"{item['kind']:<9} {where:<10} {item['id']}  {label}".replace("\n", " "))
    if report["more"]:
        printer.line(
            f"more not shown: --limit {limit} shows at most {limit} of each kind "
            "(memories: of each space)"
        )
    for skipped in report["skipped"]:
        printer.warn(f"{skipped['source_key']} skipped: {skipped['reason']}")


# ---------------------------------------------------------------------- forget


def _handle_prefix(memory: str) -> tuple[str, ...]:
    head, separator, _ = memory.rpartition("~")
    return (head,) if separator else ()


async def _forget(
    path: Path, scope: Scope, memory: str, space: str | None, source: str | None
) -> dict[str, Any]:
    async with open_memory(path) as (_, host):
        entry = management_entry(host, "spaces", source)
        client = host.management_client(entry.source_key, scope)
        if space is None:
            # the space is found from the memory itself: the id recall and list print
            # a recall result's id is the memory id, then `~` and what the handle is bound to
            ids = (memory, *_handle_prefix(memory))
            found = None
            # newest first, a page at a time: a recent memory is found without reading the rest
            async for page in memory_pages(client, entry.source_key):
                found = next((record for record in page if record["id"] in ids), None)
                if found is not None:
                    break
            if found is None:
                raise CommandError(
                    f"no memory with that id in the spaces of {entry.source_key} this scope "
                    "sees (ids are shown by `mnemon list` and `mnemon recall`)",
                    code="not-found",
                )
            space = str(found["space"])
        result = await mutate(
            host, entry.source_key, scope, "forget", {"space": space, "id": memory}
        )
        output: dict[str, Any] = dict(result.output) if isinstance(result.output, dict) else {}
        return output


@click.command()
@click.argument("memory_id", metavar="ID")
@click.option("--space", default=None, help="The memory's space (found from the id if not given).")
@click.option("--source", default=None, help="The spaces Source (default: the first mounted).")
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def forget(
    ctx: click.Context,
    /,
    memory_id: str,
    space: str | None,
    source: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Delete the long-term memory ID (as `mnemon list` or `mnemon recall` shows it)."""
    scope = scope_of(options)
    _confirmed(yes, "Delete this memory?", as_json)
    output = run(functools.partial(_forget, profile_path(ctx), scope, memory_id, space, source))
    if as_json:
        echo_json(output)
        return
    if output.get("forgotten"):
        printer_of(ctx).ok(f"forgotten: memory {output.get('id')} in space {output.get('space')}")
    else:
        printer_of(ctx).warn("nothing was deleted: the memory was already gone")


# ---------------------------------------------------------------------- facts


async def _facts_change(
    path: Path, scope: Scope, source: str | None, change: dict[str, Any]
) -> dict[str, Any]:
    async with open_memory(path) as (_, host):
        entry = management_entry(host, "runtime", source)
        result = await mutate(host, entry.source_key, scope, "mutate", change)
        output: dict[str, Any] = dict(result.output) if isinstance(result.output, dict) else {}
        return output


def _target_of(entry_id: str) -> str:
    if re.fullmatch(r"u\d+", entry_id):
        return "user"
    if re.fullmatch(r"m\d+", entry_id):
        return "memory"
    raise FlagError("ID: a fact is u1, u2, ... and a note m1, m2, ... (as `mnemon list` shows)")


def _change_facts(
    ctx: click.Context, change: dict[str, Any], options: dict[str, Any], yes: bool, as_json: bool
) -> None:
    scope = scope_of(options)
    what = {"add": "Add", "replace": "Replace", "remove": "Remove"}[change["operation"]]
    _confirmed(yes, f"{what} this working-memory entry?", as_json)
    output = run(
        functools.partial(_facts_change, profile_path(ctx), scope, options.get("source"), change)
    )
    if as_json:
        echo_json(output)
        return
    printer_of(ctx).ok(f"{change['operation']}: entry {output.get('id')} (stored)")


def _source_option(command: Any) -> Any:
    return click.option(
        "--source", default=None, help="The runtime Source (default: the first mounted)."
    )(command)


@click.group()
def facts() -> None:
    """Change the working memory (runtime): facts about the user, the agent's notes."""


@facts.command("add")
@click.argument("text", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the text from this file (UTF-8).",
)
@click.option("--note", is_flag=True, help="An agent's note (needs --agent), not a user fact.")
@click.option("--importance", type=click.IntRange(1, 5), default=None, help="1 to 5.")
@_source_option
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def facts_add(
    ctx: click.Context,
    /,
    text: str | None,
    file: Path | None,
    note: bool,
    importance: int | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Add a fact about the user (TEXT, or - for standard input)."""
    body = _text(text, file, yes)
    change: dict[str, Any] = {
        "target": "memory" if note else "user",
        "operation": "add",
        "text": body,
    }
    if importance is not None:
        change["importance"] = importance
    _change_facts(ctx, change, options, yes, as_json)


def _text(text: str | None, file: Path | None, yes: bool) -> str:
    body = read_text_argument(text, file)
    if text == "-" and not yes:
        raise FlagError("TEXT from standard input needs --yes (the prompt reads the same input)")
    if text == "-" or file is not None:
        body = body.strip()  # the newline a pipe or an editor ends the text with
    if not body.strip():
        raise FlagError("TEXT: is empty")
    return body


@facts.command("replace")
@click.argument("entry_id", metavar="ID")
@click.argument("text", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the text from this file (UTF-8).",
)
@click.option("--importance", type=click.IntRange(1, 5), default=None, help="1 to 5.")
@_source_option
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def facts_replace(
    ctx: click.Context,
    /,
    entry_id: str,
    text: str | None,
    file: Path | None,
    importance: int | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Replace the fact or note ID (u1, m2, ...) with TEXT."""
    change: dict[str, Any] = {
        "target": _target_of(entry_id),
        "operation": "replace",
        "id": entry_id,
        "text": _text(text, file, yes),
    }
    if importance is not None:
        change["importance"] = importance
    _change_facts(ctx, change, options, yes, as_json)


@facts.command("rm")
@click.argument("entry_id", metavar="ID")
@_source_option
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def facts_rm(
    ctx: click.Context, /, entry_id: str, yes: bool, as_json: bool, **options: Any
) -> None:
    """Remove the fact or note ID (u1, m2, ...)."""
    change = {"target": _target_of(entry_id), "operation": "remove", "id": entry_id}
    _change_facts(ctx, change, options, yes, as_json)


# ---------------------------------------------------------------------- docs


def markdown_title(body: str, fallback: str) -> str:
    """The first `# heading` of a Markdown body, else `fallback` (a file's stem)."""
    for line in body.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()
    return fallback


async def _docs_add(
    path: Path, scope: Scope, source: str | None, files: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    async with open_memory(path) as (_, host):
        entry = management_entry(host, "documents", source)
        client = host.management_client(entry.source_key, scope)
        existing = {
            (record["title"], record["body"])
            for record in await document_records(client, entry.source_key, bodies=True)
        }
        outcomes: list[dict[str, Any]] = []
        with progress("documents", total=len(files)) as advance:
            for title, body in files:
                if (title, body) in existing:
                    # the same title and body are already here: adding it again would duplicate
                    outcomes.append({"title": title, "status": "unchanged"})
                else:
                    result = await mutate(
                        host, entry.source_key, scope, "create", {"title": title, "body": body}
                    )
                    existing.add((title, body))
                    output = result.output if isinstance(result.output, dict) else {}
                    outcomes.append(
                        {"title": title, "status": "created", "document": output.get("document")}
                    )
                advance(1)
        return outcomes


def _read_markdown(file: Path, title: str | None) -> tuple[str, str]:
    name = shown_path(file, name_if_outside=True)
    try:
        body = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FlagError(f"{name}: must be UTF-8 text") from None
    except OSError as exc:
        raise FlagError(f"{name}: cannot be read ({exc.strerror or 'error'})") from None
    return title or markdown_title(body, file.stem), body


def _print_docs(ctx: click.Context, outcomes: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        echo_json({"documents": outcomes})
        return
    printer = printer_of(ctx)
    for outcome in outcomes:
        if outcome["status"] == "created":
            printer.ok(f"created {outcome['document']}: {outcome['title']}")
        else:
            printer.line(f"unchanged (already there): {outcome['title']}")


@click.group()
def docs() -> None:
    """The workspace's Markdown documents (documents): add, list, show, import."""


@docs.command("add")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--title", default=None, help="The title (default: the first # heading).")
@click.option("--source", default=None, help="The documents Source (default: the first).")
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def docs_add(
    ctx: click.Context,
    /,
    file: Path,
    title: str | None,
    source: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Add the Markdown FILE as a document of the workspace (--workspace)."""
    scope = scope_of(options)
    document = _read_markdown(file, title)
    _confirmed(yes, "Add this document?", as_json)
    outcomes = run(functools.partial(_docs_add, profile_path(ctx), scope, source, [document]))
    _print_docs(ctx, outcomes, as_json)


@docs.command("import")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--source", default=None, help="The documents Source (default: the first).")
@click.option("--yes", "-y", is_flag=True, help="Do it without asking.")
@identity
@json_option
@click.pass_context
def docs_import(
    ctx: click.Context,
    /,
    directory: Path,
    source: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Add every *.md file under DIRECTORY; a document already there is left unchanged."""
    scope = scope_of(options)
    files = [_read_markdown(file, None) for file in sorted(directory.rglob("*.md"))]
    _confirmed(yes, f"Add {len(files)} document(s)?", as_json)
    outcomes = run(functools.partial(_docs_add, profile_path(ctx), scope, source, files))
    _print_docs(ctx, outcomes, as_json)


async def _docs_read(path: Path, scope: Scope, source: str | None, document: str | None) -> Any:
    async with open_memory(path) as (_, host):
        entry = management_entry(host, "documents", source)
        client = host.management_client(entry.source_key, scope)
        if document is None:
            return await document_records(client, entry.source_key)
        return await client.read("read", {"document": document})


@docs.command("list")
@click.option("--source", default=None, help="The documents Source (default: the first).")
@identity
@json_option
@click.pass_context
def docs_list(ctx: click.Context, /, source: str | None, as_json: bool, **options: Any) -> None:
    """List the documents of the workspace (--workspace)."""
    found = run(functools.partial(_docs_read, profile_path(ctx), scope_of(options), source, None))
    if as_json:
        echo_json({"documents": found})
        return
    printer = printer_of(ctx)
    printer.heading(f"{len(found)} document(s)")
    for record in found:
        printer.line(f"{record['id']}  {record['title']}")


@docs.command("show")
@click.argument("document")
@click.option("--source", default=None, help="The documents Source (default: the first).")
@identity
@json_option
@click.pass_context
def docs_show(
    ctx: click.Context, /, document: str, source: str | None, as_json: bool, **options: Any
) -> None:
    """Print the document DOCUMENT (its handle, as `docs list` shows it)."""
    found = run(
        functools.partial(_docs_read, profile_path(ctx), scope_of(options), source, document)
    )
    if as_json:
        echo_json(found)
        return
    printer = printer_of(ctx)
    printer.heading(str(found.get("title", document)))
    printer.line(str(found.get("body", "")))


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
            if exc.code == "not-authorized":
                raise CommandError(
                    "not written: you did not authorize the write", code=exc.code
                ) from None
            detail = {}
            if isinstance(exc.receipt, MutationReceipt):
                # how far the write got, said by its receipt: refused, or unknown
                detail["receipt"] = exc.receipt.model_dump(mode="json")
            message = visible_text(str(exc), keep_newlines=False)
            raise CommandError(f"{exc.code}: {message}", code=exc.code, detail=detail) from None


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
    for command in (list_memory, forget, facts, docs, route, act):
        group.add_command(command)
