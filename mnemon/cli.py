"""What a distribution needs to add a verb to `mnemon` that works like the core's own.

A verb is a click command registered in the `mnemon.commands` entry-point group (see the
command-line reference). With these helpers it takes the same identity flags and `--json`,
runs its work against the host of the profile in use, asks before it changes anything, and
fails with one line (or a JSON error) and the same exit statuses as every other command::

    @click.command()
    @click.option("--yes", "-y", is_flag=True)
    @identity
    @json_option
    @click.pass_context
    def hello(ctx: click.Context, /, yes: bool, as_json: bool, **options: Any) -> None:
        scope = scope_of(options)
        require_confirmation(yes, "Say hello?", as_json=as_json)
        found = run_with_host(ctx, lambda host: greet(host, scope))
        ...

Importing this module imports click: keep it out of a plugin's own import path (import it
only in the module the entry point names). It needs the `cli` extra.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import click

from ._cli._options import (
    CommandError,
    FlagError,
    echo_json,
    identity,
    json_option,
    printer_of,
    profile_path,
    read_text_argument,
    require_confirmation,
    run,
    scope_of,
)
from ._cli._paths import shown_path
from ._cli._progress import progress
from ._cli._records import management_entry, mutate
from ._cli._render import Printer
from ._cli._session import open_memory
from ._host import MemoryHost

__all__ = [
    "CommandError",
    "FlagError",
    "Printer",
    "echo_json",
    "identity",
    "json_option",
    "management_entry",
    "mutate",
    "printer_of",
    "profile_path",
    "progress",
    "read_text_argument",
    "require_confirmation",
    "run_with_host",
    "scope_of",
    "shown_path",
]

_T = TypeVar("_T")


async def _with_host(path: Path, job: Callable[[MemoryHost], Awaitable[_T]]) -> _T:
    async with open_memory(path) as (_, host):
        return await job(host)


def run_with_host(ctx: click.Context, job: Callable[[MemoryHost], Awaitable[_T]]) -> _T:
    """Run `job(host)` against a host serving the profile this command uses, and return its result.

    The profile is the one `-p`, `$MNEMON_PROFILE` or the nearest `mnemon.toml` names. mnemon's
    own errors (an invalid profile, a refused operation, ...) become a one-line `CommandError`.
    """
    return run(functools.partial(_with_host, profile_path(ctx), job))


for _export in (
    CommandError,
    FlagError,
    Printer,
    echo_json,
    identity,
    json_option,
    management_entry,
    mutate,
    printer_of,
    profile_path,
    progress,
    read_text_argument,
    require_confirmation,
    scope_of,
    shown_path,
):
    _export.__module__ = __name__
del _export
