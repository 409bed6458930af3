"""Verbs installed distributions add to `mnemon`, found in the `mnemon.commands` entry points.

An entry point's name is the verb and its value a click command (`mcp = "pkg:command"`). Only
the invoked command's module is imported: `mnemon --help` lists the verbs with their
distribution's summary, read from its metadata, so listing them imports no plugin code.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import click

from ._options import CommandError

__all__ = ["COMMANDS", "InstalledCommands"]

COMMANDS = "mnemon.commands"


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=COMMANDS):
        found.setdefault(point.name, point)  # two distributions naming one verb: the first
    return found


def _distribution(point: importlib.metadata.EntryPoint) -> str:
    return point.dist.name if point.dist is not None else "an installed distribution"


def _summary(point: importlib.metadata.EntryPoint) -> str:
    """The line `mnemon --help` shows for the verb: its distribution's summary (no import)."""
    summaries = point.dist.metadata.get_all("Summary", []) if point.dist is not None else []
    return summaries[0] if summaries else f"added by {_distribution(point)}"


def _broken(point: importlib.metadata.EntryPoint, why: str) -> click.Command:
    """A stand-in for a verb that cannot be loaded: running it fails with one line."""
    message = (
        f"the command {point.name!r} cannot be loaded: entry point {point.name} = "
        f"{point.value} ({_distribution(point)}) {why}; reinstall that distribution"
    )

    def fail(args: tuple[str, ...]) -> None:
        raise CommandError(message, code="broken-command")

    return click.Command(
        point.name,
        callback=fail,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
        help=message,
        add_help_option=False,
    )


def _loaded(point: importlib.metadata.EntryPoint) -> click.Command:
    try:
        value: Any = point.load()
    except Exception as exc:  # a broken distribution must not break the other verbs
        return _broken(point, f"failed to import ({type(exc).__name__})")
    if not isinstance(value, click.Command):
        return _broken(point, "does not name a click command")
    return value


class InstalledCommands(click.Group):
    """A click group whose verbs are its own, then those of the `mnemon.commands` entry points.

    A distribution cannot replace one of the group's own verbs.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The group's own verbs, then the installed ones, each sorted."""
        own = super().list_commands(ctx)
        return own + sorted(name for name in _entry_points() if name not in own)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The verb `cmd_name`: an installed one's module is imported here, and only here."""
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own
        point = _entry_points().get(cmd_name)
        return None if point is None else _loaded(point)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs and their short help, the installed ones without importing them."""
        own = super().list_commands(ctx)
        installed = [(name, point) for name, point in _entry_points().items() if name not in own]
        rows: list[tuple[str, click.Command]] = []
        for name in own:
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command))
        # a stand-in carrying the summary: the verb's own module stays unimported
        rows.extend((name, click.Command(name, help=_summary(point))) for name, point in installed)
        if not rows:
            return
        rows.sort(key=lambda row: row[0])
        width = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, item.get_short_help_str(width)) for name, item in rows])
