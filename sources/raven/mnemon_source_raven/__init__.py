"""Host Raven `MemoryBackend`s as mnemon Sources, unchanged.

Mount the package: `await host.mount(mnemon_source_raven, instance_id="raven",
config={"backend": "my_backends:make_backend", "track": "user"})`.
"""

from ._contract import BackendContext as BackendContext
from ._contract import BackendFactory as BackendFactory
from ._contract import BackendServices as BackendServices
from ._contract import Memory as Memory
from ._contract import MemoryBackend as MemoryBackend
from ._failures import raven_exception_name as raven_exception_name
from ._failures import source_error as source_error
from ._noop import SubstrateMissingBackend as SubstrateMissingBackend
from ._resolve import BackendImportFailed as BackendImportFailed
from ._resolve import register_memory_backend as register_memory_backend
from ._resolve import resolve_backend_factory as resolve_backend_factory
from ._resolve import resolve_memory_backend as resolve_memory_backend
from ._shim import install_raven_shim as install_raven_shim
from ._source import RAVEN_SOURCE as RAVEN_SOURCE
from ._source import RavenSource as RavenSource
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin

__all__ = [
    "RAVEN_SOURCE",
    "BackendContext",
    "BackendFactory",
    "BackendImportFailed",
    "BackendServices",
    "Memory",
    "MemoryBackend",
    "RavenSource",
    "SubstrateMissingBackend",
    "apply",
    "install_raven_shim",
    "memory_plugin",
    "raven_exception_name",
    "register_memory_backend",
    "resolve_backend_factory",
    "resolve_memory_backend",
    "source_error",
]
