"""The starter profile `mnemon init` writes."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from .._discovery import DiscoveredPlugin, Discovery
from ._options import FlagError

__all__ = [
    "STARTER_PROFILE",
    "StarterEmbedder",
    "installed_embedder",
    "starter_profile",
    "unusable_starter_plugins",
]


@dataclass(frozen=True, slots=True)
class StarterEmbedder:
    """The embedder a starter profile mounts (as the entry `embedder`): which plugin."""

    plugin_id: str
    use: str | None
    """The import path, when the plugin contributes several entries (else None)."""

    def entry(self) -> str:
        """The profile entry mounting it, with a comment saying what it is for."""
        names = f'use = "{self.use}"' if self.use else f'plugin = "{self.plugin_id}"'
        return (
            "\n# Recall by meaning: the embedder found installed. The spaces Source uses the\n"
            '# vector space of the one embedder mounted beside it (vectors = "auto").\n'
            f'[[entries]]\nid = "embedder"\n{names}\n'
        )


def installed_embedder(discovery: Discovery, wanted: str | None = None) -> StarterEmbedder | None:
    """The embedder plugin `wanted`, or else the first usable one found; None when none is.

    Usable: an available plugin (not broken, shadowed or disabled) with a manifest entry that
    declares it installs an `embedder` and whose configuration schema requires nothing, so
    the entry mounts as written. First by plugin id, then entry name: the choice never
    depends on the order distributions were installed in.

    Raises:
        FlagError: `wanted` names no discovered plugin, or one that is not a usable
            embedder (the message says why).
    """
    if wanted is not None:
        found = discovery.get(wanted)
        if found is None:
            raise FlagError(f"--embedder: no plugin {wanted!r} was found (see mnemon plugins)")
        chosen = _usable(found)
        if chosen is None:
            raise FlagError(
                f"--embedder: {wanted!r} is not an embedder that mounts without configuration "
                "(see mnemon plugins show; add its entry and config by hand)"
            )
        return chosen
    return next(filter(None, map(_usable, discovery)), None)


def _usable(plugin: DiscoveredPlugin) -> StarterEmbedder | None:
    if plugin.status != "available" or plugin.manifest is None:
        return None
    entries = plugin.manifest.entries
    for entry in sorted(entries, key=lambda entry: entry.name):
        if "embedder" not in entry.installs or entry.unsupported:
            continue
        if entry.config_schema.get("required"):
            continue
        return StarterEmbedder(plugin.id, None if len(entries) == 1 else entry.plugin)
    return None


def starter_profile(data_dir: str = ".mnemon", embedder: StarterEmbedder | None = None) -> str:
    """The starter profile text, keeping data under `data_dir` (relative to the file).

    With `embedder`, it also mounts that embedder, so the spaces Source recalls by meaning.
    """
    return f"""\
# mnemon profile, written by `mnemon init`.
# Every enabled entry is mounted together, in one atomic change. An entry names its plugin
# by id (`mnemon plugins` lists them), or by import path with `use = "package"`.
# Relative paths are taken from this file's folder.
data_dir = "{data_dir}"
source_timeout = 10.0

# Which of the mounted Strategies composes the View (the entry `layered` below mounts it).
[strategy]
use = "layered"

# Resident working memory: facts about the user and the agent's own notes.
[[entries]]
id = "runtime"
plugin = "runtime"

# Markdown documents of the workspace, searchable (SQLite FTS5). Needs --workspace.
[[entries]]
id = "documents"
plugin = "documents"

# Durable long-term memory in named spaces, on the embedded SQLite provider.
[[entries]]
id = "spaces"
plugin = "spaces"
[entries.config]
default_space = "personal"

[[entries.config.spaces]]
name = "personal"
writable = true
description = "What the user shared about themselves."

# decisions of one workspace stay in that workspace (when the scope names one)
[[entries.config.spaces]]
name = "project"
writable = true
partition_by = ["workspace"]
description = "Decisions and facts about the work."

[entries.config.provider]
type = "sqlite"
{embedder.entry() if embedder else ""}
# The Strategy: working context resident, documents and long-term memory on request.
# Add a second long-term memory (a Raven backend, a Nexent provider) and both serve: the
# model recalls them through one route, fused, and its writes still go to spaces.
[[entries]]
id = "layered"
plugin = "layered"
[entries.config]
write_sources = ["source:spaces"]

# View extensions ship disabled: set enabled = true to use one.
[[entries]]
id = "scoped"
plugin = "scoped"
enabled = false

[[entries]]
id = "light-context"
plugin = "light-context"
enabled = false

[[entries]]
id = "auto-capture"
plugin = "auto-capture"
enabled = false
"""


STARTER_PROFILE = starter_profile()


def unusable_starter_plugins(discovery: Discovery) -> list[str]:
    """The plugins the starter profile's enabled entries name that cannot be loaded here.

    Each as `id (why)`: `not installed`, or the status discovery gave it (`broken`, ...).
    """
    unusable = []
    for entry in tomllib.loads(STARTER_PROFILE)["entries"]:
        if not entry.get("enabled", True):
            continue  # a disabled entry is never imported
        found = discovery.get(entry["plugin"])
        if found is None:
            unusable.append(f"{entry['plugin']} (not installed)")
        elif found.status in ("broken", "unsupported"):
            unusable.append(f"{entry['plugin']} ({found.status})")
    return unusable
