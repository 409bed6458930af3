"""`mnemon new source|strategy NAME`: a separately installable plugin distribution to start from.

The generated folder holds a `pyproject.toml` (with the `mnemon.plugins` entry point and
pytest set up for async tests), the package with a working definition and its
`mnemon-plugin.toml` manifest, a README, and tests that pass right after generation: one
module driving real compositions through `MemoryCompositionRunner` and, for a Source, a
`SourceConformance` subclass.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

__all__ = ["SCAFFOLDS", "new", "scaffold"]

#: the entry-point group through which a distribution adds a kind to `mnemon new`
SCAFFOLDS = "mnemon.scaffolds"

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_MAX_NAME = 64


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
    package = name.replace("-", "_")
    core, core_range, manifest_range = _core_distribution()
    words = {
        "__DIST__": name,
        "__PACKAGE__": package,
        "__TYPE_ID__": name,
        "__TITLE__": name.replace("-", " ").capitalize(),
        "__CLASS__": "".join(part.capitalize() for part in name.split("-")),
        "__CORE__": core,
        "__CORE_RANGE__": core_range,
        "__MANIFEST_RANGE__": manifest_range,
        "__TESTING__": "mnemon-testing",
    }
    templates = _SOURCE if kind == "source" else _STRATEGY
    written = []
    for relative, template in templates.items():
        text = template
        # longer words first: "__CORE__" is a prefix of "__CORE_RANGE__"
        for word, value in sorted(words.items(), key=lambda item: -len(item[0])):
            text = text.replace(word, value)
            relative = relative.replace(word, value)
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
        written.append(path)
    return written


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


# ------------------------------------------------------------------ shared templates

_PYPROJECT = """
[build-system]
requires = ["hatchling>=1.24"]
build-backend = "hatchling.build"

[project]
name = "__DIST__"
version = "0.1.0"
description = "__DESCRIPTION__"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["__CORE____CORE_RANGE__"]

[project.optional-dependencies]
test = ["__TESTING____CORE_RANGE__", "pytest>=8.2"]

# how mnemon finds the plugin once the distribution is installed
[project.entry-points."mnemon.plugins"]
__TYPE_ID__ = "__PACKAGE__"

[tool.hatch.build.targets.wheel]
packages = ["__PACKAGE__"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = ["--import-mode=importlib"]
# async tests run under anyio: mnemon-testing's pytest plugin marks them, and
# tests/conftest.py keeps them on the asyncio backend

[tool.ruff]
line-length = 100
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP", "RUF", "ASYNC", "SIM", "PT", "C4", "PIE", "RET"]
"""

_CONFTEST = '''
import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio only (anyio would also try trio when it is installed)."""
    return "asyncio"
'''

_MANIFEST = """
# Read by mnemon's plugin discovery without importing the package.
[plugin]
id = "__TYPE_ID__"
version = "0.1.0"
display_name = "__TITLE__"
description = "__DESCRIPTION__"
mnemon = "__MANIFEST_RANGE__"
bundled = false
enabled_by_default = true

[[plugin.contributes.entries]]
name = "__TYPE_ID__"
plugin = "__PACKAGE__:plugin"
config_schema = __CONFIG_SCHEMA__
"""


def _manifest(description: str, schema: str) -> str:
    return _MANIFEST.replace("__DESCRIPTION__", description).replace("__CONFIG_SCHEMA__", schema)


def _pyproject(description: str) -> str:
    return _PYPROJECT.replace("__DESCRIPTION__", description)


# ------------------------------------------------------------------ a Source

_SOURCE_DESCRIPTION = "A mnemon Source: short items per user, searchable, pinned per turn."
_SOURCE_SCHEMA = (
    '{ type = "object", properties = { data_dir = { type = "string" } }, '
    "additionalProperties = false }"
)

_SOURCE_README = """
# __DIST__

A mnemon Source plugin: short items kept per tenant, user and agent, projected into the View,
searchable through the `search` route and added through the `add` action (the host asks the
user before every write). Generated by `mnemon new source __DIST__`.

```sh
pip install -e '.[test]'
pytest                       # a composition test and the Source conformance suite
```

Mount it in a profile (`mnemon.toml`):

```toml
[[entries]]
id = "__TYPE_ID__"
plugin = "__TYPE_ID__"     # the manifest id (`mnemon plugins` lists it); or use = "__PACKAGE__"
```

| configuration | meaning |
|---|---|
| `data_dir` | an absolute folder for the data (default: the host's data folder) |

| partition | rule |
|---|---|
| tenant | part of the partition when the scope has one |
| user | required: without it the Source is `unavailable` |
| agent | part of the partition when the scope has one |

Change `_source.py` to keep what your Source is about; keep the conformance suite green.
"""

_SOURCE_INIT = '''
"""__TITLE__: a mnemon Source plugin.

Mount the package itself (`use = "__PACKAGE__"` in a profile), or `plugin`.
"""

from ._source import SOURCE as SOURCE
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin
from ._source import plugin as plugin

__all__ = ["SOURCE", "apply", "memory_plugin", "plugin"]
'''

_SOURCE_MODULE = '''
"""The __TITLE__ Source: short items per tenant, user and agent, pinned by exact snapshot."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mnemon import (
    DefinitionError,
    Evidence,
    EvidenceItem,
    FactsRequest,
    Fragment,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    RevisionConflict,
    Scope,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    run_blocking,
    source_data_directory,
    truncate_text,
)

PACKAGE = "__DIST__"
TYPE_ID = "__TYPE_ID__"
ROLE = "notes"
MAX_ITEMS = 500
MAX_TEXT = 2_000

TEXT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}},
    "required": ["text"],
    "additionalProperties": False,
}
QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["query"],
    "additionalProperties": False,
}
NOTHING: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="__TITLE__",
    description="Short items per user, projected, searchable and pinned per turn.",
    roles=["source"],
    provides=["source.__TYPE_ID__"],
)

MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "role": ROLE,
    "capabilities": ["project", "search", "write"],
    "consistency": "exact-snapshot",
    "routes": [
        {
            "id": "search",
            "description": "Find items containing a word or phrase.",
            "capability": "search",
            "input_schema": QUERY,
            "max_calls": 3,
            "max_results": 20,
        }
    ],
    "actions": [
        {
            "id": "add",
            "description": "Add one short item.",
            "capability": "write",
            "input_schema": TEXT,
        }
    ],
    "management": {
        "label": "__TITLE__",
        "description": "The items of one user, for people rather than the model.",
        "operations": [
            {"id": "list", "kind": "read", "description": "All items.", "input_schema": NOTHING},
            {"id": "add", "kind": "mutate", "description": "Add one.", "input_schema": TEXT},
        ],
    },
}


def _revision(items: list[str]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


def _read(path: Path) -> list[str]:
    try:
        return [str(item) for item in json.loads(path.read_text(encoding="utf-8"))]
    except FileNotFoundError:
        return []


def _write(path: Path, items: list[str]) -> None:
    # a temporary file renamed over the old one: a reader sees the old or the new list
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(items, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _append(path: Path, text: str) -> list[str]:
    items = _read(path)
    if len(items) >= MAX_ITEMS:
        raise SourceError("invalid_payload", f"at most {MAX_ITEMS} items are kept")
    items.append(text)
    _write(path, items)
    return items


class __CLASS__Source:
    """The Source runtime: every request reads its own snapshot of its scope's items."""

    def __init__(self, key: str, folder: Path) -> None:
        self._key = key
        self._folder = folder
        # writes of this entry are serialized, so a fenced write checks and writes at once
        self._lock = anyio.Lock()

    def _file(self, scope: Scope) -> Path | None:
        """The file of the scope's partition; its name says nothing about whose it is."""
        if scope.user_id is None:
            return None
        partition = json.dumps([scope.tenant_id, scope.user_id, scope.agent_id])
        return self._folder / f"{hashlib.sha256(partition.encode()).hexdigest()[:32]}.json"

    def _path(self, scope: Scope) -> Path:
        path = self._file(scope)
        if path is None:
            raise SourceError("invalid_payload", "the scope has no user id")
        return path

    async def _items(self, scope: Scope) -> list[str]:
        # file access blocks: it runs in a worker thread, never on the event loop
        return await run_blocking(_read, self._path(scope))

    async def facts(self, request: FactsRequest) -> SourceFacts:
        """Cheap and read-only: availability and the revision of the scope's items."""
        if self._file(request.scope) is None:
            return SourceFacts(
                instance_key=self._key,
                type_id=TYPE_ID,
                role=ROLE,
                availability="unavailable",
                reason="missing-scope",
            )
        return SourceFacts(
            instance_key=self._key,
            type_id=TYPE_ID,
            role=ROLE,
            availability="ready",
            revision=_revision(await self._items(request.scope)),
            capabilities=("project", "search", "write"),
            route_ids=("search",),
            action_ids=("add",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        """The items within the characters allotted, and a grant pinning this snapshot."""
        items = await self._items(request.scope)
        revision = _revision(items)
        if request.expected_revision is not None and revision != request.expected_revision:
            raise SourceError("degraded", "the items changed since facts were read")
        text = truncate_text("\\n".join(f"- {item}" for item in items), request.max_characters)
        fragments = (Fragment(source_key=self._key, mode=request.mode, text=text),) if text else ()
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(source_key=self._key, value={"items": items}),
            revision=revision,
        )

    async def query(self, request: QueryRequest) -> Evidence:
        """Search the snapshot pinned in the grant, never the items as they are now."""
        wanted = str(request.input["query"]).casefold()
        items = [str(item) for item in request.grant.value["items"]]
        hits = [(index, item) for index, item in enumerate(items) if wanted in item.casefold()]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self._key,
            items=tuple(EvidenceItem(id=f"item-{index}", text=item) for index, item in hits),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        """Add one item and report the committed revision."""
        path = self._path(request.view.scope)
        async with self._lock:
            items = await run_blocking(_append, path, str(request.input["text"]))
        return create_mutation_receipt(
            request,
            completion="committed",
            committed_at=datetime.now(UTC).isoformat(),
            revision=_revision(items),
        )

    async def manage(self, request: ManageRequest) -> ManagementResult:
        """List the items as they are now, or add one if still at the expected revision."""
        path = self._path(request.scope)
        if request.operation.id == "list":
            items = await run_blocking(_read, path)
            return ManagementResult(
                source_key=self._key,
                operation="list",
                output={"items": items},
                revision=_revision(items),
            )
        async with self._lock:
            current = _revision(await run_blocking(_read, path))
            if current != request.expected_revision:
                raise RevisionConflict("revision conflict: the items changed")
            items = await run_blocking(_append, path, str(request.input["text"]))
        return ManagementResult(source_key=self._key, operation="add", revision=_revision(items))


def _create(init: SourceInit) -> __CLASS__Source:
    unknown = sorted(set(init.configuration) - {"data_dir"})
    if unknown:
        raise DefinitionError(f"__TYPE_ID__ configuration: unknown key {unknown[0]!r}")
    folder = source_data_directory(init, init.configuration.get("data_dir"))
    return __CLASS__Source(init.instance_key, folder)


SOURCE = define_memory_source(MANIFEST, _create)


def apply(ctx: PluginContext) -> None:
    """Install one Source for this profile entry."""
    install_memory(ctx, sources=[SOURCE])


class __CLASS__Plugin:
    """The plugin object named by `mnemon-plugin.toml`; mounting it installs the Source."""

    memory_plugin = memory_plugin

    def apply(self, ctx: PluginContext) -> None:
        """Install one Source for this profile entry."""
        apply(ctx)


plugin = __CLASS__Plugin()
'''

_SOURCE_TEST = '''
"""The Source composes through a real host, as it will in an agent."""

from __future__ import annotations

from pathlib import Path

from mnemon_testing import MemoryCompositionRunner, SelectAll

import __PACKAGE__


def allow(offer: object) -> bool:
    return True


async def test_an_added_item_shows_in_the_next_view_and_is_found(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(__PACKAGE__, instance_id="items", config={"data_dir": str(tmp_path)})
        await runner.mount(SelectAll(), instance_id="strategy")
        scope = {"user_id": "ada"}
        turn = await runner.begin_turn({"scope": scope})
        receipt = await turn.execute_action("source:items/add", {"text": "Buy oat milk"}, allow)
        assert receipt.completion == "committed"
        await turn.release()

        turn = await runner.begin_turn({"scope": scope})
        assert [fragment.text for fragment in turn.view.fragments] == ["- Buy oat milk"]
        evidence = await turn.execute_route("source:items/search", {"query": "milk"})
        assert [item.text for item in evidence.items] == ["Buy oat milk"]
        await turn.release()

        other = await runner.begin_turn({"scope": {"user_id": "grace"}})
        assert other.view.fragments == ()
        await other.release()


async def test_a_scope_without_a_user_is_unavailable(tmp_path: Path) -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(__PACKAGE__, instance_id="items", config={"data_dir": str(tmp_path)})
        await runner.mount(SelectAll(), instance_id="strategy")
        turn = await runner.begin_turn({"scope": {"workspace": "billing"}})
        assert turn.view.consistency == ()
        await turn.release()
'''

_SOURCE_CONFORMANCE = '''
"""The Source passes mnemon's Source conformance suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mnemon_testing.conformance import SourceConformance

import __PACKAGE__


class Test__CLASS__Conformance(SourceConformance):
    plugin = __PACKAGE__
    scopes = ({"user_id": "ada"}, {"user_id": "grace"})
    unavailable_scope: ClassVar[dict[str, Any]] = {"workspace": "billing"}
    invalid_writes = (("add", {"text": ""}), ("add", {}), ("add", {"text": "x" * 2_001}))

    def configure(self, directory: Path) -> dict[str, Any]:
        return {"data_dir": str(directory)}

    def write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def query(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "search", {"query": marker}

    def manage_read(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "list", {}

    def manage_write(self, marker: str) -> tuple[str, dict[str, Any]]:
        return "add", {"text": marker}

    def write_for_agent(self, marker: str) -> tuple[str, dict[str, Any]]:
        # items are partitioned by agent too, so the agent check applies
        return "add", {"text": marker}
'''

_SOURCE = {
    "pyproject.toml": _pyproject(_SOURCE_DESCRIPTION),
    "README.md": _SOURCE_README,
    "__PACKAGE__/__init__.py": _SOURCE_INIT,
    "__PACKAGE__/_source.py": _SOURCE_MODULE,
    "__PACKAGE__/py.typed": "",
    "__PACKAGE__/mnemon-plugin.toml": _manifest(_SOURCE_DESCRIPTION, _SOURCE_SCHEMA),
    "tests/conftest.py": _CONFTEST,
    "tests/test___PACKAGE__.py": _SOURCE_TEST,
    "tests/test_conformance.py": _SOURCE_CONFORMANCE,
}

# ------------------------------------------------------------------ a Strategy

_STRATEGY_DESCRIPTION = "A mnemon Strategy: every available Source, the budget split evenly."
_STRATEGY_SCHEMA = (
    '{ type = "object", properties = { mode = { enum = ["eager", "routed"] } }, '
    "additionalProperties = false }"
)

_STRATEGY_README = """
# __DIST__

A mnemon Strategy plugin: it selects every available Source, projects those that can in one
mode with the budget split evenly, and offers their routes and actions within its maxima.
Generated by `mnemon new strategy __DIST__`.

```sh
pip install -e '.[test]'
pytest
```

Select it in a profile (`mnemon.toml`):

```toml
[strategy]
use = "__TYPE_ID__"

[[entries]]
id = "__TYPE_ID__"
plugin = "__TYPE_ID__"     # the manifest id (`mnemon plugins` lists it); or use = "__PACKAGE__"
```

| configuration | meaning |
|---|---|
| `mode` | `eager` (default) or `routed` |

`compose()` must stay pure: no I/O, no clock, no randomness; mnemon runs it twice and
rejects a View whose two results differ.
"""

_STRATEGY_INIT = '''
"""__TITLE__: a mnemon Strategy plugin.

Mount the package itself (`use = "__PACKAGE__"` in a profile), or `plugin`.
"""

from ._strategy import apply as apply
from ._strategy import memory_plugin as memory_plugin
from ._strategy import plugin as plugin

__all__ = ["apply", "memory_plugin", "plugin"]
'''

_STRATEGY_MODULE = '''
"""The __TITLE__ Strategy: every available Source, the projection budget split evenly."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from mnemon import (
    ComposeRequest,
    DefinitionError,
    ExtensionContribution,
    PluginContext,
    SourceCandidate,
    ViewSpec,
    allocate_characters,
    define_memory_plugin,
    define_memory_strategy,
    install_memory,
)

PACKAGE = "__DIST__"
TYPE_ID = "__TYPE_ID__"
MAX_ROUTES = 16
MAX_ACTIONS = 16

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="__TITLE__",
    description="Every available Source, the projection budget split evenly.",
    roles=["strategy"],
    provides=["strategy.__TYPE_ID__"],
    requires=["source"],
)

MANIFEST: dict[str, Any] = {
    "type_id": TYPE_ID,
    "package_name": PACKAGE,
    "supported_source_roles": ["*"],
    "max_sources": 16,
    "max_routes": MAX_ROUTES,
    "max_actions": MAX_ACTIONS,
}


def compose(
    mode: str,
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    """Pure: the same frozen input always gives the same proposal."""
    available = [s for s in sources if s.facts.availability != "unavailable"]
    projecting = [s for s in available if "project" in s.facts.capabilities]
    shares = allocate_characters(request.budget.max_projection_characters, [1] * len(projecting))
    allotted = dict(zip((s.key for s in projecting), shares, strict=True))
    routes_left, actions_left = MAX_ROUTES, MAX_ACTIONS
    selections = []
    for source in available:
        route_ids = [route.id for route in source.routes][:routes_left]
        action_ids = [action.id for action in source.actions][:actions_left]
        routes_left -= len(route_ids)
        actions_left -= len(action_ids)
        selection: dict[str, Any] = {
            "source_key": source.key,
            "required": False,  # a slow or broken Source is dropped, not the whole turn
            "route_ids": route_ids,
            "action_ids": action_ids,
        }
        if source.key in allotted:
            selection["projection"] = {"mode": mode, "max_characters": allotted[source.key]}
        selections.append(selection)
    return ViewSpec.model_validate(
        {
            "strategy_type_id": TYPE_ID,
            "sources": selections,
            "explanation": f"__TYPE_ID__: {len(selections)} available Source(s), {mode}",
        }
    )


def _mode(configuration: Mapping[str, Any]) -> str:
    unknown = sorted(set(configuration) - {"mode"})
    if unknown:
        raise DefinitionError(f"__TYPE_ID__ configuration: unknown key {unknown[0]!r}")
    mode = configuration.get("mode", "eager")
    if mode not in ("eager", "routed"):
        raise DefinitionError('__TYPE_ID__ configuration.mode: must be "eager" or "routed"')
    return str(mode)


def apply(ctx: PluginContext) -> None:
    """Install the Strategy for this profile entry."""
    strategy = define_memory_strategy(MANIFEST, partial(compose, _mode(ctx.configuration)))
    install_memory(ctx, strategies=[strategy])


class __CLASS__Plugin:
    """The plugin object named by `mnemon-plugin.toml`; mounting it installs the Strategy."""

    memory_plugin = memory_plugin

    def apply(self, ctx: PluginContext) -> None:
        """Install the Strategy for this profile entry."""
        apply(ctx)


plugin = __CLASS__Plugin()
'''

_STRATEGY_TEST = '''
"""The Strategy composes real Views over stub Sources."""

from __future__ import annotations

import pytest
from mnemon import InstallError
from mnemon_testing import MemoryCompositionRunner, StubSource

import __PACKAGE__


async def test_every_available_source_is_selected_and_projected() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("notes", text="Ada likes tea."), instance_id="notes")
        await runner.mount(StubSource("docs", routes=["search"]), instance_id="docs")
        await runner.mount(StubSource("gone", availability="unavailable"), instance_id="gone")
        await runner.mount(__PACKAGE__, instance_id="strategy")
        turn = await runner.begin_turn({"scope": {"user_id": "ada"}})
        view = turn.view
        await turn.release()
    assert [c.source_key for c in view.consistency] == ["source:docs", "source:notes"]
    assert "Ada likes tea." in [fragment.text for fragment in view.fragments]
    assert [route.id for route in view.routes] == ["source:docs/search"]


async def test_routed_mode_is_honoured() -> None:
    async with MemoryCompositionRunner() as runner:
        await runner.mount(StubSource("notes", text="Ada likes tea."), instance_id="notes")
        await runner.mount(__PACKAGE__, instance_id="strategy", config={"mode": "routed"})
        turn = await runner.begin_turn()
        view = turn.view
        await turn.release()
    assert {fragment.mode for fragment in view.fragments} == {"routed"}


async def test_an_unknown_configuration_key_is_refused() -> None:
    async with MemoryCompositionRunner() as runner:
        with pytest.raises(InstallError, match="unknown key 'colour'"):
            await runner.mount(__PACKAGE__, instance_id="strategy", config={"colour": "red"})
'''

_STRATEGY = {
    "pyproject.toml": _pyproject(_STRATEGY_DESCRIPTION),
    "README.md": _STRATEGY_README,
    "__PACKAGE__/__init__.py": _STRATEGY_INIT,
    "__PACKAGE__/_strategy.py": _STRATEGY_MODULE,
    "__PACKAGE__/py.typed": "",
    "__PACKAGE__/mnemon-plugin.toml": _manifest(_STRATEGY_DESCRIPTION, _STRATEGY_SCHEMA),
    "tests/conftest.py": _CONFTEST,
    "tests/test___PACKAGE__.py": _STRATEGY_TEST,
}
