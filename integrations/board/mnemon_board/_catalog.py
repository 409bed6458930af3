"""What the pages show of plugins and entries, read from declarations and the running host.

A plugin is known by its discovered manifest (label, description, version, origin, status,
what each entry installs and its `config_schema`) and its `locale/*.json`; an entry by the
profile, and, once mounted, by the host's activation graph. No plugin code is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemon import ProfileEntry

from ._control import Board
from ._forms import masked
from ._graph import Node, mounted_nodes, plan_switch
from ._i18n import Words

__all__ = [
    "EntryView",
    "PluginView",
    "contribution_of",
    "entries_view",
    "labels_of",
    "plugin_of",
    "plugins_view",
]

# what the discovery statuses mean on the page when a plugin cannot be switched on
_CANNOT = ("broken", "shadowed", "unsupported")


@dataclass(frozen=True, slots=True)
class EntryView:
    """One profile entry: whether it is on in the file and mounted in the host."""

    id: str
    enabled: bool
    mounted: bool
    plugin_id: str | None
    use: str | None
    kinds: tuple[str, ...]
    """What it installs, as its manifest entry declares (`source`, `strategy`, ...)."""
    provides: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    required_by: tuple[str, ...] = ()
    """Entries that would be switched off with it (they require what only it provides)."""
    schema: Mapping[str, Any] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    """Its configuration as the file says it, secrets masked."""
    title: str = ""


@dataclass(frozen=True, slots=True)
class PluginView:
    """One discovered plugin: its declaration in the page's language, and its entries."""

    id: str
    title: str
    description: str
    version: str | None
    origin: str
    status: str
    problem: str | None
    kinds: tuple[str, ...]
    entries: tuple[EntryView, ...]
    switchable: bool
    """Whether it can be switched on (a valid mnemon plugin whose entries the host mounts)."""
    hosted: bool
    """A contribution of another format, used by name in another plugin's entry."""


def labels_of(plugin: Any, words: Words) -> tuple[str, str]:
    """A discovered plugin's title and description in the page's language, or its manifest's."""
    manifest = plugin.manifest
    title = manifest.display_name if manifest is not None else plugin.id
    description = manifest.description if manifest is not None else ""
    if manifest is not None:
        found = plugin.labels(words.language)
        if found is not None:
            title, description = found.title, found.description or description
    return title, description


def plugin_of(board: Board, entry: ProfileEntry) -> Any:
    """The discovered plugin an entry names (by id, or by its import path), or None."""
    discovery = board.discovery()
    if entry.plugin is not None:
        return discovery.get(entry.plugin)
    for plugin in discovery:
        if plugin.status == "shadowed" or plugin.manifest is None:
            continue
        if any(item.plugin == entry.use for item in plugin.manifest.entries):
            return plugin
    return None


def contribution_of(plugin: Any, entry: ProfileEntry | None) -> Any:
    """The manifest entry (`ContributedEntry`) a profile entry mounts, or None."""
    if plugin is None or plugin.manifest is None:
        return None
    entries = plugin.manifest.entries
    if entry is not None and entry.plugin is None:
        return next((item for item in entries if item.plugin == entry.use), None)
    return entries[0] if len(entries) == 1 else None


def _nodes(board: Board) -> dict[str, Node]:
    return mounted_nodes(board.host.installed())


def entries_view(board: Board, words: Words) -> list[EntryView]:
    """Every entry of the profile, in file order."""
    nodes = _nodes(board)
    mounted = board.mounted()
    views = []
    for entry in board.profile.entries:
        plugin = plugin_of(board, entry)
        contribution = contribution_of(plugin, entry)
        node = nodes.get(entry.id)
        required_by: tuple[str, ...] = ()
        if node is not None:
            plan = plan_switch(entry.id, False, nodes)
            required_by = tuple(move.entry_id for move in plan.moves[1:])
        title = labels_of(plugin, words)[0] if plugin is not None else entry.id
        views.append(
            EntryView(
                id=entry.id,
                enabled=entry.enabled,
                mounted=entry.id in mounted,
                plugin_id=plugin.id if plugin is not None else entry.plugin,
                use=entry.use or None,
                kinds=tuple(contribution.installs) if contribution is not None else (),
                provides=tuple(sorted(node.provides)) if node is not None else (),
                requires=tuple(sorted(node.requires)) if node is not None else (),
                required_by=required_by,
                schema=contribution.config_schema if contribution is not None else None,
                config=masked(dict(entry.config)),
                title=title,
            )
        )
    return views


def plugins_view(board: Board, words: Words) -> tuple[list[PluginView], list[EntryView]]:
    """Every discovered plugin with its entries, and the entries no discovered plugin owns."""
    entries = entries_view(board, words)
    owned: set[str] = set()
    views = []
    by_entry = {entry.id: entry for entry in board.profile.entries}
    for plugin in board.discovery():
        mine = tuple(
            view
            for view in entries
            if plugin.status != "shadowed"
            and (found := plugin_of(board, by_entry[view.id])) is not None
            and found.id == plugin.id
            and found.location == plugin.location
        )
        owned.update(view.id for view in mine)
        title, description = labels_of(plugin, words)
        manifest = plugin.manifest
        hosted = manifest is not None and manifest.format != "mnemon"
        problem = None
        if plugin.problem or plugin.status in _CANNOT:
            problem = f"{plugin.problem or plugin.status}: {plugin.detail or ''}".rstrip(": ")
        kinds = tuple(
            sorted(
                {kind for item in (manifest.entries if manifest else ()) for kind in item.installs}
            )
        )
        views.append(
            PluginView(
                id=plugin.id,
                title=title,
                description=description,
                version=plugin.version,
                origin=plugin.origin,
                status=plugin.status,
                problem=problem,
                kinds=kinds,
                entries=mine,
                switchable=(
                    not hosted
                    and plugin.status not in _CANNOT
                    and plugin.problem is None
                    and manifest is not None
                    and len(manifest.entries) == 1
                ),
                hosted=hosted,
            )
        )
    return views, [view for view in entries if view.id not in owned]
