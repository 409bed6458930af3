"""Test kit for mnemon plugin authors: drive real compositions, check conformance."""

from ._runner import MemoryCompositionRunner as MemoryCompositionRunner
from ._runner import RunnerTurn as RunnerTurn

__all__ = ["MemoryCompositionRunner", "RunnerTurn"]
