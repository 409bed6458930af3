"""The commands of `mnemon`, built with click; each runs one async job with anyio."""

from __future__ import annotations

import functools
import importlib
import json
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import click
from pydantic import ValidationError

from .._errors import ActionError, MnemonError
from .._host import MemoryTurn
from .._models import (
    ActionOffer,
    Evidence,
    MutationReceipt,
    Scope,
    View,
    ViewRoute,
    describe_validation_error,
)
from .._profile import PROFILE_FILE, load_profile
from .._text import visible_json, visible_text
from ._paths import shown_path
from ._render import Printer
from ._scaffold import new
from ._starter import STARTER_PROFILE

_T = TypeVar("_T")

IDENTITY = (
    ("user", "user_id", "The user the memory is about."),
    ("agent", "agent_id", "The agent acting."),
    ("session", "session_id", "The conversation or session."),
    ("workspace", "workspace", "The project workspace (documents live here)."),
    ("tenant", "tenant_id", "The tenant, for shared deployments."),
)


MAX_IDENTITY = 300
INTERRUPTED = 130  # the shell's status for a command ended by SIGINT (128 + 2)


class FlagError(click.ClickException):
    """A bad flag value: one line naming the flag and the rule, exit status 2 like click's."""

    exit_code = 2


def _check_identity(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # the rules of a scope value, checked here so the message names the flag, never the value
    if value is None:
        return None
    flag = f"--{param.name}"
    if any("\ud800" <= character <= "\udfff" for character in value):
        raise FlagError(f"{flag}: must be valid UTF-8 text")  # undecodable bytes in argv
    if not value:
        raise FlagError(f"{flag}: must not be empty")
    if len(value) > MAX_IDENTITY:
        raise FlagError(f"{flag}: must be at most {MAX_IDENTITY} characters")
    if any(character < " " or character == "\x7f" for character in value):
        raise FlagError(f"{flag}: must not contain control characters (tab, newline, DEL, ...)")
    return value


def identity(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--user`, `--agent`, `--session`, `--workspace`, `--tenant`: they fill the scope."""
    for flag, _, text in reversed(IDENTITY):
        command = click.option(f"--{flag}", default=None, help=text, callback=_check_identity)(
            command
        )
    return command


def scope_of(options: Mapping[str, Any]) -> Scope:
    """The scope the identity flags describe.

    Raises:
        FlagError: a flag breaks a rule of `Scope` the flag checks did not catch.
    """
    fields = {field: options[flag] for flag, field, _ in IDENTITY if options.get(flag) is not None}
    try:
        return Scope.model_validate(fields)
    except ValidationError as exc:
        raise FlagError(describe_validation_error(exc, "identity")) from None


def interrupted(message: str = "interrupted") -> NoReturn:
    """Say on stderr what an interruption (Ctrl-C) left behind; exit with status 130."""
    click.echo(message, err=True)
    sys.exit(INTERRUPTED)


def run(job: Callable[[], Awaitable[_T]]) -> _T:
    """Run one async job; mnemon's own errors become a one-line message and exit status 1."""
    try:
        return anyio.run(job)
    except MnemonError as exc:
        raise click.ClickException(visible_text(str(exc), keep_newlines=False)) from None
    except KeyboardInterrupt:
        interrupted()


def echo_json(document: str) -> None:
    """Print a JSON document with control and bidi characters as JSON escapes."""
    click.echo(visible_json(document))


def profile_path(ctx: click.Context) -> Path:
    path: Path = ctx.obj["profile"]
    return path


@click.group()
@click.option(
    "--profile",
    "-p",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="MNEMON_PROFILE",
    default=None,
    help=f"The profile to use (default: ./{PROFILE_FILE}, or $MNEMON_PROFILE).",
)
@click.option("--no-color", is_flag=True, help="Plain output, without colors.")
@click.pass_context
def cli(ctx: click.Context, profile: Path | None, no_color: bool) -> None:
    """mnemon: composable, bounded, pinned memory Views for LLM agents."""
    ctx.ensure_object(dict)
    ctx.obj["profile"] = profile or Path.cwd() / PROFILE_FILE
    ctx.obj["printer"] = Printer(color=None if not no_color else False)


# ---------------------------------------------------------------------- init


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing profile.")
@click.pass_context
def init(ctx: click.Context, force: bool) -> None:
    """Write a starter profile: runtime, documents and spaces on SQLite, layered."""
    path = profile_path(ctx)
    printer: Printer = ctx.obj["printer"]
    shown = shown_path(path, name_if_outside=True)
    if path.exists() and not force:
        raise click.ClickException(f"{shown} exists; use --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STARTER_PROFILE, encoding="utf-8")
    printer.ok(f"wrote {shown}")
    printer.line("next: mnemon view --user you --workspace project")


# ---------------------------------------------------------------------- view


async def _view(path: Path, scope: Scope, query: str | None) -> tuple[View, str, list[Evidence]]:
    async with load_profile(path).open_host() as host, host.turn(scope=scope) as turn:
        evidence = []
        if query:
            for route in turn.view.routes:
                if "query" in route.input_schema.get("properties", {}):
                    evidence.append(await _read(turn, route, {"query": query}))
        return turn.view, turn.wake(), evidence


async def _read(turn: MemoryTurn, route: ViewRoute, payload: dict[str, Any]) -> Evidence:
    allowed = route.input_schema.get("properties", {})
    return await turn.execute_route(
        route.id, {key: value for key, value in payload.items() if key in allowed}
    )


@cli.command()
@click.argument("query", required=False)
@identity
@click.option("--json", "as_json", is_flag=True, help="Print the View as JSON.")
@click.pass_context
def view(ctx: click.Context, /, query: str | None, as_json: bool, **options: Any) -> None:
    """Compose this turn's View and print its Wake (with QUERY: also run its reads)."""
    printer: Printer = ctx.obj["printer"]
    composed, wake, evidence = run(
        functools.partial(_view, profile_path(ctx), scope_of(options), query)
    )
    if as_json:
        echo_json(composed.model_dump_json(indent=2))
        return
    printer.heading(f"View {composed.id[:17]}…")
    printer.line(wake)
    for item in evidence:
        printer.evidence(item)


# ---------------------------------------------------------------------- recall


def _route_named(view: View, name: str) -> ViewRoute:
    for route in view.routes:
        if route.route_id == name:
            return route
    raise click.ClickException(f"this View offers no {name!r} route (is spaces mounted?)")


def _offer_named(view: View, name: str) -> ActionOffer:
    for offer in view.offers:
        if offer.action_id == name:
            return offer
    raise click.ClickException(f"this View offers no {name!r} action (is spaces mounted?)")


async def _recall(path: Path, scope: Scope, payload: dict[str, Any]) -> Evidence:
    async with load_profile(path).open_host() as host, host.turn(scope=scope) as turn:
        return await _read(turn, _route_named(turn.view, "recall"), payload)


@cli.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 20), default=5, show_default=True)
@click.option("--space", "spaces", multiple=True, help="Only these spaces (repeatable).")
@identity
@click.option("--json", "as_json", is_flag=True, help="Print the evidence as JSON.")
@click.pass_context
def recall(
    ctx: click.Context,
    /,
    query: str,
    limit: int,
    spaces: tuple[str, ...],
    as_json: bool,
    **options: Any,
) -> None:
    """Recall long-term memories matching QUERY."""
    payload: dict[str, Any] = {"query": query, "limit": limit}
    if spaces:
        payload["spaces"] = list(spaces)
    found = run(functools.partial(_recall, profile_path(ctx), scope_of(options), payload))
    if as_json:
        echo_json(found.model_dump_json(indent=2))
        return
    ctx.obj["printer"].evidence(found)


# ---------------------------------------------------------------------- remember


WRITE_INTERRUPTED = "interrupted: the write may or may not have been stored; check with recall"


def _confirm(question: str) -> bool:
    """Ask yes or no on the terminal; no answer (end of input) is no.

    Ctrl-C at the prompt raises KeyboardInterrupt at once: the event loop's own SIGINT handler
    only cancels the running task, which a blocking read never notices.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    if main:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        while True:
            click.echo(f"{question} [y/N]: ", nl=False)
            answer = sys.stdin.readline()
            if not answer:
                click.echo()
                return False
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return True
            if answer in ("", "n", "no"):
                return False
            click.echo("please answer y or n")
    finally:
        if main:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


async def _remember(
    path: Path,
    scope: Scope,
    payload: dict[str, Any],
    authorize: Callable[[ActionOffer], bool],
    idempotency_key: str | None,
) -> MutationReceipt:
    async with load_profile(path).open_host() as host, host.turn(scope=scope) as turn:
        offer = _offer_named(turn.view, "remember")
        allowed = offer.input_schema.get("properties", {})
        return await turn.execute_action(
            offer.id,
            {key: value for key, value in payload.items() if key in allowed},
            authorize,
            idempotency_key=idempotency_key,
        )


@cli.command()
@click.argument("text")
@click.option("--space", default=None, help="The space to write to (default: the first writable).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--entity", "entities", multiple=True, help="An entity (repeatable).")
@click.option("--key", "idempotency_key", default=None, help="An idempotency key.")
@click.option("--yes", "-y", is_flag=True, help="Authorize the write without asking.")
@identity
@click.pass_context
def remember(
    ctx: click.Context,
    /,
    text: str,
    space: str | None,
    tags: tuple[str, ...],
    entities: tuple[str, ...],
    idempotency_key: str | None,
    yes: bool,
    **options: Any,
) -> None:
    """Remember TEXT in long-term memory; you authorize the write explicitly."""
    printer: Printer = ctx.obj["printer"]
    payload: dict[str, Any] = {"text": text}
    if space:
        payload["space"] = space
    if tags:
        payload["tags"] = list(tags)
    if entities:
        payload["entities"] = list(entities)

    scope = scope_of(options)
    writing = False  # true from the moment the write may have started

    def authorize(offer: ActionOffer) -> bool:
        nonlocal writing
        allowed = yes or _confirm(f"Write this memory through {offer.id}?")
        writing = allowed
        return allowed

    try:
        receipt = anyio.run(
            functools.partial(
                _remember, profile_path(ctx), scope, payload, authorize, idempotency_key
            )
        )
    except KeyboardInterrupt:
        interrupted(WRITE_INTERRUPTED if writing else "interrupted: nothing was stored")
    except ActionError as exc:
        if exc.code == "not-authorized":
            printer.warn("not written: you did not authorize the write")
            ctx.exit(1)
        if isinstance(exc.receipt, MutationReceipt):
            printer.receipt(exc.receipt)  # how far it got: failed (refused) or unknown
        else:
            printer.warn("refused: nothing was stored")  # no receipt: nothing was attempted
        raise click.ClickException(
            f"{exc.code}: {visible_text(str(exc), keep_newlines=False)}"
        ) from None
    except MnemonError as exc:
        raise click.ClickException(visible_text(str(exc), keep_newlines=False)) from None
    printer.receipt(receipt)


# ---------------------------------------------------------------------- inspect


async def _inspect(path: Path) -> dict[str, Any]:
    profile = load_profile(path)
    async with profile.open_host() as host:
        report = host.inspect()
        if isinstance(report.get("data_dir"), str):
            report["data_dir"] = shown_path(Path(report["data_dir"]), profile.path.parent)
        report["management"] = [
            {
                "source_key": entry.source_key,
                "label": entry.label,
                "operations": [op.id for op in entry.operations],
            }
            for entry in host.management_catalog()
        ]
        return report


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def inspect(ctx: click.Context, as_json: bool) -> None:
    """Show what serves: the generation, its Sources and Strategy, diagnostics."""
    report = run(functools.partial(_inspect, profile_path(ctx)))
    if as_json:
        echo_json(json.dumps(report, indent=2, ensure_ascii=False))
        return
    ctx.obj["printer"].report(report)


# ---------------------------------------------------------------------- mcp


@cli.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def mcp(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Serve memory to MCP clients (stdio, or --http); needs mnemon-mcp."""
    try:  # a separate distribution: its SDK is too heavy for the core
        server = importlib.import_module("mnemon_mcp")
    except ModuleNotFoundError as exc:
        if exc.name != "mnemon_mcp":
            raise
        raise click.ClickException(
            "mnemon mcp needs the MCP server, which is not installed: pip install mnemon-mcp"
        ) from None
    server.command.main(args=list(args), prog_name="mnemon mcp", obj=ctx.obj)


# ---------------------------------------------------------------------- demo


@cli.command()
@click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".mnemon-demo"),  # the demo's DEFAULT_DIRECTORY (imported only when it runs)
    show_default=True,
    help="Where the demo keeps its profile and data (rebuilt on every run).",
)
@click.option("--force", is_flag=True, help="Use the folder even if the demo did not create it.")
@click.pass_context
def demo(ctx: click.Context, directory: Path, force: bool) -> None:
    """Build a demo profile, seed it, and run turns end to end.

    The demo replaces mnemon.toml and data/ in its folder on every run, so it only uses a
    folder it created itself (or a new or empty one) unless you pass --force.
    """
    from ._demo import prepare_demo, run_demo

    profile = prepare_demo(directory.resolve(), force=force)
    run(functools.partial(run_demo, profile, ctx.obj["printer"]))


cli.add_command(new)  # `mnemon new source|strategy NAME`

__all__ = ["cli"]
