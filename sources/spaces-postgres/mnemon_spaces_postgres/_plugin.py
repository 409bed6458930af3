"""The plugin: the `spaces` Source with the SQLite and PostgreSQL Providers to choose from."""

from __future__ import annotations

from mnemon_source_spaces import SQLITE_PROVIDER, define_spaces_source

from mnemon.sdk import PluginContext, define_memory_plugin, install_memory

from ._provider import POSTGRES_PROVIDER

__all__ = ["SPACES_SOURCE", "apply", "memory_plugin"]

memory_plugin = define_memory_plugin(
    "mnemon-spaces-postgres",
    label="Long-term memory spaces on PostgreSQL",
    description=(
        "The spaces Source with a PostgreSQL Provider: long-term memory shared by many agent "
        "hosts (SQLite stays available as provider type sqlite)."
    ),
    roles=["source"],
    provides=["memory.spaces"],
)

SPACES_SOURCE = define_spaces_source([SQLITE_PROVIDER, POSTGRES_PROVIDER])


def apply(ctx: PluginContext) -> None:
    """Install one `spaces` Source (SQLite and PostgreSQL Providers) for this entry."""
    install_memory(ctx, sources=[SPACES_SOURCE])
