"""Opening a profile for one command, and the operator's View a person at the terminal reads.

A Strategy's turn policy shapes what the *model* may read in one turn (the layered Strategy
allows two recalls of four results). A person running `mnemon recall --limit 30` is not the
model: the CLI composes its reads with its own Strategy, `operator`, which selects every
serving Source with all its routes and actions and has no turn policy. Reads still go
through the route's pinned grant and the route's own ceilings, exactly as a host's would.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from .._definitions import define_memory_plugin, define_memory_strategy
from .._discovery import discover_plugins
from .._helpers import allocate_characters, instance_folder_name
from .._host import MemoryHost, MemoryTurn
from .._install import install_memory
from .._models import (
    ComposeRequest,
    Diagnostic,
    ExtensionContribution,
    Scope,
    SourceCandidate,
    ViewSpec,
)
from .._profile import Profile, load_profile
from ._options import CommandError
from ._paths import shown_path

__all__ = [
    "OPERATOR_TYPE_ID",
    "diagnostic_lines",
    "missing_flags",
    "open_memory",
    "operator_turn",
    "source_partitions",
]

OPERATOR_TYPE_ID = "operator"
OPERATOR_ENTRY = "mnemon-cli-operator"
_LIMIT = 1_000
OPERATOR_BUDGET = {"max_evidence_results": 1_000, "max_evidence_characters": 1_000_000}

_PLUGIN = define_memory_plugin(
    "mnemon",
    label="Operator reads",
    description="The mnemon command's own View: every serving Source, no per-turn policy.",
    roles=["strategy"],
    provides=["strategy.mnemon-cli-operator"],
)


def _compose(
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> ViewSpec:
    serving = sorted(
        (s for s in sources if s.facts.availability != "unavailable"), key=lambda s: s.key
    )
    projecting = [s for s in serving if "project" in s.facts.capabilities]
    shares = dict(
        zip(
            (s.key for s in projecting),
            allocate_characters(request.budget.max_projection_characters, [1] * len(projecting)),
            strict=True,
        )
    )
    selections: list[dict[str, Any]] = []
    for source in serving:
        selection: dict[str, Any] = {
            "source_key": source.key,
            "required": False,
            "route_ids": [route.id for route in source.routes],
            "action_ids": [action.id for action in source.actions],
        }
        if source.key in shares:
            selection["projection"] = {"mode": "routed", "max_characters": shares[source.key]}
        selections.append(selection)
    return ViewSpec.model_validate(
        {
            "strategy_type_id": OPERATOR_TYPE_ID,
            "sources": selections,
            "explanation": "operator: every serving Source, for a person at the terminal",
        }
    )


_STRATEGY = define_memory_strategy(
    {
        "type_id": OPERATOR_TYPE_ID,
        "package_name": "mnemon",
        "supported_source_roles": ["*"],
        "max_sources": _LIMIT,
        "max_routes": _LIMIT,
        "max_actions": _LIMIT,
    },
    _compose,
)


class _OperatorPlugin:
    def apply(self, ctx: Any) -> None:
        install_memory(ctx, plugin=_PLUGIN, strategies=[_STRATEGY])


def _strategy_plugins(profile: Profile) -> list[str]:
    """The discovered plugins whose manifest declares an entry that installs a Strategy."""
    return sorted(
        plugin.id
        for plugin in discover_plugins(project_dir=profile.path.parent)
        if plugin.status not in ("shadowed", "broken", "unsupported")
        and plugin.manifest is not None
        and any("strategy" in entry.installs for entry in plugin.manifest.entries)
    )


def _check_serving(host: MemoryHost, profile: Profile) -> None:
    report = host.inspect()
    if report.get("state") == "serving":
        return
    codes = [str(item.get("code")) for item in report.get("diagnostics", [])]
    name = profile.path.name
    if "missing-strategy" in codes or not report.get("serving"):
        wanted = profile.settings.strategy_type_id
        plugins = _strategy_plugins(profile)
        installed = ", ".join(plugins) or "none"
        if wanted:
            # `[strategy]` only selects: an entry mounts the Strategy it names
            mounted = sorted(
                entry.id for entry in profile.entries if entry.enabled and entry.plugin in plugins
            )
            close = difflib.get_close_matches(wanted, [*mounted, *plugins], n=1, cutoff=0.75)
            if close and close[0] != wanted:
                fix = f"did you mean {close[0]!r}?"
            else:
                add = f'id = "{wanted}", plugin = "{wanted}"' if wanted in plugins else "for one"
                fix = f"no enabled entry installs one by that type id or key; add an entry {add}"
            among = f"mounted: {', '.join(mounted)}; " if mounted else ""
            raise CommandError(
                f"{name}: [strategy] use {wanted!r} selects no mounted Strategy: {fix} "
                f"({among}installed Strategy plugins: {installed})",
                code="missing-strategy",
            )
        raise CommandError(
            f"{name}: no Strategy is mounted; add an entry for one "
            f"(installed Strategy plugins: {installed})",
            code="missing-strategy",
        )


@asynccontextmanager
async def open_memory(
    path: Path, *, operator: bool = False, check: bool = True, **settings: Any
) -> AsyncIterator[tuple[Profile, MemoryHost]]:
    """The profile at `path` and a host serving it; with `operator`, composing operator Views.

    With `check` (the default), a host that does not serve (no Strategy) is an error.

    Raises:
        CommandError: nothing serves (a missing Strategy names the installed ones).
        MnemonError: the profile is invalid or its entries cannot be mounted.
    """
    profile = load_profile(path)
    if operator:
        settings = {**settings, "strategy_type_id": OPERATOR_TYPE_ID, "strategy_fallback": None}
    async with profile.open_host(**settings) as host:
        if operator:
            await host.mount(_OperatorPlugin(), instance_id=OPERATOR_ENTRY)
        elif check:
            _check_serving(host, profile)
        yield profile, host


def operator_turn(host: MemoryHost, scope: Scope) -> AbstractAsyncContextManager[MemoryTurn]:
    """A turn for a person's reads and writes: only each route's own ceilings apply.

    A View's budget caps every route at 8 results by default, a size meant for a model's
    context; a person asking for 30 memories is bounded by the route itself instead.
    """
    return host.turn(scope=scope, scenario="operator", budget=OPERATOR_BUDGET)


def source_folder(profile: Profile, source_key: str, type_id: str) -> Path:
    """Where a Source keeps its data by default: `<data_dir>/sources/<type>/<instance>`."""
    base = profile.data_dir
    for entry in profile.entries:
        config = profile.entry_config(entry)
        if entry.id == source_key.removeprefix("source:") and isinstance(
            config.get("data_dir"), str
        ):
            base = Path(config["data_dir"])
    return base / "sources" / type_id / instance_folder_name(source_key)


def _os_problem(folder: Path) -> str:
    # what the operating system says about the Source's folder and the files in it
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return "the folder does not exist yet"
    except OSError as exc:
        return f"cannot open the folder: {exc.strerror or type(exc).__name__}"
    for name in names:
        file = folder / name
        try:
            with open(file, "rb") as handle:
                handle.read(1)
        except IsADirectoryError:
            continue
        except OSError as exc:
            return f"cannot read {name}: {exc.strerror or type(exc).__name__}"
    return "the folder and its files can be read"


_FLAGS = {
    "user_id": "--user",
    "agent_id": "--agent",
    "session_id": "--session",
    "workspace": "--workspace",
    "tenant_id": "--tenant",
}


def missing_flags(needed: Iterable[str], scope: Scope | None) -> list[str]:
    """The identity flags for the scope ids in `needed` that `scope` lacks, e.g. `["--workspace"]`.

    `needed` is what the Source declares it partitions by (`partition_keys`, as
    `source_partitions` or a management entry report them): the core never guesses by type.
    """
    given = scope.model_dump(exclude_none=True) if scope is not None else {}
    return [_FLAGS[name] for name in needed if name in _FLAGS and name not in given]


def source_partitions(host: MemoryHost) -> dict[str, tuple[str, ...]]:
    """The scope ids each serving Source partitions by, by its key."""
    serving = host.inspect().get("serving") or {}
    return {
        item["key"]: tuple(item.get("partition_keys", ())) for item in serving.get("sources", [])
    }


# a reason about a Source's own store starts with one of these (`damaged-file`, `store-busy`);
# only such a reason, with a store folder on disk, sends a person to the folder: a refused
# credential or a quota is not on the disk
_STORE_REASONS = ("damaged-", "store-", "storage-", "unsafe-", "schema-")


def diagnostic_lines(
    diagnostics: Sequence[Diagnostic] | Sequence[Mapping[str, Any]],
    *,
    profile: Profile | None = None,
    types: Mapping[str, str] | None = None,
    source_key: str | None = None,
    scope: Scope | None = None,
    partitions: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """One line per diagnostic (of `source_key`, when given): its code and message.

    A `missing-scope` diagnostic adds the identity flags to give, from what the Source declares
    in `partitions` (`source_partitions(host)`). On the terminal only, a diagnostic about a
    Source's store adds the Source's data folder relative to the profile and what the operating
    system says about it.
    """
    lines = []
    for item in diagnostics:
        record = item.model_dump() if isinstance(item, Diagnostic) else dict(item)
        key = record.get("key")
        if source_key is not None and key != source_key:
            continue
        line = f"{record['code']}: {record['message']}"
        message = str(record["message"])
        if "missing-scope" in message and isinstance(key, str):
            flags = missing_flags((partitions or {}).get(key, ()), scope)
            line += f" (add {' and '.join(flags)})" if flags else ""
        if (
            profile is not None
            and types is not None
            and isinstance(key, str)
            and key in types
            and str(record.get("reason") or "").startswith(_STORE_REASONS)
            and (folder := source_folder(profile, key, types[key])).exists()
        ):
            shown = shown_path(folder, profile.path.parent)
            line += f"; store folder {shown}: {_os_problem(folder)}"
        lines.append(line)
    return lines
