"""The `documents` Source: Markdown documents of a workspace with a SQLite FTS5 index.

Mount the package itself: `await host.mount(mnemon_source_documents, instance_id="docs",
config={"data_dir": "/abs/folder"})`; Views need `scope.workspace`.
"""

from ._manifest import MANIFEST as MANIFEST
from ._plugin import DOCUMENTS_SOURCE as DOCUMENTS_SOURCE
from ._plugin import apply as apply
from ._plugin import memory_plugin as memory_plugin

__all__ = ["DOCUMENTS_SOURCE", "MANIFEST", "apply", "memory_plugin"]
