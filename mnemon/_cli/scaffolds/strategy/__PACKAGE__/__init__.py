"""__TITLE__: a mnemon Strategy plugin.

Mount the package itself (`use = "__PACKAGE__"` in a profile), or `plugin`.
"""

from ._strategy import apply as apply
from ._strategy import memory_plugin as memory_plugin
from ._strategy import plugin as plugin

__all__ = ["apply", "memory_plugin", "plugin"]
