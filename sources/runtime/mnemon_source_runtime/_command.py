"""`mnemon facts`: change the working memory (user facts, agent notes) from the terminal.

The `mnemon.commands` entry point names this module; the Source's own import never imports it
(nor click, which comes with mnemon's `cli` extra).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from mnemon import MemoryHost
from mnemon.cli import (
    FlagError,
    echo_json,
    identity,
    json_option,
    management_entry,
    mutate,
    printer_of,
    read_text_argument,
    require_confirmation,
    run_with_host,
    scope_of,
)
from mnemon.sdk import Scope

__all__ = ["facts"]

TYPE_ID = "runtime"


async def _change(
    host: MemoryHost, scope: Scope, source: str | None, change: dict[str, Any]
) -> dict[str, Any]:
    entry = management_entry(host, TYPE_ID, source)
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
    require_confirmation(yes, f"{what} this working-memory entry?", as_json=as_json)
    source = options.get("source")
    output = run_with_host(ctx, lambda host: _change(host, scope, source, change))
    if as_json:
        echo_json(output)
        return
    printer_of(ctx).ok(f"{change['operation']}: entry {output.get('id')} (stored)")


def _source_option(command: Any) -> Any:
    return click.option(
        "--source", default=None, help="The runtime Source (default: the first mounted)."
    )(command)


def _text(text: str | None, file: Path | None, yes: bool) -> str:
    body = read_text_argument(text, file)
    if text == "-" and not yes:
        raise FlagError("TEXT from standard input needs --yes (the prompt reads the same input)")
    if text == "-" or file is not None:
        body = body.strip()  # the newline a pipe or an editor ends the text with
    if not body.strip():
        raise FlagError("TEXT: is empty")
    return body


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
