"""Test kit for mnemon plugin authors: drive real compositions, check conformance."""

from ._embedding import EmbeddingProbe as EmbeddingProbe
from ._runner import MemoryCompositionRunner as MemoryCompositionRunner
from ._runner import RunnerTurn as RunnerTurn
from ._select import SelectAll as SelectAll
from ._stubs import StubSource as StubSource

__all__ = ["EmbeddingProbe", "MemoryCompositionRunner", "RunnerTurn", "SelectAll", "StubSource"]
