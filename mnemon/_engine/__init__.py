"""The composition engine: registry, activation graph, generations, composition, execution.

This module is the engine's facade: the host uses the engine only through the names below,
and an import-linter contract keeps it so.
"""

from .assembly import PinnedView
from .engine import Engine, EntryMemoryService
from .execution import TurnExecution
from .generation import Lease
from .maintenance import run_maintenance
from .management import current_revision, management_catalog, run_management

__all__ = [
    "Engine",
    "EntryMemoryService",
    "Lease",
    "PinnedView",
    "TurnExecution",
    "current_revision",
    "management_catalog",
    "run_maintenance",
    "run_management",
]
