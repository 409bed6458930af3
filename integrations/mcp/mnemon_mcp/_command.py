"""`mnemon mcp`: serve a profile's memory to MCP clients, for one identity."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import anyio
import click
from pydantic import ValidationError

from mnemon import MnemonError, Scope, load_profile

from ._http import create_token, serve_http
from ._server import MemoryServer

__all__ = ["command"]

_FLAGS = {
    "user_id": "--user",
    "agent_id": "--agent",
    "session_id": "--session",
    "workspace": "--workspace",
    "tenant_id": "--tenant",
}


# the rule each identity check stands for, in words (never the value)
_RULES = {
    "string_too_short": "must not be empty",
    "string_too_long": "is too long",
    "string_pattern_mismatch": "must not contain control, bidi or invisible characters",
}


def _scope(values: dict[str, str | None]) -> Scope:
    given = {field: value for field, value in values.items() if value is not None}
    try:
        return Scope.model_validate(given)
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = _FLAGS.get(str(error["loc"][0]) if error["loc"] else "", "identity")
        raise click.UsageError(f"{flag}: {_RULES.get(error['type'], 'is not valid')}") from None


async def _serve(
    path: Path, scope: Scope, allow_writes: bool, http: bool, port: int, token: str
) -> None:
    async with (
        load_profile(path).open_host() as host,
        MemoryServer(host, scope, allow_writes=allow_writes) as memory,
    ):
        if not http:
            await memory.run_stdio()
            return

        def ready(url: str) -> None:
            click.echo(f"mnemon mcp: serving {url}", err=True)
            click.echo(f"bearer token: {token}", err=True)
            sys.stderr.flush()

        await serve_http(memory, port=port, token=token, ready=ready)


@click.command("mcp")
@click.option(
    "--profile",
    "-p",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The profile to serve (default: the one `mnemon` was given, or ./mnemon.toml).",
)
@click.option("--user", required=True, help="The user the memory is about (fixed).")
@click.option("--agent", default=None, help="The agent acting.")
@click.option("--session", default=None, help="The conversation or session.")
@click.option("--workspace", default=None, help="The project workspace.")
@click.option("--tenant", default=None, help="The tenant, for shared deployments.")
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Write without asking the user to confirm (by default each write is confirmed).",
)
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1, not stdio.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="The HTTP port (default 8765; 0 picks a free one).",
)
@click.pass_context
def command(
    ctx: click.Context,
    /,
    profile: Path | None,
    allow_writes: bool,
    http: bool,
    port: int | None,
    **identity: Any,
) -> None:
    """Serve memory to an MCP client: the Wake as a resource, routes and actions as tools.

    The identity comes only from these flags; no tool argument can change it.
    """
    if port is not None and not http:
        raise click.UsageError("--port: only with --http")
    scope = _scope({field: identity[flag.lstrip("-")] for field, flag in _FLAGS.items()})
    parent = ctx.obj.get("profile") if isinstance(ctx.obj, dict) else None
    path = profile or parent or Path.cwd() / "mnemon.toml"
    token = create_token()
    job = functools.partial(
        _serve, path, scope, allow_writes, http, 8765 if port is None else port, token
    )
    try:
        anyio.run(job)
    except MnemonError as exc:
        raise click.ClickException(str(exc).replace("\n", " ")) from None
    except KeyboardInterrupt:
        sys.exit(130)


def main() -> None:
    """Run `mnemon-mcp` as its own command (the same as `mnemon mcp`)."""
    command(prog_name="mnemon mcp")
