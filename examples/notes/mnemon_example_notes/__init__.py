"""A file-backed notes Source: the example of an external mnemon plugin.

Mount the package itself: `await host.mount(mnemon_example_notes, instance_id="notes",
config={"path": "/abs/notes.md"})`.
"""

from ._source import NOTES_SOURCE as NOTES_SOURCE
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin

__all__ = ["NOTES_SOURCE", "apply", "memory_plugin"]
