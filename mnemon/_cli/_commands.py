"""The commands of `mnemon`, built with click; each runs one async job with anyio."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import anyio
import click
from click.core import ParameterSource

from .._discovery import Discovery, core_version, discover_plugins
from .._errors import ActionError, MnemonError
from .._host import MemoryHost, MemoryTurn
from .._models import ActionOffer, Evidence, MutationReceipt, Scope, View, ViewRoute
from .._profile import PROFILE_FILE, Profile
from .._text import visible_text
from ._installed import InstalledCommands
from ._maintain import register as register_maintenance
from ._manage import register as register_management
from ._operations import manage
from ._options import (
    CommandError,
    FlagError,
    confirm,
    echo_json,
    error_code,
    hint,
    identity,
    interrupted,
    json_option,
    not_confirmed,
    printer_of,
    profile_path,
    read_text_argument,
    remember_profile_flag,
    run,
    scope_of,
    user_message,
    with_profile_flag,
    working_folder,
)
from ._paths import shown_path
from ._plugins import register as register_plugins
from ._reindex import register as register_reindex
from ._render import Printer, receipt_summary
from ._scaffold import new
from ._session import diagnostic_lines, open_memory, operator_turn, source_partitions
from ._starter import installed_embedder, starter_profile, unusable_starter_plugins
from ._transfer import register as register_transfer


def main(args: list[str] | None = None) -> NoReturn:
    """Run the command line; exit 0, 1 (failed), 2 (usage) or 130 (Ctrl-C).

    Errors are one line on stderr, or one JSON error document on stdout under `--json`.
    """
    argv = list(sys.argv[1:] if args is None else args)
    before_separator = argv[: argv.index("--")] if "--" in argv else argv
    as_json = "--json" in before_separator
    try:
        status = cli.main(args=argv, prog_name="mnemon", standalone_mode=False)
    except click.ClickException as exc:
        _fail(exc, as_json)
    except click.exceptions.Abort:  # Ctrl-C outside a command's own handling
        interrupted()
    sys.exit(status if isinstance(status, int) else 0)


def _fail(exc: click.ClickException, as_json: bool) -> NoReturn:
    message = visible_text(with_profile_flag(exc.format_message()), keep_newlines=False)
    if not as_json:
        if isinstance(exc, click.UsageError):
            exc.show()  # with the usage line and the pointer to --help
        else:
            click.echo(f"Error: {message}", err=True)
        sys.exit(exc.exit_code)
    detail: dict[str, Any] = {}
    if isinstance(exc, CommandError):
        code, detail = exc.code, exc.detail
    elif isinstance(exc, click.UsageError):
        code = "usage"
    else:
        code = "failed"
    error = {"code": code, "message": message, "exit_code": exc.exit_code, **detail}
    echo_json({"error": error})
    sys.exit(exc.exit_code)


def _debug(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        # the DEBUG log of mnemon.*, including a failing Source's traceback, on stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("mnemon")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    return value


@click.group(cls=InstalledCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--profile",
    "-p",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="MNEMON_PROFILE",
    default=None,
    help=(
        f"The profile to use (default: $MNEMON_PROFILE, else the nearest ./{PROFILE_FILE} "
        "in this folder or a parent folder)."
    ),
)
@click.option("--no-color", is_flag=True, help="Plain output, without colors.")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_debug,
    help="Show the DEBUG log of mnemon.* on stderr (with a failing Source's traceback).",
)
@click.version_option(core_version(), "--version", "-V", prog_name="mnemon")
@click.pass_context
def cli(ctx: click.Context, profile: Path | None, no_color: bool) -> None:
    """mnemon: composable, bounded, pinned memory Views for LLM agents.

    Installed distributions may add commands of their own (listed below with theirs).
    """
    working_folder()  # every relative path (the profile, the demo folder, a file) starts there
    state = ctx.ensure_object(dict)
    state["profile"] = profile
    source = ctx.get_parameter_source("profile")
    # kept for the hints the commands print, so a copied hint uses the same profile
    remember_profile_flag(
        str(profile) if profile is not None and source == ParameterSource.COMMANDLINE else None
    )
    state["printer"] = Printer(color=None if not no_color else False)


# ---------------------------------------------------------------------- init


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing profile.")
@click.option(
    "--embedder",
    "embedder_id",
    metavar="ID|none",
    help="The embedder plugin to mount (default: the first installed one that needs no "
    "configuration); none for recall by words only.",
)
@json_option
@click.pass_context
def init(ctx: click.Context, force: bool, embedder_id: str | None, as_json: bool) -> None:
    """Write a starter profile: runtime, documents and spaces on SQLite, layered.

    With an embedder installed (one that needs no configuration), the profile mounts it and
    recall finds memories by meaning as well as words. It is written to -p PROFILE, else to
    ./mnemon.toml (never to a parent folder's).
    """
    path: Path = ctx.obj["profile"] or working_folder() / PROFILE_FILE
    shown = shown_path(path, name_if_outside=True)
    if path.exists() and not force:
        raise CommandError(f"{shown} exists; use --force to overwrite it", code="exists")
    # discovery reads manifests only: no plugin code runs here
    discovery = discover_plugins(project_dir=path.parent)
    _require_starter_plugins(discovery, hint(ctx, "init --force" if force else "init"))
    embedder = None
    if embedder_id != "none":
        embedder = installed_embedder(discovery, embedder_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(starter_profile(embedder=embedder), encoding="utf-8")
    if as_json:
        echo_json({"wrote": shown, "embedder": embedder.plugin_id if embedder else None})
        return
    printer = printer_of(ctx)
    printer.ok(f"wrote {shown}")
    if embedder is not None:
        printer.line(f"recall by meaning and words: the {embedder.plugin_id} embedder is mounted")
    elif embedder_id == "none":
        printer.line("recall by words only, as --embedder none asked")
    else:
        printer.line(
            "recall by words only: no embedder is installed (pip install "
            f"'mnemon-runtime[standard]' adds an offline one, then {hint(ctx, 'init --force')})"
        )
    printer.line(f"next: {hint(ctx, 'view --user you --workspace project')}")


def _require_starter_plugins(discovery: Discovery, again: str) -> None:
    """Refuse, before anything is written, a starter profile whose plugins cannot load here.

    Raises:
        CommandError: naming each plugin and why, and the install that provides them.
    """
    unusable = unusable_starter_plugins(discovery)
    if unusable:
        raise CommandError(
            f"the starter profile's plugins cannot be loaded: {', '.join(unusable)}; nothing "
            "was written. pip install 'mnemon-runtime[standard]' installs them (mnemon plugins "
            f"lists what is found), then {again}",
            code="missing-plugins",
        )


# ---------------------------------------------------------------------- view


async def _view(
    path: Path, scope: Scope, query: str | None
) -> tuple[View, str, list[Evidence], list[str]]:
    async with open_memory(path) as (profile, host), host.turn(scope=scope) as turn:
        evidence = []
        if query:
            for route in turn.view.routes:
                if "query" in route.input_schema.get("properties", {}):
                    evidence.append(await _read(turn, route, {"query": query}))
        # for the person: each diagnostic with the flag to add or the store's folder
        notes = diagnostic_lines(
            turn.view.diagnostics,
            profile=profile,
            types=_source_types(host),
            scope=scope,
            partitions=source_partitions(host),
        )
        return turn.view, turn.wake(), evidence, notes


async def _read(turn: MemoryTurn, route: ViewRoute, payload: dict[str, Any]) -> Evidence:
    allowed = route.input_schema.get("properties", {})
    return await turn.execute_route(
        route.id, {key: value for key, value in payload.items() if key in allowed}
    )


@cli.command()
@click.argument("query", required=False)
@identity
@json_option
@click.pass_context
def view(ctx: click.Context, /, query: str | None, as_json: bool, **options: Any) -> None:
    """Compose this turn's View and print its Wake (with QUERY: also run its reads).

    This is the View the model gets, composed by the profile's Strategy.
    """
    printer = printer_of(ctx)
    composed, wake, evidence, notes = run(
        functools.partial(_view, profile_path(ctx), scope_of(options), query)
    )
    if as_json:
        document = composed.model_dump(mode="json")
        if query:
            document["evidence"] = [item.model_dump(mode="json") for item in evidence]
        echo_json(document)
        return
    printer.heading(f"View {composed.id[:17]}…")
    printer.line(wake)
    for item in evidence:
        printer.evidence(item)
    if notes:
        printer.heading("diagnostics")
    for note in notes:
        printer.warn(note)


# ---------------------------------------------------------------------- recall


def _missing(
    kind: str, name: str, view: View, profile: Profile, host: MemoryHost, source: str | None
) -> CommandError:
    """No route (or offer) `name`: say why, from the View's own diagnostics."""
    types = _source_types(host)
    lines = diagnostic_lines(
        view.diagnostics,
        profile=profile,
        types=types,
        scope=view.request.scope,
        partitions=source_partitions(host),
    )
    wanted = f"{source}/{name}" if source else repr(name)
    if lines:
        why = "; ".join(lines)
    elif source is not None and source not in types:
        why = f"{source} is not mounted (mounted Sources: {', '.join(sorted(types)) or 'none'})"
    else:
        why = f"no mounted Source offers it (mounted Sources: {', '.join(sorted(types)) or 'none'})"
    return CommandError(
        f"no {kind} {wanted} in this View: {why}",
        code=f"no-{kind}",
        detail={"diagnostics": [item.model_dump(mode="json") for item in view.diagnostics]},
    )


def _source_types(host: MemoryHost) -> dict[str, str]:
    serving = host.inspect().get("serving") or {}
    return {item["key"]: item["type_id"] for item in serving.get("sources", [])}


def _declared(profile: Profile, key: str) -> int:
    """Where the entry that installed Source `key` stands in the profile (its order)."""
    for index, entry in enumerate(profile.entries):
        if key == f"source:{entry.id}" or key.startswith(f"source:{entry.id}/"):
            return index
    return len(profile.entries)


def _route_named(
    view: View, name: str, source: str | None, profile: Profile, host: MemoryHost
) -> ViewRoute:
    found = [r for r in view.routes if r.route_id == name and source in (None, r.source_key)]
    if found:
        # several Sources offer it (spaces and a Raven backend): the profile's first entry
        return min(found, key=lambda route: _declared(profile, route.source_key))
    raise _missing("route", name, view, profile, host, source)


def _offer_named(
    view: View, name: str, source: str | None, profile: Profile, host: MemoryHost
) -> ActionOffer:
    found = [o for o in view.offers if o.action_id == name and source in (None, o.source_key)]
    if found:
        return min(found, key=lambda offer: _declared(profile, offer.source_key))
    raise _missing("action", name, view, profile, host, source)


def route_maximum(route: ViewRoute) -> int:
    """The most results a read of `route` may return: its ceiling and its `limit` schema."""
    limit = route.input_schema.get("properties", {}).get("limit", {})
    maximum = limit.get("maximum") if isinstance(limit, dict) else None
    return min(route.max_results, maximum) if isinstance(maximum, int) else route.max_results


async def _recall(
    path: Path, scope: Scope, query: str, limit: int, spaces: list[str], source: str | None
) -> Evidence:
    async with (
        open_memory(path, operator=True) as (profile, host),
        operator_turn(host, scope) as turn,
    ):
        route = _route_named(turn.view, "recall", source, profile, host)
        maximum = route_maximum(route)
        if limit > maximum:
            raise FlagError(f"--limit: at most {maximum} for {route.id} (the route's maximum)")
        # one more than asked, when the route allows it: that one says whether more matched
        ask = min(limit + 1, maximum)
        payload: dict[str, Any] = {"query": query, "limit": ask}
        if spaces:
            payload["spaces"] = spaces
        found = await turn.execute_route(
            route.id,
            {k: v for k, v in payload.items() if k in route.input_schema.get("properties", {})},
            limits={"max_results": ask},
        )
        more = len(found.items) > limit
        return found.model_copy(
            update={"items": found.items[:limit], "truncated": found.truncated or more}
        )


@cli.command()
@click.argument("query")
@click.option(
    "--limit",
    type=click.IntRange(1, None),
    default=5,
    show_default=True,
    help="How many memories at most (up to the route's own maximum).",
)
@click.option("--space", "spaces", multiple=True, help="Only these spaces (repeatable).")
@click.option(
    "--source", default=None, help="The Source to recall from (default: the profile's first)."
)
@identity
@json_option
@click.pass_context
def recall(
    ctx: click.Context,
    /,
    query: str,
    limit: int,
    spaces: tuple[str, ...],
    source: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Recall long-term memories matching QUERY: a person's read, not the model's.

    Not capped by the Strategy's per-turn policy; `truncated` is true when more matched.
    """
    found = run(
        functools.partial(
            _recall, profile_path(ctx), scope_of(options), query, limit, list(spaces), source
        )
    )
    if as_json:
        echo_json(found.model_dump_json(indent=2))
        return
    printer_of(ctx).evidence(found)


# ---------------------------------------------------------------------- remember


WRITE_INTERRUPTED = "interrupted: the write may or may not have been stored; check with recall"


async def _remember(
    path: Path,
    scope: Scope,
    payload: dict[str, Any],
    authorize: Callable[[ActionOffer], bool],
    idempotency_key: str | None,
    source: str | None,
) -> MutationReceipt:
    async with (
        open_memory(path, operator=True) as (profile, host),
        operator_turn(host, scope) as turn,
    ):
        offer = _offer_named(turn.view, "remember", source, profile, host)
        allowed = offer.input_schema.get("properties", {})
        return await turn.execute_action(
            offer.id,
            {key: value for key, value in payload.items() if key in allowed},
            authorize,
            idempotency_key=idempotency_key,
        )


@cli.command()
@click.argument("text", required=False)
@click.option(
    "--file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the text from this file (UTF-8).",
)
@click.option("--space", default=None, help="The space to write to (default: the first writable).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--entity", "entities", multiple=True, help="An entity (repeatable).")
@click.option("--key", "idempotency_key", default=None, help="An idempotency key.")
@click.option(
    "--source", default=None, help="The Source to write to (default: the profile's first)."
)
@click.option("--yes", "-y", is_flag=True, help="Authorize the write without asking.")
@identity
@json_option
@click.pass_context
def remember(
    ctx: click.Context,
    /,
    text: str | None,
    file: Path | None,
    space: str | None,
    tags: tuple[str, ...],
    entities: tuple[str, ...],
    idempotency_key: str | None,
    source: str | None,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Remember TEXT (- reads standard input) in long-term memory; you authorize the write."""
    printer = printer_of(ctx)
    body = read_text_argument(text, file)
    if text == "-" or file is not None:
        body = body.strip()  # the newline a pipe or an editor ends the text with
    if not body.strip():
        raise FlagError("TEXT: is empty")
    payload: dict[str, Any] = {"text": body}
    if space:
        payload["space"] = space
    if tags:
        payload["tags"] = list(tags)
    if entities:
        payload["entities"] = list(entities)
    if text == "-" and not yes:
        raise FlagError("TEXT from standard input needs --yes (the prompt reads the same input)")

    scope = scope_of(options)
    writing = False  # true from the moment the write may have started

    def authorize(offer: ActionOffer) -> bool:
        nonlocal writing
        allowed = yes or confirm(f"Write this memory through {offer.id}?", err=as_json)
        writing = allowed
        return allowed

    try:
        receipt = anyio.run(
            functools.partial(
                _remember, profile_path(ctx), scope, payload, authorize, idempotency_key, source
            )
        )
    except KeyboardInterrupt:
        interrupted(WRITE_INTERRUPTED if writing else "interrupted: nothing was stored")
    except ActionError as exc:
        detail: dict[str, Any] = {}
        if exc.code == "not-authorized":  # the person answered no to the prompt
            raise not_confirmed() from None
        if isinstance(exc.receipt, MutationReceipt):
            detail["receipt"] = exc.receipt.model_dump(mode="json")
            if not as_json:
                printer.receipt(exc.receipt)  # how far it got: failed (refused) or unknown
        elif not as_json:
            printer.warn("refused: nothing was stored")  # no receipt: nothing was attempted
        raise CommandError(
            f"{exc.code}: {user_message(exc)}",
            code=exc.code,
            detail=detail,
        ) from None
    except CommandError:
        raise
    except MnemonError as exc:
        raise CommandError(
            visible_text(str(exc), keep_newlines=False), code=error_code(exc)
        ) from None
    if as_json:
        document = receipt.model_dump(mode="json")
        document["summary"] = receipt_summary(receipt)
        echo_json(document)
        return
    printer.receipt(receipt)


# ---------------------------------------------------------------------- inspect


_HEALTH = {
    "source-degraded": "degraded",
    "source-unavailable": "unavailable",
    "source-facts-timeout": "facts timed out",
    "source-facts-failed": "facts failed",
    "source-facts-invalid": "facts broke the Source contract",
    "source-project-timeout": "projection timed out",
    "source-project-failed": "projection failed",
    "source-project-invalid": "projection broke the Source contract",
    "source-not-selected": "serving, not selected by the Strategy",
}


async def _inspect(path: Path, scope: Scope) -> dict[str, Any]:
    async with open_memory(path, check=False) as (profile, host):
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
        if report.get("state") != "serving":
            return report
        types, partitions = _source_types(host), source_partitions(host)
        # one composition runs every Source's facts() for this scope: that is their health
        async with host.turn(scope=scope) as turn:
            composed = turn.view
        selected = {item.source_key for item in composed.consistency}
        health = []
        for key in sorted(types):
            mine = [d for d in composed.diagnostics if d.key == key]
            state = "ready" if key in selected else "not selected"
            for diagnostic in mine:
                state = _HEALTH.get(diagnostic.code, diagnostic.code)
            health.append(
                {
                    "source_key": key,
                    "health": state,
                    "selected": key in selected,
                    "diagnostics": diagnostic_lines(
                        mine, profile=profile, types=types, scope=scope, partitions=partitions
                    ),
                }
            )
        report["scope"] = scope.model_dump(exclude_none=True)
        report["health"] = health
        report["view_diagnostics"] = [d.model_dump(mode="json") for d in composed.diagnostics]
        return report


@cli.command()
@identity
@json_option
@click.pass_context
def inspect(ctx: click.Context, /, as_json: bool, **options: Any) -> None:
    """Show what serves, and each Source's health for the scope the flags describe."""
    report = run(functools.partial(_inspect, profile_path(ctx), scope_of(options)))
    if as_json:
        echo_json(report)
        return
    printer_of(ctx).report(report)


# ---------------------------------------------------------------------- completion


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@json_option
@click.pass_context
def completion(ctx: click.Context, shell: str, as_json: bool) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    Add to ~/.bashrc: eval "$(mnemon completion bash)"; for zsh the same in ~/.zshrc; for
    fish: mnemon completion fish > ~/.config/fish/completions/mnemon.fish
    """
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    if completer is None:  # pragma: no cover - click ships all three
        raise CommandError(f"no completion for {shell}", code="unsupported")
    script = completer(cli, {}, "mnemon", "_MNEMON_COMPLETE").source()
    if as_json:
        echo_json({"shell": shell, "script": script})
        return
    click.echo(script)


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
@json_option
@click.pass_context
def demo(ctx: click.Context, directory: Path, force: bool, as_json: bool) -> None:
    """Build a demo profile, seed it, and run turns end to end.

    The demo replaces mnemon.toml and data/ in its folder on every run, so it only uses a
    folder it created itself (or a new or empty one) unless you pass --force.
    """
    from ._demo import prepare_demo, run_demo

    _require_starter_plugins(discover_plugins(project_dir=directory.resolve()), "mnemon demo")
    profile = prepare_demo(directory.resolve(), force=force)
    # under --json the narrative goes to stderr and stdout carries only the summary
    printer = Printer(color=False, err=True) if as_json else printer_of(ctx)
    recalled = run(functools.partial(run_demo, profile, printer))
    if as_json:
        echo_json({"profile": shown_path(profile, name_if_outside=True), "recalled": recalled})


register_management(cli)
cli.add_command(manage)  # `mnemon manage ENTRY [OPERATION] [JSON]`
register_transfer(cli)
register_plugins(cli)
register_reindex(cli)
register_maintenance(cli)
cli.add_command(new)  # `mnemon new source|strategy NAME`

__all__ = ["cli", "main"]
