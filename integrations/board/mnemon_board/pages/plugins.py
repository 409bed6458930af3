"""Plugins: every discovered memory component, switched on and off with what it moves.

Before a switch the page says what else moves (entries requiring what the switched one alone
provides; entries sharing an exclusive capability with it); after it a toast names what moved,
with Undo. A plugin that cannot run says why (its manifest's problem, its import, a
requirement nothing provides).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnemon import MnemonError

from .._catalog import contribution_of, plugin_of, plugins_view
from .._control import Board, ChangeRefused
from .._edits import ProfileDocument
from .._graph import Plan, declared_node, mounted_nodes, plan_switch
from .._i18n import Words
from .._receipts import applied_toast, refused_toast
from .._web import Page, answer_change, form_of, language, notice_of, render

__all__ = ["PAGE", "ROUTES", "switch_plan"]

PAGE = Page("plugins", "/plugins", "plugins")


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    """A switch asked for: the entry (or the plugin a new entry names) and its plan."""

    entry_id: str
    plugin_id: str | None
    """Set when switching on adds a new entry for this plugin."""
    plan: Plan
    problem: str | None = None
    """Why it cannot be planned (the plugin cannot be imported), or None."""
    selected_strategy: bool = False


def _new_entry_id(board: Board, plugin_id: str) -> str:
    taken = {entry.id for entry in board.profile.entries}
    candidate, number = plugin_id, 2
    while candidate in taken:
        candidate, number = f"{plugin_id}-{number}", number + 1
    return candidate


def switch_plan(board: Board, fields: dict[str, list[str]]) -> SwitchPlan:
    """The plan of the switch `fields` ask for (`entry` or `plugin`, and `on`).

    Raises:
        ValueError: the fields name no entry or plugin of this profile.
    """
    on = (fields.get("on") or [""])[-1] == "true"
    entry_id = (fields.get("entry") or [""])[-1]
    plugin_id = (fields.get("plugin") or [""])[-1]
    nodes = mounted_nodes(board.host.installed())
    entry = next((item for item in board.profile.entries if item.id == entry_id), None)
    if entry is None:
        plugin = board.discovery().get(plugin_id) if plugin_id and on else None
        if plugin is None:
            raise ValueError("no such entry or plugin")
        entry_id = _new_entry_id(board, plugin.id)
    else:
        plugin_id, plugin = "", plugin_of(board, entry)
    if not on:
        selected = _is_selected_strategy(board, entry_id)
        return SwitchPlan(entry_id, None, plan_switch(entry_id, False, nodes), None, selected)
    try:
        loaded: Any = board.load_plugin(entry) if entry is not None else plugin.load()
    except MnemonError as exc:
        return SwitchPlan(entry_id, plugin_id or None, Plan(), " ".join(str(exc).split()))
    contribution = contribution_of(plugin, entry)
    installs = contribution.installs if contribution is not None else ()
    node = declared_node(entry_id, loaded, installs)
    return SwitchPlan(entry_id, plugin_id or None, plan_switch(entry_id, True, nodes, node))


def _is_selected_strategy(board: Board, entry_id: str) -> bool:
    serving = board.host.inspect().get("serving") or {}
    strategy = serving.get("strategy") or {}
    key = str(strategy.get("key") or "")
    return key == f"strategy:{entry_id}" or key.startswith(f"strategy:{entry_id}/")


def move_lines(words: Words, plan: Plan) -> tuple[str, ...]:
    """One line per move: `auto-capture: off (it requires source.durable-evidence ...)`."""
    lines = []
    for move in plan.moves:
        state = words["on"] if move.on else words["off"]
        why = ""
        if move.why == "requires":
            why = f" ({words.format('why-requires', capability=move.capability or '')})"
        elif move.why == "conflicts":
            why = f" ({words.format('why-conflicts', capability=move.capability or '')})"
        lines.append(f"{move.entry_id}: {state}{why}")
    return tuple(lines)


async def page(request: Request) -> Response:
    """The Plugins page."""
    board: Board = request.app.state.board
    if request.query_params.get("rescan"):
        board.rescan()
    await board.refresh()
    words = language(request)
    plugins, others = plugins_view(board, words)
    return render(
        request, "plugins.html", plugins=plugins, others=others, notice=notice_of(request)
    )


async def preview(request: Request) -> Response:
    """What a switch would move, as a fragment the page shows before it is confirmed."""
    board: Board = request.app.state.board
    words = language(request)
    try:
        planned = switch_plan(board, await form_of(request))
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    blocked = planned.plan.blocked
    fragment = render(
        request,
        "_preview.html",
        lines=move_lines(words, planned.plan),
        blocked=words.format("blocked", capability=blocked[0]) if blocked else None,
        refusal=planned.problem,
        selected_strategy=planned.selected_strategy,
    )
    return JSONResponse(
        {
            "html": bytes(fragment.body).decode("utf-8"),
            "ok": blocked is None and not planned.problem,
        }
    )


async def switch(request: Request) -> Response:
    """Switch an entry on or off, with everything its plan moves, as one change."""
    board: Board = request.app.state.board
    words = language(request)
    try:
        planned = switch_plan(board, await form_of(request))
    except ValueError as exc:
        return answer_change(request, refused_toast(words, str(exc)), PAGE.path, 400)
    if planned.problem or planned.plan.blocked:
        blocked = planned.plan.blocked
        why = planned.problem or words.format("blocked", capability=blocked[0] if blocked else "")
        return answer_change(request, refused_toast(words, why), PAGE.path, 409)

    def edit(document: ProfileDocument) -> None:
        for move in planned.plan.moves:
            if planned.plugin_id is not None and move.entry_id == planned.entry_id:
                document.add_entry(move.entry_id, planned.plugin_id)
            else:
                document.set_enabled(move.entry_id, move.on)

    try:
        applied = await board.apply(edit, move_lines(words, planned.plan))
    except ChangeRefused as exc:
        return answer_change(request, refused_toast(words, str(exc)), PAGE.path, 409)
    return answer_change(request, applied_toast(words, applied), PAGE.path)


async def undo(request: Request) -> Response:
    """Undo a change by the token its toast carried."""
    board: Board = request.app.state.board
    words = language(request)
    fields = await form_of(request)
    back = (fields.get("back") or [PAGE.path])[-1]
    back = back if back.startswith("/") and not back.startswith("//") else PAGE.path
    try:
        applied = await board.undo((fields.get("token") or [""])[-1])
    except ChangeRefused as exc:
        return answer_change(request, refused_toast(words, str(exc)), back, 409)
    return answer_change(request, applied_toast(words, applied, "undone"), back)


ROUTES = [
    Route("/plugins", page, methods=["GET"]),
    Route("/plugins/preview", preview, methods=["POST"]),
    Route("/plugins/switch", switch, methods=["POST"]),
    Route("/undo", undo, methods=["POST"]),
]
