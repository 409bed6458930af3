"""The plugin object: the descriptor, the Source definition and `apply`."""

from __future__ import annotations

from mnemon.sdk import PluginContext, define_memory_plugin, define_memory_source, install_memory

from ._manifest import MANIFEST, PACKAGE
from ._source import create_documents_source

__all__ = ["DOCUMENTS_SOURCE", "apply", "memory_plugin"]

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Workspace documents",
    description=(
        "Markdown documents of a workspace, searched through a SQLite FTS5 index that is "
        "rebuilt from the files."
    ),
    roles=["source"],
    provides=["memory.documents"],
)

DOCUMENTS_SOURCE = define_memory_source(MANIFEST, create_documents_source)


def apply(ctx: PluginContext) -> None:
    """Install one documents Source for this entry."""
    install_memory(ctx, sources=[DOCUMENTS_SOURCE])
