"""The commands of `mnemon`, built with click; each runs one async job with anyio."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from .._errors import MnemonError
from .._host import MemoryTurn
from .._models import ActionOffer, Evidence, MutationReceipt, Scope, View, ViewRoute
from .._profile import PROFILE_FILE, load_profile
from ._render import Printer
from ._starter import STARTER_PROFILE

_T = TypeVar("_T")

IDENTITY = (
    ("user", "user_id", "The user the memory is about."),
    ("agent", "agent_id", "The agent acting."),
    ("session", "session_id", "The conversation or session."),
    ("workspace", "workspace", "The project workspace (documents live here)."),
    ("tenant", "tenant_id", "The tenant, for shared deployments."),
)


def identity(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--user`, `--agent`, `--session`, `--workspace`, `--tenant`: they fill the scope."""
    for flag, _, text in reversed(IDENTITY):
        command = click.option(f"--{flag}", default=None, help=text)(command)
    return command


def scope_of(options: Mapping[str, Any]) -> Scope:
    """The scope the identity flags describe."""
    return Scope.model_validate(
        {field: options[flag] for flag, field, _ in IDENTITY if options.get(flag)}
    )


def run(job: Callable[[], Awaitable[_T]]) -> _T:
    """Run one async job; mnemon's own errors become a one-line message and exit status 1."""
    try:
        return anyio.run(job)
    except MnemonError as exc:
        raise click.ClickException(str(exc)) from None


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
    if path.exists() and not force:
        raise click.ClickException(f"{path} exists; use --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STARTER_PROFILE, encoding="utf-8")
    printer.ok(f"wrote {path}")
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
        click.echo(composed.model_dump_json(indent=2))
        return
    printer.heading(f"View {composed.id[:17]}…")
    click.echo(wake)
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
        click.echo(found.model_dump_json(indent=2))
        return
    ctx.obj["printer"].evidence(found)


# ---------------------------------------------------------------------- remember


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

    def authorize(offer: ActionOffer) -> bool:
        if yes:
            return True
        return click.confirm(f"Write this memory through {offer.id}?", default=False)

    try:
        receipt = run(
            functools.partial(
                _remember, profile_path(ctx), scope_of(options), payload, authorize, idempotency_key
            )
        )
    except click.ClickException as exc:
        if "not currently authorized" in exc.message:
            printer.warn("not written: you did not authorize the write")
            ctx.exit(1)
        raise
    printer.receipt(receipt)


# ---------------------------------------------------------------------- inspect


async def _inspect(path: Path) -> dict[str, Any]:
    async with load_profile(path).open_host() as host:
        report = host.inspect()
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
        click.echo(json.dumps(report, indent=2))
        return
    ctx.obj["printer"].report(report)


# ---------------------------------------------------------------------- demo


@cli.command()
@click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".mnemon-demo"),
    show_default=True,
    help="Where the demo keeps its profile and data (rebuilt on every run).",
)
@click.pass_context
def demo(ctx: click.Context, directory: Path) -> None:
    """Build a demo profile, seed it, and run turns end to end."""
    from ._demo import prepare_demo, run_demo

    profile = prepare_demo(directory.resolve())
    run(functools.partial(run_demo, profile, ctx.obj["printer"]))


__all__ = ["cli"]
