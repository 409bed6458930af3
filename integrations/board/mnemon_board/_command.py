"""`mnemon board`: serve the memory composition board for a profile, on loopback by default."""

from __future__ import annotations

import functools
import ipaddress
import socket
import sys
from pathlib import Path

import anyio
import click
import uvicorn

from mnemon import MnemonError
from mnemon.cli import CommandError, FlagError, echo_json, json_option, profile_path

from ._app import create_app
from ._control import Board
from ._security import create_token

__all__ = ["DEFAULT_PORT", "command", "main", "serve"]

DEFAULT_PORT = 8766


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _listener(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (port 0: a free one).

    Raises:
        CommandError: the address cannot be bound (in use, or not this machine's).
    """
    address = "127.0.0.1" if host == "localhost" else host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((address, port))
    except OSError as exc:
        listener.close()
        raise CommandError(
            f"--host/--port: cannot listen on {host}:{port} ({exc.strerror or type(exc).__name__})",
            code="address-unavailable",
        ) from None
    # listening before the address is printed: a browser opened at once waits in the backlog
    listener.listen(128)
    return listener


def _names(host: str, port: int) -> list[str]:
    """The `Host` header values the board answers: the address it printed, and loopback's."""
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    names = {f"{shown}:{port}"}
    if _is_loopback(host):
        names |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    return sorted(names)


async def serve(
    path: Path, listener: socket.socket, host: str, token: str, *, as_json: bool = False
) -> None:
    """Open the profile and serve its board on `listener` until cancelled.

    The address with the token is printed on stderr once it listens (with `as_json`, one JSON
    document on stdout: `profile`, `url`, `open` and `problem`).

    Raises:
        MnemonError: the profile cannot be read (a profile that cannot mount is served, with
            why on its pages).
    """
    port = int(listener.getsockname()[1])
    async with Board.open(path) as board:
        app = create_app(board, token=token, hosts=_names(host, port), port=port)
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        shown = _names(host, port)[0] if not _is_loopback(host) else f"127.0.0.1:{port}"
        if as_json:
            echo_json(
                {
                    "profile": board.path.name,
                    "url": f"http://{shown}/",
                    "open": f"http://{shown}/?token={token}",
                    "problem": board.problem,
                }
            )
            sys.stdout.flush()
        else:
            click.echo(f"mnemon board: serving {board.path.name} at http://{shown}/", err=True)
            click.echo(f"open: http://{shown}/?token={token}", err=True)
            if board.problem:
                click.echo(f"note: {board.problem}", err=True)
            sys.stderr.flush()
        await server.serve(sockets=[listener])


@click.command("board")
@click.option(
    "--profile",
    "-p",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The profile to show (default: the one `mnemon` was given, else the nearest mnemon.toml).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="The port to serve (0 picks a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on; only a loopback address unless --allow-remote.",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Listen on a non-loopback --host: the token is then all that guards the board.",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    /,
    profile: Path | None,
    port: int,
    host: str,
    allow_remote: bool,
    as_json: bool,
) -> None:
    """Serve the memory composition board: see, switch and configure the profile's memory.

    It prints an address with a fresh access token; open it in a browser on this machine.
    Changes are saved to mnemon.toml (comments kept) and applied to the running host.
    """
    if not _is_loopback(host) and not allow_remote:
        raise FlagError(
            f"--host: {host} is not a loopback address, so other machines could reach the "
            "board; add --allow-remote to serve it there anyway"
        )
    path = profile if profile is not None else profile_path(ctx)
    listener = _listener(host, port)
    token = create_token()
    try:
        anyio.run(functools.partial(serve, path, listener, host, token, as_json=as_json))
    except MnemonError as exc:
        raise CommandError(" ".join(str(exc).split())) from None
    except KeyboardInterrupt:
        sys.exit(130)
    finally:
        listener.close()


def main() -> None:
    """Run `mnemon-board` as its own command (the same as `mnemon board`)."""
    command(prog_name="mnemon board")
