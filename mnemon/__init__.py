"""mnemon: a composable memory-view runtime for LLM agents.

This module is the host's front door: the host, the profile, Views, reads, receipts and the
management plane. Plugin authors import from `mnemon.sdk`; `mnemon.tools`, `mnemon.cli` and
`mnemon.versions` serve their own audiences. Everything else in the package is private.
"""

import inspect as _inspect
import logging as _logging

from ._discovery import core_version as _core_version
from ._discovery import discover_plugins as discover_plugins
from ._errors import ActionError as ActionError
from ._errors import CompositionRejected as CompositionRejected
from ._errors import CompositionUnavailable as CompositionUnavailable
from ._errors import DefinitionError as DefinitionError
from ._errors import InstallError as InstallError
from ._errors import MaintenanceError as MaintenanceError
from ._errors import ManagementError as ManagementError
from ._errors import MnemonError as MnemonError
from ._errors import RevisionConflict as RevisionConflict
from ._errors import RouteError as RouteError
from ._errors import SourceError as SourceError
from ._errors import SourceErrorKind as SourceErrorKind
from ._host import ManagementClient as ManagementClient
from ._host import MemoryHost as MemoryHost
from ._host import MemoryTurn as MemoryTurn
from ._host import Unmount as Unmount
from ._install import MemoryPlugin as MemoryPlugin
from ._models import ActionDescriptor as ActionDescriptor
from ._models import ActionOffer as ActionOffer
from ._models import Authorize as Authorize
from ._models import CompositionRequest as CompositionRequest
from ._models import Diagnostic as Diagnostic
from ._models import Evidence as Evidence
from ._models import EvidenceItem as EvidenceItem
from ._models import EvidenceLimits as EvidenceLimits
from ._models import ExtensionRecord as ExtensionRecord
from ._models import Fragment as Fragment
from ._models import GrantRecord as GrantRecord
from ._models import Guidance as Guidance
from ._models import HostSettings as HostSettings
from ._models import InstalledContribution as InstalledContribution
from ._models import MaintenanceEntry as MaintenanceEntry
from ._models import MaintenanceRefusal as MaintenanceRefusal
from ._models import MaintenanceReport as MaintenanceReport
from ._models import MaintenanceTask as MaintenanceTask
from ._models import MaintenanceTaskDraft as MaintenanceTaskDraft
from ._models import MaintenanceTrigger as MaintenanceTrigger
from ._models import ManagementDescriptor as ManagementDescriptor
from ._models import ManagementEntry as ManagementEntry
from ._models import ManagementField as ManagementField
from ._models import ManagementOperation as ManagementOperation
from ._models import ManagementRequest as ManagementRequest
from ._models import ManagementResult as ManagementResult
from ._models import MutationReceipt as MutationReceipt
from ._models import ProvidedCapability as ProvidedCapability
from ._models import ReadGrant as ReadGrant
from ._models import RecordDeleteResult as RecordDeleteResult
from ._models import RecordKind as RecordKind
from ._models import RecordOutcome as RecordOutcome
from ._models import RecordPage as RecordPage
from ._models import RecordWriteResult as RecordWriteResult
from ._models import RegistrySnapshot as RegistrySnapshot
from ._models import Reminders as Reminders
from ._models import RouteDescriptor as RouteDescriptor
from ._models import Scope as Scope
from ._models import SourceConsistency as SourceConsistency
from ._models import SourceProvenance as SourceProvenance
from ._models import SourceUsage as SourceUsage
from ._models import TextPart as TextPart
from ._models import View as View
from ._models import ViewBudget as ViewBudget
from ._models import ViewRef as ViewRef
from ._models import ViewRoute as ViewRoute
from ._observe import hookimpl as hookimpl
from ._profile import Profile as Profile
from ._profile import ProfileEntry as ProfileEntry
from ._profile import load_profile as load_profile
from ._text import visible_json as visible_json
from ._text import visible_text as visible_text
from ._wake import render_wake as render_wake

__version__ = _core_version()
"""The installed core's version (the `mnemon-runtime` distribution)."""

# a library never configures logging; hosts attach their own handlers to "mnemon"
_logging.getLogger("mnemon").addHandler(_logging.NullHandler())


__all__ = [
    "ActionDescriptor",
    "ActionError",
    "ActionOffer",
    "Authorize",
    "CompositionRejected",
    "CompositionRequest",
    "CompositionUnavailable",
    "DefinitionError",
    "Diagnostic",
    "Evidence",
    "EvidenceItem",
    "EvidenceLimits",
    "ExtensionRecord",
    "Fragment",
    "GrantRecord",
    "Guidance",
    "HostSettings",
    "InstallError",
    "InstalledContribution",
    "MaintenanceEntry",
    "MaintenanceError",
    "MaintenanceRefusal",
    "MaintenanceReport",
    "MaintenanceTask",
    "MaintenanceTaskDraft",
    "MaintenanceTrigger",
    "ManagementClient",
    "ManagementDescriptor",
    "ManagementEntry",
    "ManagementError",
    "ManagementField",
    "ManagementOperation",
    "ManagementRequest",
    "ManagementResult",
    "MemoryHost",
    "MemoryPlugin",
    "MemoryTurn",
    "MnemonError",
    "MutationReceipt",
    "Profile",
    "ProfileEntry",
    "ProvidedCapability",
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
    "Scope",
    "SourceConsistency",
    "SourceError",
    "SourceErrorKind",
    "SourceProvenance",
    "SourceUsage",
    "TextPart",
    "Unmount",
    "View",
    "ViewBudget",
    "ViewRef",
    "ViewRoute",
    "discover_plugins",
    "hookimpl",
    "load_profile",
    "render_wake",
    "visible_json",
    "visible_text",
]

# tracebacks and reprs name the public module, where callers import these from (functions and
# errors only: a model or dataclass resolves its annotations from its own module)
for _name in __all__:
    _export = globals()[_name]
    if _inspect.isfunction(_export) or (
        _inspect.isclass(_export) and issubclass(_export, BaseException)
    ):
        _export.__module__ = __name__
del _name, _export

# the author SDK lived here before `mnemon.sdk`; its old names still resolve, with a warning
_MOVED_TO_SDK = frozenset(
    {
        "CaptureSlotValue",
        "ComposeRequest",
        "ConfigPath",
        "ConfigurationField",
        "EmbedQueryRequest",
        "EmbedderDefinition",
        "EmbedderManifest",
        "Embedding",
        "EmbeddingError",
        "ExtensionContribution",
        "ExtensionRequest",
        "FactsRequest",
        "ManageRequest",
        "MemoryContributions",
        "MemorySource",
        "MutationRequest",
        "PluginContext",
        "PluginDescriptor",
        "PolicyRequest",
        "ProjectionRequest",
        "ProjectionSlotValue",
        "ProjectionSpec",
        "QueryRequest",
        "QueryVector",
        "RouteReader",
        "ScopePartition",
        "Segment",
        "SegmentAnswer",
        "SegmentRequest",
        "SelectionSlotValue",
        "SourceAction",
        "SourceCandidate",
        "SourceDefinition",
        "SourceFacts",
        "SourceInit",
        "SourceManifest",
        "SourceRoute",
        "SourceSelection",
        "SourceTelemetry",
        "StrategyConfiguration",
        "StrategyDefinition",
        "StrategyManifest",
        "StrategyTurn",
        "VectorSpace",
        "ViewContribution",
        "ViewExtensionDefinition",
        "ViewSpec",
        "allocate_characters",
        "check_memory_text",
        "check_query_vector",
        "check_segment_answer",
        "configuration_digest",
        "create_mutation_receipt",
        "define_embedder",
        "define_memory_plugin",
        "define_memory_source",
        "define_memory_strategy",
        "define_strategy_configuration",
        "define_view_extension",
        "guarded_call",
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
    }
)


def __getattr__(name: str) -> object:
    if name not in _MOVED_TO_SDK:
        raise AttributeError(f"module 'mnemon' has no attribute {name!r}")
    import warnings

    from . import sdk

    warnings.warn(
        f"mnemon.{name} moved to mnemon.sdk.{name}: import it from mnemon.sdk "
        "(the old name goes in a later release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(sdk, name)
