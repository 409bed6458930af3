"""The `spaces` Source: durable long-term memory in named spaces, served by Providers.

Mount the package itself: `await host.mount(mnemon_source_spaces, instance_id="spaces",
config={"data_dir": "/abs/folder"})`. The Provider SDK (`define_space_provider` and its
models) lets other stores plug in; `mnemon_source_spaces.testing` holds the Provider suite.
"""

from ._evidence import RELATED_SCORE as RELATED_SCORE
from ._evidence import STRONG_SCORE as STRONG_SCORE
from ._evidence import tier as tier
from ._manifest import MANIFEST as MANIFEST
from ._plugin import SPACES_SOURCE as SPACES_SOURCE
from ._plugin import apply as apply
from ._plugin import define_spaces_source as define_spaces_source
from ._plugin import memory_plugin as memory_plugin
from ._provider import PROVIDER_CAPABILITIES as PROVIDER_CAPABILITIES
from ._provider import VECTOR_METHODS as VECTOR_METHODS
from ._provider import EntityCount as EntityCount
from ._provider import EntityIndexRequest as EntityIndexRequest
from ._provider import EntityIndexResult as EntityIndexResult
from ._provider import ForgetRequest as ForgetRequest
from ._provider import ForgetResult as ForgetResult
from ._provider import GetRequest as GetRequest
from ._provider import GetResult as GetResult
from ._provider import LinkRequest as LinkRequest
from ._provider import LinkResult as LinkResult
from ._provider import ListRequest as ListRequest
from ._provider import ListResult as ListResult
from ._provider import Memory as Memory
from ._provider import MemoryVectors as MemoryVectors
from ._provider import MissingVectorsRequest as MissingVectorsRequest
from ._provider import MissingVectorsResult as MissingVectorsResult
from ._provider import NamespaceStatus as NamespaceStatus
from ._provider import ProviderCapability as ProviderCapability
from ._provider import ProviderError as ProviderError
from ._provider import ProviderInit as ProviderInit
from ._provider import ProviderStatus as ProviderStatus
from ._provider import RegisterSpaceRequest as RegisterSpaceRequest
from ._provider import RegisterSpaceResult as RegisterSpaceResult
from ._provider import RelatedMemory as RelatedMemory
from ._provider import RelatedRequest as RelatedRequest
from ._provider import RelatedResult as RelatedResult
from ._provider import RememberRequest as RememberRequest
from ._provider import RememberResult as RememberResult
from ._provider import SearchHit as SearchHit
from ._provider import SearchRequest as SearchRequest
from ._provider import SearchResult as SearchResult
from ._provider import SegmentVector as SegmentVector
from ._provider import SpaceProvider as SpaceProvider
from ._provider import SpaceProviderDefinition as SpaceProviderDefinition
from ._provider import SpaceProviderManifest as SpaceProviderManifest
from ._provider import StatusRequest as StatusRequest
from ._provider import StoreVectorsRequest as StoreVectorsRequest
from ._provider import StoreVectorsResult as StoreVectorsResult
from ._provider import VectorSearchRequest as VectorSearchRequest
from ._provider import define_space_provider as define_space_provider
from ._provider import get_many as get_many
from ._provider import remember_many as remember_many
from ._sqlite import SQLITE_PROVIDER as SQLITE_PROVIDER
from ._sqlite import SqliteProvider as SqliteProvider

__all__ = [
    "MANIFEST",
    "PROVIDER_CAPABILITIES",
    "RELATED_SCORE",
    "SPACES_SOURCE",
    "SQLITE_PROVIDER",
    "STRONG_SCORE",
    "VECTOR_METHODS",
    "EntityCount",
    "EntityIndexRequest",
    "EntityIndexResult",
    "ForgetRequest",
    "ForgetResult",
    "GetRequest",
    "GetResult",
    "LinkRequest",
    "LinkResult",
    "ListRequest",
    "ListResult",
    "Memory",
    "MemoryVectors",
    "MissingVectorsRequest",
    "MissingVectorsResult",
    "NamespaceStatus",
    "ProviderCapability",
    "ProviderError",
    "ProviderInit",
    "ProviderStatus",
    "RegisterSpaceRequest",
    "RegisterSpaceResult",
    "RelatedMemory",
    "RelatedRequest",
    "RelatedResult",
    "RememberRequest",
    "RememberResult",
    "SearchHit",
    "SearchRequest",
    "SearchResult",
    "SegmentVector",
    "SpaceProvider",
    "SpaceProviderDefinition",
    "SpaceProviderManifest",
    "StatusRequest",
    "StoreVectorsRequest",
    "StoreVectorsResult",
    "VectorSearchRequest",
    "apply",
    "define_space_provider",
    "define_spaces_source",
    "get_many",
    "memory_plugin",
    "remember_many",
    "tier",
]
