"""The plugin author's front door: everything a Source, Strategy, View extension or embedder uses.

Hosts import from `mnemon` (the host, the profile, Views, receipts, management); plugin authors
import from here. The names both sides need (errors, `Scope`, `Evidence`, `View`, the
management and records models, ...) are the same objects in both. Two submodules hold what
only some plugins need: `mnemon.sdk.storage` (private, atomic, locked files) and
`mnemon.sdk.postgres` (connection pools and error mapping for PostgreSQL stores).

    from mnemon.sdk import SourceFacts, define_memory_plugin, define_memory_source, install_memory
"""

import inspect as _inspect

from .. import __all__ as _host_names
from .._blocking import waiting as waiting
from .._configuration import ConfigPath as ConfigPath
from .._configuration import Configuration as Configuration
from .._configuration import read_configuration as read_configuration
from .._definitions import ExtensionRequest as ExtensionRequest
from .._definitions import MaintenancePolicy as MaintenancePolicy
from .._definitions import MemorySource as MemorySource
from .._definitions import PluginDescriptor as PluginDescriptor
from .._definitions import ProvidedCapability as ProvidedCapability
from .._definitions import RouteReader as RouteReader
from .._definitions import SourceDefinition as SourceDefinition
from .._definitions import StrategyConfiguration as StrategyConfiguration
from .._definitions import StrategyDefinition as StrategyDefinition
from .._definitions import StrategyTurn as StrategyTurn
from .._definitions import ViewExtensionDefinition as ViewExtensionDefinition
from .._definitions import define_memory_plugin as define_memory_plugin
from .._definitions import define_memory_source as define_memory_source
from .._definitions import define_memory_strategy as define_memory_strategy
from .._definitions import define_strategy_configuration as define_strategy_configuration
from .._definitions import define_view_extension as define_view_extension
from .._embedding import EmbedderDefinition as EmbedderDefinition
from .._embedding import Embedding as Embedding
from .._embedding import EmbeddingError as EmbeddingError
from .._embedding import check_query_vector as check_query_vector
from .._embedding import check_segment_answer as check_segment_answer
from .._embedding import define_embedder as define_embedder
from .._embedding import space_registration_conflict as space_registration_conflict
from .._errors import ActionError as ActionError
from .._errors import CompositionRejected as CompositionRejected
from .._errors import CompositionUnavailable as CompositionUnavailable
from .._errors import DefinitionError as DefinitionError
from .._errors import InstallError as InstallError
from .._errors import MaintenanceError as MaintenanceError
from .._errors import ManagementError as ManagementError
from .._errors import MnemonError as MnemonError
from .._errors import RevisionConflict as RevisionConflict
from .._errors import RouteError as RouteError
from .._errors import SourceError as SourceError
from .._errors import SourceErrorKind as SourceErrorKind
from .._forms import ConfigurationField as ConfigurationField
from .._forms import SourceKeys as SourceKeys
from .._forms import StringList as StringList
from .._forms import Text as Text
from .._forms import Textarea as Textarea
from .._forms import configuration_fields as configuration_fields
from .._forms import configuration_schema as configuration_schema
from .._helpers import allocate_characters as allocate_characters
from .._helpers import create_mutation_receipt as create_mutation_receipt
from .._helpers import guarded_call as guarded_call
from .._helpers import mnemon_home as mnemon_home
from .._helpers import run_blocking as run_blocking
from .._helpers import source_data_directory as source_data_directory
from .._helpers import truncate_text as truncate_text
from .._install import MemoryContributions as MemoryContributions
from .._install import MemoryPlugin as MemoryPlugin
from .._install import PluginContext as PluginContext
from .._install import install_memory as install_memory
from .._json import configuration_digest as configuration_digest
from .._models import ActionDescriptor as ActionDescriptor
from .._models import ActionOffer as ActionOffer
from .._models import ArchiveMove as ArchiveMove
from .._models import Authorize as Authorize
from .._models import CaptureSlotValue as CaptureSlotValue
from .._models import ComposeRequest as ComposeRequest
from .._models import CompositionRequest as CompositionRequest
from .._models import Diagnostic as Diagnostic
from .._models import EmbedderManifest as EmbedderManifest
from .._models import EmbedQueryRequest as EmbedQueryRequest
from .._models import Evidence as Evidence
from .._models import EvidenceItem as EvidenceItem
from .._models import EvidenceLimits as EvidenceLimits
from .._models import ExtensionContribution as ExtensionContribution
from .._models import ExtensionRecord as ExtensionRecord
from .._models import FactsRequest as FactsRequest
from .._models import Fragment as Fragment
from .._models import GrantRecord as GrantRecord
from .._models import Guidance as Guidance
from .._models import InstalledContribution as InstalledContribution
from .._models import MaintenanceEntry as MaintenanceEntry
from .._models import MaintenancePlan as MaintenancePlan
from .._models import MaintenanceRefusal as MaintenanceRefusal
from .._models import MaintenanceReport as MaintenanceReport
from .._models import MaintenanceRequest as MaintenanceRequest
from .._models import MaintenanceSource as MaintenanceSource
from .._models import MaintenanceTask as MaintenanceTask
from .._models import MaintenanceTaskDraft as MaintenanceTaskDraft
from .._models import MaintenanceTrigger as MaintenanceTrigger
from .._models import ManagementDescriptor as ManagementDescriptor
from .._models import ManagementEntry as ManagementEntry
from .._models import ManagementField as ManagementField
from .._models import ManagementOperation as ManagementOperation
from .._models import ManagementRequest as ManagementRequest
from .._models import ManagementResult as ManagementResult
from .._models import ManageRequest as ManageRequest
from .._models import MutationReceipt as MutationReceipt
from .._models import MutationRequest as MutationRequest
from .._models import PolicyRequest as PolicyRequest
from .._models import ProjectionRequest as ProjectionRequest
from .._models import ProjectionSlotValue as ProjectionSlotValue
from .._models import ProjectionSpec as ProjectionSpec
from .._models import QueryRequest as QueryRequest
from .._models import QueryVector as QueryVector
from .._models import ReadGrant as ReadGrant
from .._models import RecordDeleteResult as RecordDeleteResult
from .._models import RecordKind as RecordKind
from .._models import RecordOutcome as RecordOutcome
from .._models import RecordPage as RecordPage
from .._models import RecordWriteResult as RecordWriteResult
from .._models import RegistrySnapshot as RegistrySnapshot
from .._models import Reminders as Reminders
from .._models import RouteDescriptor as RouteDescriptor
from .._models import Scope as Scope
from .._models import Segment as Segment
from .._models import SegmentAnswer as SegmentAnswer
from .._models import SegmentRequest as SegmentRequest
from .._models import SelectionSlotValue as SelectionSlotValue
from .._models import SourceAction as SourceAction
from .._models import SourceCandidate as SourceCandidate
from .._models import SourceConsistency as SourceConsistency
from .._models import SourceFacts as SourceFacts
from .._models import SourceInit as SourceInit
from .._models import SourceManifest as SourceManifest
from .._models import SourceProvenance as SourceProvenance
from .._models import SourceRoute as SourceRoute
from .._models import SourceSelection as SourceSelection
from .._models import SourceUsage as SourceUsage
from .._models import StrategyManifest as StrategyManifest
from .._models import TextPart as TextPart
from .._models import VectorSpace as VectorSpace
from .._models import View as View
from .._models import ViewBudget as ViewBudget
from .._models import ViewContribution as ViewContribution
from .._models import ViewRef as ViewRef
from .._models import ViewRoute as ViewRoute
from .._models import ViewSpec as ViewSpec
from .._models import WriteScope as WriteScope
from .._observe import SourceTelemetry as SourceTelemetry
from .._observe import hookimpl as hookimpl
from .._partitions import ScopePartition as ScopePartition
from .._partitions import scope_partition as scope_partition
from .._schema import describe_schema_error as describe_schema_error
from .._text import check_memory_text as check_memory_text
from .._text import memory_text_schema as memory_text_schema
from .._text import visible_json as visible_json
from .._text import visible_text as visible_text
from .._yaml import parse_yaml as parse_yaml
from . import postgres as postgres
from . import storage as storage

__all__ = [
    "ActionDescriptor",
    "ActionError",
    "ActionOffer",
    "ArchiveMove",
    "Authorize",
    "CaptureSlotValue",
    "ComposeRequest",
    "CompositionRejected",
    "CompositionRequest",
    "CompositionUnavailable",
    "ConfigPath",
    "Configuration",
    "ConfigurationField",
    "DefinitionError",
    "Diagnostic",
    "EmbedQueryRequest",
    "EmbedderDefinition",
    "EmbedderManifest",
    "Embedding",
    "EmbeddingError",
    "Evidence",
    "EvidenceItem",
    "EvidenceLimits",
    "ExtensionContribution",
    "ExtensionRecord",
    "ExtensionRequest",
    "FactsRequest",
    "Fragment",
    "GrantRecord",
    "Guidance",
    "InstallError",
    "InstalledContribution",
    "MaintenanceEntry",
    "MaintenanceError",
    "MaintenancePlan",
    "MaintenancePolicy",
    "MaintenanceRefusal",
    "MaintenanceReport",
    "MaintenanceRequest",
    "MaintenanceSource",
    "MaintenanceTask",
    "MaintenanceTaskDraft",
    "MaintenanceTrigger",
    "ManageRequest",
    "ManagementDescriptor",
    "ManagementEntry",
    "ManagementError",
    "ManagementField",
    "ManagementOperation",
    "ManagementRequest",
    "ManagementResult",
    "MemoryContributions",
    "MemoryPlugin",
    "MemorySource",
    "MnemonError",
    "MutationReceipt",
    "MutationRequest",
    "PluginContext",
    "PluginDescriptor",
    "PolicyRequest",
    "ProjectionRequest",
    "ProjectionSlotValue",
    "ProjectionSpec",
    "ProvidedCapability",
    "QueryRequest",
    "QueryVector",
    "ReadGrant",
    "RecordDeleteResult",
    "RecordKind",
    "RecordOutcome",
    "RecordPage",
    "RecordWriteResult",
    "RegistrySnapshot",
    "Reminders",
    "RevisionConflict",
    "RouteDescriptor",
    "RouteError",
    "RouteReader",
    "Scope",
    "ScopePartition",
    "Segment",
    "SegmentAnswer",
    "SegmentRequest",
    "SelectionSlotValue",
    "SourceAction",
    "SourceCandidate",
    "SourceConsistency",
    "SourceDefinition",
    "SourceError",
    "SourceErrorKind",
    "SourceFacts",
    "SourceInit",
    "SourceKeys",
    "SourceManifest",
    "SourceProvenance",
    "SourceRoute",
    "SourceSelection",
    "SourceTelemetry",
    "SourceUsage",
    "StrategyConfiguration",
    "StrategyDefinition",
    "StrategyManifest",
    "StrategyTurn",
    "StringList",
    "Text",
    "TextPart",
    "Textarea",
    "VectorSpace",
    "View",
    "ViewBudget",
    "ViewContribution",
    "ViewExtensionDefinition",
    "ViewRef",
    "ViewRoute",
    "ViewSpec",
    "WriteScope",
    "allocate_characters",
    "check_memory_text",
    "check_query_vector",
    "check_segment_answer",
    "configuration_digest",
    "configuration_fields",
    "configuration_schema",
    "create_mutation_receipt",
    "define_embedder",
    "define_memory_plugin",
    "define_memory_source",
    "define_memory_strategy",
    "define_strategy_configuration",
    "define_view_extension",
    "describe_schema_error",
    "guarded_call",
    "hookimpl",
    "install_memory",
    "memory_text_schema",
    "mnemon_home",
    "parse_yaml",
    "postgres",
    "read_configuration",
    "run_blocking",
    "scope_partition",
    "source_data_directory",
    "space_registration_conflict",
    "storage",
    "truncate_text",
    "visible_json",
    "visible_text",
    "waiting",
]

# what only authors use says it lives here, in tracebacks and reprs; a name hosts use as well
# keeps `mnemon` as its home (functions and errors only: a model or dataclass resolves its
# annotations from its own module)
for _name in set(__all__) - set(_host_names):
    _export = globals()[_name]
    if _inspect.isfunction(_export) or (
        _inspect.isclass(_export) and issubclass(_export, BaseException)
    ):
        _export.__module__ = __name__
del _name, _export
