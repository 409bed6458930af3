"""The board's web application: the pages, their assets, and the guard in front of them."""

from __future__ import annotations

from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ._control import Board
from ._security import Guard, create_token
from .pages import pages, routes

__all__ = ["create_app"]


async def _home(request: Request) -> Response:
    return RedirectResponse("/plugins", status_code=303)


def create_app(board: Board, *, token: str, hosts: list[str], port: int) -> ASGIApp:
    """The board for `board`'s profile, answering only `hosts` and only with `token`.

    Args:
        board: the profile and its running host.
        token: the access token every request must carry (its cookie, or `?token=`).
        hosts: the `Host` header values to answer (`127.0.0.1:8766`, ...).
        port: the port served (it names the token's cookie).
    """
    static = resources.files("mnemon_board") / "static"
    app = Starlette(
        routes=[
            Route("/", _home, methods=["GET"]),
            *routes(),
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ]
    )
    app.state.board = board
    app.state.pages = pages()
    app.state.csrf = create_token()
    app.state.notices = {}
    return Guard(app, token=token, csrf=app.state.csrf, hosts=hosts, port=port)
