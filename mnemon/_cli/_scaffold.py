"""`mnemon new source|strategy NAME`: a separately installable plugin distribution to start from.

The generated folder holds a `pyproject.toml` (with the `mnemon.plugins` entry point and
pytest set up for async tests), the package with a working definition and its
`mnemon-plugin.toml` manifest, a README, and tests that pass right after generation: one
module driving real compositions through `MemoryCompositionRunner` and, for a Source, a
`SourceConformance` subclass. The templates are real files in `scaffolds/source/` and
`scaffolds/strategy/` beside this module, linted like any other code of the repository.

Other kinds come from installed distributions, through the `mnemon.scaffolds` entry-point
group: an entry named `my-kind` adds `mnemon new my-kind NAME`. An entry names an
object with `summary` (one line, the command's help), `render(name)` (the new plugin's files:
a mapping of relative POSIX paths to their text) and `next_steps` (lines printed after it;
`{folder}` is the new folder). The group is read only when `mnemon new` runs, an entry is
loaded only to list or run its kind, and its shape is checked before anything is written.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import click

__all__ = ["SCAFFOLDS", "new", "render", "scaffold", "template_words"]

#: the entry-point group through which a distribution adds a kind to `mnemon new`
SCAFFOLDS = "mnemon.scaffolds"

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_MAX_NAME = 64
# caches a linter or an editable install may leave beside the templates; never written out
_NOT_TEMPLATES = frozenset({"__pycache__", ".ruff_cache", ".mypy_cache", ".pytest_cache"})


def _core_distribution() -> tuple[str, str, str]:
    """The installed core's distribution name and a compatible version range for it.

    The range is given twice: for pip (`>=0.1,<0.2`) and for the plugin manifest
    (`>=0.1.0 <0.2.0`).
    """
    names = importlib.metadata.packages_distributions().get("mnemon") or ["mnemon-runtime"]
    name = names[0]
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        version = "0.1.0"
    major, minor = (int(part) for part in version.split(".")[:2])
    # before 1.0 a minor release may break plugins; from 1.0 on, a major one
    upper = (major, minor + 1) if major == 0 else (major + 1, 0)
    return (
        name,
        f">={major}.{minor},<{upper[0]}.{upper[1]}",
        f">={major}.{minor}.0 <{upper[0]}.{upper[1]}.0",
    )


def _check_name(name: str, *, importable: bool = True) -> None:
    if len(name) > _MAX_NAME or not _NAME.match(name):
        raise click.BadParameter(
            "lowercase letters, digits and single hyphens, starting with a letter "
            f"(at most {_MAX_NAME} characters), like todo-list",
            param_hint="NAME",
        )
    if not importable:
        return
    package = name.replace("-", "_")
    if importlib.util.find_spec(package) is not None:
        raise click.BadParameter(
            f"a module named {package} is already importable here; choose another name",
            param_hint="NAME",
        )


def scaffold(kind: str, name: str, folder: Path) -> list[Path]:
    """Write a new plugin distribution of `kind` (`source` or `strategy`) into `folder`.

    Returns:
        The files written, in order.

    Raises:
        click.BadParameter: the name is not usable.
        click.ClickException: `folder` exists and is not empty.
    """
    _check_name(name)
    _check_folder(folder)
    return _write(folder, render(kind, template_words(name)))


def template_words(name: str) -> dict[str, str]:
    """The words the templates of `mnemon new source|strategy` use, for a plugin `name`."""
    core, core_range, manifest_range = _core_distribution()
    return {
        "__DIST__": name,
        "__PACKAGE__": name.replace("-", "_"),
        "__TYPE_ID__": name,
        "__TITLE__": name.replace("-", " ").capitalize(),
        "__CLASS__": "".join(part.capitalize() for part in name.split("-")),
        "__CORE__": core,
        "__CORE_RANGE__": core_range,
        "__MANIFEST_RANGE__": manifest_range,
        "__TESTING__": "mnemon-testing",
    }


def render(kind: str, words: Mapping[str, str]) -> dict[str, str]:
    """The files of a new `kind` plugin, by POSIX path, from the template folder of that kind.

    The templates are ordinary files in `scaffolds/<kind>/` beside this module (a `__PACKAGE__`
    folder, `__CLASS__Source` classes); every word of `words` is replaced in paths and text.
    """
    # longer words first: "__CORE__" is a prefix of "__CORE_RANGE__"
    ordered = sorted(words.items(), key=lambda item: -len(item[0]))

    def replaced(text: str) -> str:
        for word, value in ordered:
            text = text.replace(word, value)
        return text

    folder = resources.files(__package__).joinpath("scaffolds", kind)
    return {replaced(relative): replaced(text) for relative, text in _templates(folder)}


def _templates(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, str]]:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name in _NOT_TEMPLATES:
            continue
        if entry.is_dir():
            yield from _templates(entry, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", entry.read_text(encoding="utf-8")


def _check_folder(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise click.ClickException(f"{folder.name} already exists and is not empty")


def _checked_files(kind: str, files: Any) -> dict[str, str]:
    """A scaffold's rendered files, refused whole when one path or text is not usable."""
    if not isinstance(files, Mapping) or not files:
        raise click.ClickException(f"the {kind} scaffold rendered no files")
    checked = {}
    for relative, text in files.items():
        # a plain relative path, written as given: no `..`, `.`, empty part, root or backslash
        if (
            not isinstance(relative, str)
            or "\\" in relative
            or any(part in ("", ".", "..") for part in relative.split("/"))
        ):
            raise click.ClickException(
                f"the {kind} scaffold rendered a path that is not a plain one inside the new "
                "folder; nothing was written"
            )
        if not isinstance(text, str):
            raise click.ClickException(
                f"the {kind} scaffold rendered a file that is not text; nothing was written"
            )
        checked[relative] = text
    return checked


def _write(folder: Path, files: Mapping[str, str]) -> list[Path]:
    written = []
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {point.name: point for point in importlib.metadata.entry_points(group=SCAFFOLDS)}


def _loaded(kind: str, point: importlib.metadata.EntryPoint) -> Any:
    """The scaffold an entry point names, its shape checked (`summary`, `render`, `next_steps`).

    Raises:
        click.ClickException: it cannot be imported, or lacks one of the three.
    """
    try:
        value = point.load()
    except Exception:  # a broken distribution must not break `mnemon new`
        raise click.ClickException(
            f"the {kind} scaffold ({point.value}) cannot be loaded; reinstall its distribution"
        ) from None
    missing = [
        name
        for name, fits in (
            ("summary", isinstance(getattr(value, "summary", None), str)),
            ("render", callable(getattr(value, "render", None))),
            (
                "next_steps",
                isinstance(getattr(value, "next_steps", None), (list, tuple))
                and all(isinstance(line, str) for line in value.next_steps),
            ),
        )
        if not fits
    ]
    if missing:
        raise click.ClickException(
            f"the {kind} scaffold ({point.value}) has no usable {', '.join(missing)}; "
            "it needs summary (a line), render(name) and next_steps (lines)"
        )
    return value


def _scaffold_command(kind: str, point: importlib.metadata.EntryPoint) -> click.Command:
    try:
        summary = _loaded(kind, point).summary
    except click.ClickException as broken:
        summary = broken.message  # listed, and its command says why it cannot run

    def create(name: str, directory: Path | None, as_json: bool) -> None:
        scaffold = _loaded(kind, point)
        _check_name(name, importable=False)
        folder = directory if directory is not None else Path(name)
        _check_folder(folder)
        written = _write(folder, _checked_files(kind, scaffold.render(name)))
        files = [path.relative_to(folder).as_posix() for path in written]
        if as_json:
            click.echo(json.dumps({"kind": kind, "name": name, "files": files}, indent=2))
            return
        click.echo(f"created {kind} plugin {name} in {folder.name}/ ({len(written)} files)")
        click.echo("next:")
        for line in scaffold.next_steps:
            click.echo(f"  {line.replace('{folder}', folder.name)}")

    decorated = _JSON(_DIRECTORY(click.argument("name")(create)))
    return click.command(kind, help=summary, short_help=summary.split(":")[0])(decorated)


class _Kinds(click.Group):
    """`mnemon new`: its own kinds, then those installed distributions add (`mnemon.scaffolds`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        own = super().list_commands(ctx)
        return own + sorted(name for name in _entry_points() if name not in own)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own  # a distribution cannot replace `source` or `strategy`
        point = _entry_points().get(cmd_name)
        return None if point is None else _scaffold_command(cmd_name, point)


@click.group(cls=_Kinds)
def new() -> None:
    """Start a plugin: a distribution with its definition, manifest and passing tests.

    Besides source and strategy, the kinds installed distributions add (mnemon.scaffolds).
    """


def _create(kind: str, name: str, directory: Path | None, as_json: bool) -> None:
    folder = directory if directory is not None else Path(name)
    written = scaffold(kind, name, folder)
    if as_json:
        files = [path.relative_to(folder).as_posix() for path in written]
        report = {"kind": kind, "name": name, "package": name.replace("-", "_"), "files": files}
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"created {kind} plugin {name} in {folder.name}/ ({len(written)} files)")
    click.echo("next:")
    click.echo(f"  cd {folder.name}")
    click.echo("  pip install -e '.[test]'")
    click.echo("  pytest")


_JSON = click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
_DIRECTORY = click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to create the distribution (default: ./NAME; must be new or empty).",
)


@new.command()
@click.argument("name")
@_DIRECTORY
@_JSON
def source(name: str, directory: Path | None, as_json: bool) -> None:
    """Create a Source plugin NAME: items per user, a search route, an add action."""
    _create("source", name, directory, as_json)


@new.command()
@click.argument("name")
@_DIRECTORY
@_JSON
def strategy(name: str, directory: Path | None, as_json: bool) -> None:
    """Create a Strategy plugin NAME: every available Source, the budget split evenly."""
    _create("strategy", name, directory, as_json)
