"""A focus Strategy: the example of an external mnemon Strategy plugin."""

from ._strategy import apply as apply
from ._strategy import memory_plugin as memory_plugin
from ._strategy import split_evenly as split_evenly

__all__ = ["apply", "memory_plugin", "split_evenly"]
