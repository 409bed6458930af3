"""`mnemon docs`: add, import, list and show the workspace's Markdown documents.

The `mnemon.commands` entry point names this module; the Source's own import never imports it
(nor click, which comes with mnemon's `cli` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mnemon import ManagementClient, MemoryHost
from mnemon.cli import (
    FlagError,
    echo_json,
    identity,
    json_option,
    management_entry,
    mutate,
    printer_of,
    progress,
    require_confirmation,
    run_with_host,
    scope_of,
    shown_path,
)
from mnemon.sdk import Scope

__all__ = ["docs", "markdown_title"]

TYPE_ID = "documents"
_PAGE = 1_000


def markdown_title(body: str, fallback: str) -> str:
    """The first `# heading` of a Markdown body, else `fallback` (a file's stem)."""
    for line in body.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()
    return fallback


async def _records(
    client: ManagementClient, key: str, *, bodies: bool = False
) -> list[dict[str, Any]]:
    """The documents of this scope's workspace (with their bodies), as `docs` shows them."""
    records: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = await client.read("list", {"offset": offset, "limit": _PAGE})
        listed = page.get("documents", [])
        for document in listed:
            record = {
                "kind": "document",
                "source": key,
                "type": TYPE_ID,
                "id": document["document"],
                "title": document["title"],
                "revision": document.get("revision"),
            }
            if bodies:
                read = await client.read("read", {"document": document["document"]})
                record["body"] = read.get("body", "")
            records.append(record)
        offset += len(listed)
        if not listed or offset >= int(page.get("total", 0)):
            return records


async def _add(
    host: MemoryHost, scope: Scope, source: str | None, files: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    entry = management_entry(host, TYPE_ID, source)
    client = host.management_client(entry.source_key, scope)
    existing = {
        (record["title"], record["body"])
        for record in await _records(client, entry.source_key, bodies=True)
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
    require_confirmation(yes, "Add this document?", as_json=as_json)
    outcomes = run_with_host(ctx, lambda host: _add(host, scope, source, [document]))
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
    require_confirmation(yes, f"Add {len(files)} document(s)?", as_json=as_json)
    outcomes = run_with_host(ctx, lambda host: _add(host, scope, source, files))
    _print_docs(ctx, outcomes, as_json)


async def _read(host: MemoryHost, scope: Scope, source: str | None, document: str | None) -> Any:
    entry = management_entry(host, TYPE_ID, source)
    client = host.management_client(entry.source_key, scope)
    if document is None:
        return await _records(client, entry.source_key)
    return await client.read("read", {"document": document})


@docs.command("list")
@click.option("--source", default=None, help="The documents Source (default: the first).")
@identity
@json_option
@click.pass_context
def docs_list(ctx: click.Context, /, source: str | None, as_json: bool, **options: Any) -> None:
    """List the documents of the workspace (--workspace)."""
    scope = scope_of(options)
    found = run_with_host(ctx, lambda host: _read(host, scope, source, None))
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
    scope = scope_of(options)
    found = run_with_host(ctx, lambda host: _read(host, scope, source, document))
    if as_json:
        echo_json(found)
        return
    printer = printer_of(ctx)
    printer.heading(str(found.get("title", document)))
    printer.line(str(found.get("body", "")))
