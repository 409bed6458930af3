"""__TITLE__: a mnemon Source plugin.

Mount the package itself (`use = "__PACKAGE__"` in a profile), or `plugin`.
"""

from ._source import SOURCE as SOURCE
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin
from ._source import plugin as plugin

__all__ = ["SOURCE", "apply", "memory_plugin", "plugin"]
