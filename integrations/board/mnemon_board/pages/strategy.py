"""Strategy: the main Strategy selector (installed Strategies only) and the View extensions.

A Strategy mounted by an entry is selected by its type id (by its key when two share a type);
one installed but not mounted is switched on and selected in the same change. The View
extensions' switches work as on the Plugins page, and say which are active for the selected
Strategy.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._catalog import plugins_view
from .._control import Board, ChangeRefused
from .._edits import ProfileDocument
from .._i18n import Words
from .._receipts import applied_toast, refused_toast
from .._web import Page, answer_change, form_of, language, notice_of, render

__all__ = ["PAGE", "ROUTES"]

PAGE = Page("strategy", "/strategy", "strategy")


@dataclass(frozen=True, slots=True)
class Choice:
    """One Strategy the selector offers."""

    value: str
    """What the form sends: `entry:<id>` or `plugin:<id>`."""
    title: str
    description: str
    detail: str
    """Its key and type id when mounted, else its plugin id."""
    selected: bool
    mounted: bool


def choices(board: Board, words: Words) -> list[Choice]:
    """The installed Strategies: those mounted, then those of plugins not switched on."""
    report = board.host.inspect()
    serving = (report.get("serving") or {}).get("strategy") or {}
    snapshot = board.host.installed()
    strategies = [item for item in snapshot.contributions if item.kind == "strategy"]
    type_count: dict[str, int] = {}
    for item in strategies:
        type_count[item.type_id] = type_count.get(item.type_id, 0) + 1
    plugins, _ = plugins_view(board, words)
    titles = {
        entry.id: (plugin.title, plugin.description)
        for plugin in plugins
        for entry in plugin.entries
    }
    found = []
    for item in strategies:
        title, description = titles.get(item.entry_id, (item.type_id, ""))
        found.append(
            Choice(
                value=f"entry:{item.entry_id}",
                title=title,
                description=description,
                detail=f"{item.instance_key} ({item.type_id})",
                selected=serving.get("key") == item.instance_key,
                mounted=True,
            )
        )
    mounted_entries = {item.entry_id for item in strategies}
    for plugin in plugins:
        if "strategy" not in plugin.kinds or not plugin.switchable:
            continue
        if any(entry.id in mounted_entries for entry in plugin.entries):
            continue
        found.append(
            Choice(f"plugin:{plugin.id}", plugin.title, plugin.description, plugin.id, False, False)
        )
    return found


async def page(request: Request) -> Response:
    """The Strategy page."""
    board: Board = request.app.state.board
    await board.refresh()
    words = language(request)
    plugins, _ = plugins_view(board, words)
    serving = board.host.inspect().get("serving") or {}
    active = {item["key"] for item in serving.get("extensions", [])}
    extensions = [plugin for plugin in plugins if "strategy-extension" in plugin.kinds]
    return render(
        request,
        "strategy.html",
        choices=choices(board, words),
        extensions=extensions,
        active=active,
        notice=notice_of(request),
    )


async def select(request: Request) -> Response:
    """Select the main Strategy (switching its entry on first when it is not)."""
    board: Board = request.app.state.board
    words = language(request)
    chosen = (await form_of(request)).get("strategy", [""])[-1]
    kind, _, name = chosen.partition(":")
    snapshot = board.host.installed()
    strategies = [item for item in snapshot.contributions if item.kind == "strategy"]
    entries = {entry.id: entry for entry in board.profile.entries}
    if kind == "entry":
        mine = [item for item in strategies if item.entry_id == name]
        if not mine:
            return answer_change(request, refused_toast(words, "no such Strategy"), PAGE.path, 400)
        item = mine[0]
        same_type = [other for other in strategies if other.type_id == item.type_id]
        use = item.type_id if len(same_type) == 1 else item.instance_key
        entry_id, plugin_id = name, None
    elif kind == "plugin" and board.discovery().get(name) is not None:
        existing = next((e for e in board.profile.entries if e.plugin == name), None)
        entry_id = existing.id if existing is not None else name
        while existing is None and entry_id in entries:
            entry_id += "-2"
        plugin_id = None if existing is not None else name
        use = f"strategy:{entry_id}"
    else:
        return answer_change(request, refused_toast(words, "no such Strategy"), PAGE.path, 400)

    def edit(document: ProfileDocument) -> None:
        if plugin_id is not None:
            document.add_entry(entry_id, plugin_id)
        else:
            document.set_enabled(entry_id, True)
        document.set_strategy(use)

    moved: tuple[str, ...] = (f"[strategy] use = {use}",)
    if plugin_id is not None or not entries[entry_id].enabled:
        moved = (f"{entry_id}: {words['on']}", *moved)
    try:
        applied = await board.apply(edit, moved)
    except ChangeRefused as exc:
        return answer_change(request, refused_toast(words, str(exc)), PAGE.path, 409)
    return answer_change(request, applied_toast(words, applied), PAGE.path)


ROUTES = [
    Route("/strategy", page, methods=["GET"]),
    Route("/strategy/select", select, methods=["POST"]),
]
