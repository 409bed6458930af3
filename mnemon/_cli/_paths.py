"""Paths as the `mnemon` command shows them: relative to a known folder, never absolute.

An absolute path can carry a secret (`/srv/tok_.../data`) and ends up in pasted terminal
output and bug reports, so the command only shows the part of a path below the profile's
folder, `$MNEMON_HOME` or the current folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._text import visible_text

__all__ = ["OUTSIDE", "shown_path"]

OUTSIDE = "<outside the profile folder, not shown>"


def _below(path: Path, folder: Path) -> str | None:
    try:
        relative = path.relative_to(folder)
    except ValueError:
        return None
    return relative.as_posix() or "."


def shown_path(
    path: Path, profile_folder: Path | None = None, *, name_if_outside: bool = False
) -> str:
    """`path` relative to the profile's folder, `$MNEMON_HOME` or the current folder.

    Args:
        path: the path to show.
        profile_folder: the folder of the profile in use, when there is one.
        name_if_outside: show a path below none of the folders as `…/<its name>` (for a
            file whose name the user chose, such as the profile).

    Returns:
        `data`, `$MNEMON_HOME/sources/...` or `./.mnemon-demo/mnemon.toml`; a path below none
        of these folders is not shown (`OUTSIDE`, or `…/<name>`).
    """
    path = Path(os.path.abspath(path))
    shown = None
    if profile_folder is not None:
        shown = _below(path, Path(os.path.abspath(profile_folder)))
    if shown is None:
        home = os.environ.get("MNEMON_HOME")
        if home and Path(home).is_absolute():
            below = _below(path, Path(os.path.abspath(home)))
            shown = None if below is None else f"$MNEMON_HOME/{below}".removesuffix("/.")
    cwd = current_folder()
    if shown is None and cwd is not None and cwd != Path(cwd.anchor):  # every path is below /
        below = _below(path, cwd)
        shown = None if below is None else f"./{below}".removesuffix("/.")
    if shown is None:
        shown = f"…/{path.name}" if name_if_outside else OUTSIDE
    return visible_text(shown, keep_newlines=False)


def current_folder() -> Path | None:
    """The current folder, or None when it no longer exists (deleted or moved away)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        return None
