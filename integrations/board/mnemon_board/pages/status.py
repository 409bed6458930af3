"""Status: one card per Source for the identity picked, the serving generation, diagnostics.

A card's line is the Source's state in a View composed now for that identity: healthy,
degraded or unavailable (with the coded reason the host gave), not selected by the Strategy
(with its reason), or off in the profile. The data is the host's public report
(`MemoryHost.inspect`) and the composed View's consistency and diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mnemon import Diagnostic, MnemonError, Scope, View

from .._catalog import entries_view
from .._control import Board
from .._management import ManagementPlane
from .._scope import SCOPE_FIELDS, scope_of
from .._web import Page, language, render

__all__ = ["PAGE", "ROUTES", "SCOPE_FIELDS", "SourceCard", "scope_of", "source_cards"]

PAGE = Page("status", "/status", "status")
SCENARIO = "board.status"
_UNAVAILABLE = {
    "source-unavailable", "source-facts-timeout", "source-facts-failed", "source-facts-invalid",
    "source-project-timeout", "source-project-failed", "source-project-invalid",
}  # fmt: skip
_REASON = re.compile(r"\(([a-z][a-z0-9-]{0,127})\)$")


@dataclass(frozen=True, slots=True)
class SourceCard:
    """One Source's card: its headline and its one line."""

    key: str
    title: str
    state: str
    """`healthy`, `degraded`, `unavailable`, `not-selected` or `off`."""
    code: str | None = None
    """The diagnostic code behind the state (`source-facts-failed`)."""
    reason: str | None = None
    """The coded reason the Source or the host gave (`missing-scope`, `max-sources`)."""
    role: str | None = None
    management: str | None = None
    """The label of its management plane, when it has one."""


def _card(
    key: str, title: str, role: str | None, view: View | None, management: str | None
) -> SourceCard:
    if view is None:
        return SourceCard(key, title, "unavailable", "composition-failed", None, role, management)
    mine: list[Diagnostic] = [d for d in view.diagnostics if d.key == key]
    for diagnostic in mine:
        found = _REASON.search(diagnostic.message)
        reason = found[1] if found else None
        if diagnostic.code in _UNAVAILABLE:
            return SourceCard(key, title, "unavailable", diagnostic.code, reason, role, management)
        if diagnostic.code == "source-degraded":
            return SourceCard(key, title, "degraded", diagnostic.code, reason, role, management)
        if diagnostic.code == "source-not-selected":
            return SourceCard(key, title, "not-selected", diagnostic.code, reason, role, management)
    if key in {item.source_key for item in view.consistency}:
        return SourceCard(key, title, "healthy", None, None, role, management)
    return SourceCard(key, title, "not-selected", None, None, role, management)


async def source_cards(
    board: Board, scope: Scope | None, words: Any
) -> tuple[list[SourceCard], View | None, str | None, dict[str, Any]]:
    """The cards, the View composed for `scope` (or None, with why) and the host's report.

    With no scope (the identity given is invalid) no View is composed.
    """
    report = board.host.inspect()
    serving = report.get("serving") or {}
    view: View | None = None
    failure: str | None = None
    if serving and scope is not None:
        try:
            async with board.host.turn(scope=scope, scenario=SCENARIO) as turn:
                view = turn.view
        except MnemonError as exc:
            failure = " ".join(str(exc).split())
    entries = entries_view(board, words)
    titles = {entry.id: entry.title for entry in entries}
    catalog = ManagementPlane(board.host).catalog()
    cards = []
    for source in serving.get("sources", []):
        key = str(source["key"])
        title = titles.get(str(source.get("entry_id")), key)
        label = catalog[key].label if key in catalog else None
        cards.append(_card(key, title, source.get("role"), view, label))
    served = {str(source.get("entry_id")) for source in serving.get("sources", [])}
    for entry in entries:
        if "source" in entry.kinds and entry.id not in served:
            key = f"source:{entry.id}"
            if not entry.enabled:
                cards.append(SourceCard(key, entry.title, "off"))
            else:  # on in the file, but the host could not mount it (the page says why)
                cards.append(SourceCard(key, entry.title, "unavailable", "not-mounted"))
    return cards, view, failure, report


async def page(request: Request) -> Response:
    """The Status page."""
    board: Board = request.app.state.board
    await board.refresh()
    words = language(request)
    scope, given, invalid = scope_of(request)
    cards, view, failure, report = await source_cards(board, None if invalid else scope, words)
    failure = invalid or failure
    return render(
        request,
        "status.html",
        cards=cards,
        view=view,
        failure=failure,
        report=report,
        given=given,
        invalid=invalid,
        scope_fields=SCOPE_FIELDS,
        scope_query=urlencode(given),
    )


ROUTES = [Route("/status", page, methods=["GET"])]
