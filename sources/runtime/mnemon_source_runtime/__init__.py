"""The `runtime` Source: resident working memory (user facts and agent notes) for mnemon.

Mount the package itself: `await host.mount(mnemon_source_runtime, instance_id="runtime",
config={"data_dir": "/abs/folder"})`.
"""

from ._source import MANIFEST as MANIFEST
from ._source import RUNTIME_SOURCE as RUNTIME_SOURCE
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin

__all__ = ["MANIFEST", "RUNTIME_SOURCE", "apply", "memory_plugin"]
