"""Edits of `mnemon.toml` that keep the file as its author wrote it: comments, order, layout.

The board changes only what a switch or a form asks for (an entry's `enabled`, one key of its
`config`, `[strategy] use`, a new `[[entries]]` table); every other byte stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.items import AoT, InlineTable, Item, Table

__all__ = ["EditError", "ProfileDocument"]


class EditError(ValueError):
    """The file cannot take the edit (an entry that is not there, a table that is a value)."""


class ProfileDocument:
    """One parse of a profile's text, edited in place and written back with `text()`.

    Raises:
        EditError: the text is not TOML.
    """

    def __init__(self, text: str) -> None:
        try:
            self._document = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise EditError(f"mnemon.toml is not valid TOML ({exc})") from None

    def text(self) -> str:
        """The edited file."""
        return tomlkit.dumps(self._document)

    def entry_ids(self) -> list[str]:
        """The ids of the file's `[[entries]]`, in order."""
        return [str(table.get("id")) for table in self._entries()]

    def set_enabled(self, entry_id: str, enabled: bool) -> None:
        """Switch an entry on or off (`enabled = true` is written only over an existing key)."""
        table = self._entry(entry_id)
        if enabled and "enabled" not in table:
            return
        _put(table, "enabled", enabled)

    def add_entry(self, entry_id: str, plugin_id: str) -> None:
        """Append `[[entries]]` with this id naming the discovered plugin `plugin_id`.

        Raises:
            EditError: an entry already has the id.
        """
        if entry_id in self.entry_ids():
            raise EditError(f"an entry {entry_id!r} is already in mnemon.toml")
        table = tomlkit.table()
        table["id"] = entry_id
        table["plugin"] = plugin_id
        table.trivia.indent = "\n"  # a blank line before it, as the file's tables have
        entries = self._document.get("entries")
        if entries is None:
            entries = tomlkit.aot()
            self._document.append("entries", entries)
        if not isinstance(entries, AoT):
            raise EditError("mnemon.toml: `entries` is not an array of tables")
        entries.append(table)

    def remove_entry(self, entry_id: str) -> None:
        """Remove an entry's table (only one the board added, for Undo)."""
        entries = self._document.get("entries")
        if not isinstance(entries, AoT):
            raise EditError(f"no entry {entry_id!r} in mnemon.toml")
        for index, table in enumerate(entries):
            if table.get("id") == entry_id:
                del entries[index]
                return
        raise EditError(f"no entry {entry_id!r} in mnemon.toml")

    def set_strategy(self, use: str | None) -> None:
        """Select the Strategy (`[strategy] use`); None removes the key."""
        strategy = self._document.get("strategy")
        if strategy is None:
            if use is None:
                return
            strategy = tomlkit.table()
            self._document.append("strategy", strategy)
        if not isinstance(strategy, Table | InlineTable):
            raise EditError("mnemon.toml: `strategy` is not a table")
        if use is None:
            if "use" in strategy:
                del strategy["use"]
            return
        _put(strategy, "use", use)

    def set_config(self, entry_id: str, values: Mapping[str, Any], removed: set[str]) -> None:
        """Set keys of an entry's `config` and remove others (back to their defaults)."""
        table = self._entry(entry_id)
        config = table.get("config")
        if config is None:
            if not values:
                return
            config = tomlkit.inline_table()
            _put(table, "config", config)
        if not isinstance(config, Table | InlineTable):
            raise EditError(f"mnemon.toml: entry {entry_id!r} config is not a table")
        for key in sorted(removed):
            if key in config:
                del config[key]
        for key, value in values.items():
            _put(config, key, value)

    def _entries(self) -> list[Table]:
        entries = self._document.get("entries")
        if entries is None:
            return []
        if not isinstance(entries, AoT):
            raise EditError("mnemon.toml: `entries` is not an array of tables")
        return list(entries)

    def _entry(self, entry_id: str) -> Table:
        for table in self._entries():
            if table.get("id") == entry_id:
                return table
        raise EditError(f"no entry {entry_id!r} in mnemon.toml")


def _put(table: Table | InlineTable, key: str, value: Any) -> None:
    """Set `key`; a new key goes after the table's last key, before its trailing comments.

    tomlkit appends a new key after everything in the table, which would put it below a
    comment that introduces the next table.
    """
    if key in table or isinstance(table, InlineTable):
        table[key] = value
        return
    body = table.value.body if isinstance(table.value, Container) else []
    trailing: list[Item] = []
    while body and body[-1][0] is None:
        trailing.insert(0, body.pop()[1])
    table[key] = value
    for item in trailing:
        table.value.append(None, item)
