"""Scaffolds for `mnemon new`, rendered from folders of real template files.

A `TemplateScaffold` is what the `mnemon.scaffolds` entry-point group names: a one-line
`summary`, `render(name)` (the files of a new plugin, by their path in its folder) and the
`next_steps` printed after it. Its templates are ordinary files shipped in a package's
`scaffolds/<kind>/` folder, linted and run by the tests like any other code; `render` replaces
`__NAME__` (the plugin's name), `__TITLE__` (the name as words) and `__MNEMON_RANGE__` (the
mnemon versions compatible with the one installed) in each of them. This package registers
`remote-source`: a remote Source in Python's standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable

import mnemon

__all__ = ["TemplateScaffold", "remote_source_scaffold", "template_words"]

# never part of a template, though an editable install may leave them beside it
_SKIPPED = frozenset({"__pycache__", ".ruff_cache", ".mypy_cache"})


def _mnemon_range() -> str:
    """The mnemon versions a new plugin declares: the installed minor (before 1.0) or major."""
    major, minor = (int(part) for part in mnemon.__version__.split(".")[:2])
    upper = f"{major}.{minor + 1}.0" if major == 0 else f"{major + 1}.0.0"
    return f">={major}.{minor}.0 <{upper}"


def template_words(name: str) -> dict[str, str]:
    """The words a template's files use, for a plugin called `name`."""
    return {
        "__NAME__": name,
        "__TITLE__": name.replace("-", " ").capitalize(),
        "__MNEMON_RANGE__": _mnemon_range(),
    }


def _files(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIPPED:
            continue
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            yield from _files(entry, relative + "/")
        else:
            yield relative, entry


@dataclass(frozen=True)
class TemplateScaffold:
    """A plugin to start from, as `mnemon new <kind> NAME` writes it.

    Attributes:
        summary: one line: what the new plugin is (the command's help).
        package: the package that ships the templates.
        kind: the template folder, `<package>/scaffolds/<kind>/`.
        next_steps: what to run next, one command a line; `{folder}` is the new folder.
        words: the words replaced in every file, for a plugin name.
    """

    summary: str
    package: str
    kind: str
    next_steps: tuple[str, ...] = ()
    words: Callable[[str], Mapping[str, str]] = field(default=template_words)

    def render(self, name: str) -> dict[str, str]:
        """The new plugin's files, by their POSIX path in its folder, with the words replaced."""
        words = sorted(self.words(name).items(), key=lambda item: -len(item[0]))
        folder = resources.files(self.package).joinpath("scaffolds", self.kind)
        rendered = {}
        for relative, entry in _files(folder):
            text = entry.read_text(encoding="utf-8")
            for word, value in words:
                text = text.replace(word, value)
            rendered[relative] = text
        return rendered


#: `mnemon new remote-source NAME`
remote_source_scaffold = TemplateScaffold(
    summary=(
        "A remote Source in Python's standard library (mnemon's remote plugin protocol v0): "
        "items per user, a search route, an add action"
    ),
    package="mnemon_remote",
    kind="remote-source",
    next_steps=(
        "cd {folder}",
        "mnemon plugin dev --fixture fixtures/items.json .",
        "mnemon plugin test .",
    ),
)
