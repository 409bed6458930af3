"""Host Nexent external memory providers (plugin.yaml directories) as mnemon Sources.

Mount the package: `await host.mount(mnemon_source_nexent, instance_id="mem0",
config={"plugin_dir": "/srv/memory-plugins", "plugin": {"name": "mem0", "api_key": "..."}})`.
"""

from ._config import mask_secret as mask_secret
from ._failures import NEXENT_FAILURES as NEXENT_FAILURES
from ._failures import ProviderFailure as ProviderFailure
from ._failures import nexent_code as nexent_code
from ._failures import provider_failure as provider_failure
from ._failures import source_error as source_error
from ._loader import PluginProblem as PluginProblem
from ._loader import PluginRecord as PluginRecord
from ._loader import ProviderDirectory as ProviderDirectory
from ._loader import build_provider as build_provider
from ._loader import config_problems as config_problems
from ._shim import install_nexent_shim as install_nexent_shim
from ._source import INGEST_SWITCH as INGEST_SWITCH
from ._source import NEXENT_SOURCE as NEXENT_SOURCE
from ._source import SEARCH_SWITCH as SEARCH_SWITCH
from ._source import SPAN_NAME as SPAN_NAME
from ._source import NexentSource as NexentSource
from ._source import apply as apply
from ._source import memory_plugin as memory_plugin

__all__ = [
    "INGEST_SWITCH",
    "NEXENT_FAILURES",
    "NEXENT_SOURCE",
    "SEARCH_SWITCH",
    "SPAN_NAME",
    "NexentSource",
    "PluginProblem",
    "PluginRecord",
    "ProviderDirectory",
    "ProviderFailure",
    "apply",
    "build_provider",
    "config_problems",
    "install_nexent_shim",
    "mask_secret",
    "memory_plugin",
    "nexent_code",
    "provider_failure",
    "source_error",
]
