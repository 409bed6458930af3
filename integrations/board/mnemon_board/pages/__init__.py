"""The board's pages, one module per group: each gives its `PAGE` (navigation) and `ROUTES`.

A page group is added by writing its module and listing it in `GROUPS`: the layout, the
toasts and the management plane's client (`mnemon_board._management`) are shared.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from .._web import Page
from . import options, plugins, sources, status, strategy

__all__ = ["GROUPS", "pages", "routes"]

GROUPS = (plugins, strategy, options, status, sources)


def pages() -> tuple[Page, ...]:
    """The pages of the navigation, in order."""
    return tuple(group.PAGE for group in GROUPS)


def routes() -> list[BaseRoute]:
    """Every page's routes."""
    return [route for group in GROUPS for route in group.ROUTES]
