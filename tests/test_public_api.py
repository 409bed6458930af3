"""The public SDK surface: one exact, sorted `__all__`, every name documented."""

from __future__ import annotations

import importlib
import inspect
import logging
import typing

import pydantic
import pytest

import mnemon

# Adding or removing a public name is a decision: change this list on purpose.
EXPECTED_ALL = [
    "ActionDescriptor",
    "ActionError",
    "ActionOffer",
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
    "HostSettings",
    "InstallError",
    "InstalledContribution",
    "ManageRequest",
    "ManagementClient",
    "ManagementDescriptor",
    "ManagementEntry",
    "ManagementError",
    "ManagementField",
    "ManagementOperation",
    "ManagementRequest",
    "ManagementResult",
    "MemoryContributions",
    "MemoryHost",
    "MemoryPlugin",
    "MemorySource",
    "MemoryTurn",
    "MnemonError",
    "MutationReceipt",
    "MutationRequest",
    "PluginContext",
    "PluginDescriptor",
    "PolicyRequest",
    "Profile",
    "ProfileEntry",
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
    "StrategyConfiguration",
    "StrategyDefinition",
    "StrategyManifest",
    "StrategyTurn",
    "StringList",
    "Text",
    "TextPart",
    "Textarea",
    "Unmount",
    "VectorSpace",
    "View",
    "ViewBudget",
    "ViewContribution",
    "ViewExtensionDefinition",
    "ViewRef",
    "ViewRoute",
    "ViewSpec",
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
    "discover_plugins",
    "guarded_call",
    "hookimpl",
    "install_memory",
    "load_profile",
    "memory_text_schema",
    "mnemon_home",
    "parse_yaml",
    "read_configuration",
    "render_wake",
    "run_blocking",
    "scope_partition",
    "source_data_directory",
    "space_registration_conflict",
    "storage",
    "truncate_text",
    "visible_json",
    "visible_text",
]


def test_all_is_exactly_the_expected_list() -> None:
    assert mnemon.__all__ == EXPECTED_ALL


def test_all_is_sorted() -> None:
    assert mnemon.__all__ == sorted(mnemon.__all__)


def test_all_has_no_duplicates() -> None:
    assert len(set(mnemon.__all__)) == len(mnemon.__all__)


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(mnemon, name, None) is not None


# documented public modules: importing one binds its name on the package
PUBLIC_MODULES = {"cli", "postgres", "tools", "versions"}
# each public module's exact `__all__`; what it exports says it lives there (`__module__`)
MODULE_EXPORTS = {
    "mnemon.cli": [
        "CommandError", "FlagError", "Printer", "echo_json", "identity", "json_option",
        "management_entry", "mutate", "printer_of", "progress", "read_text_argument",
        "require_confirmation", "run_with_host", "scope_of", "shown_path",
    ],
    "mnemon.storage": [
        "PRIVATE_FILE_MODE", "PRIVATE_FOLDER_MODE", "hold_lock", "open_private", "open_regular",
        "private_folder", "remove_leftovers", "remove_leftovers_in", "temporary_path",
        "tighten_file", "write_atomically",
    ],
    "mnemon.tools": [
        "MAX_TOOL_NAME", "TOOL_NAME_PATTERN", "Tool", "ToolDispatcher", "ToolFormat",
        "ToolResult", "ToolSet", "evidence_text", "receipt_text",
    ],
    "mnemon.postgres": [
        "DatabaseErrorCode", "check_connection_string", "classify_database_error",
        "open_async_connection_pool", "open_connection_pool", "quiet_pool_logs",
    ],
    "mnemon.versions": ["RangeError", "Version", "VersionRange", "parse_range", "parse_version"],
}  # fmt: skip


@pytest.mark.parametrize("module_name", sorted(MODULE_EXPORTS))
def test_each_public_module_exports_exactly_its_names_from_itself(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == MODULE_EXPORTS[module_name]
    namespace: dict[str, object] = {}
    exec(f"from {module_name} import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == set(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module_name, name


def test_no_public_name_outside_all() -> None:
    public = {name for name in vars(mnemon) if not name.startswith("_")}
    assert public - PUBLIC_MODULES == set(mnemon.__all__)


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from mnemon import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == set(EXPECTED_ALL)


def _own_doc(obj: object) -> str:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    return (doc or "").strip()


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_every_public_name_has_a_docstring(name: str) -> None:
    obj = getattr(mnemon, name)
    assert inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj)
    doc = _own_doc(obj)
    assert doc, f"mnemon.{name} has no docstring"
    # a dataclass without a docstring gets its signature as one; that is not documentation
    assert not doc.startswith(f"{name}("), f"mnemon.{name} has only a generated docstring"


def _public_members(cls: type) -> list[tuple[str, object]]:
    members = []
    for attribute, value in vars(cls).items():
        if attribute.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else value
        function = getattr(function, "__func__", function)
        if inspect.isfunction(function):
            members.append((attribute, function))
    return members


@pytest.mark.parametrize(
    "name", [name for name in EXPECTED_ALL if inspect.isclass(getattr(mnemon, name))]
)
def test_public_methods_of_public_classes_have_docstrings(name: str) -> None:
    undocumented = [
        attribute
        for attribute, function in _public_members(getattr(mnemon, name))
        if not (function.__doc__ or "").strip()
    ]
    assert undocumented == []


def test_module_has_a_docstring() -> None:
    assert (mnemon.__doc__ or "").strip()


@pytest.mark.parametrize(
    "name",
    [
        name
        for name in EXPECTED_ALL
        if inspect.isclass(getattr(mnemon, name))
        and issubclass(getattr(mnemon, name), pydantic.BaseModel)
    ],
)
def test_public_wire_models_are_frozen_and_forbid_extra_fields(name: str) -> None:
    config = getattr(mnemon, name).model_config
    assert config.get("frozen") is True
    assert config.get("extra") == "forbid"


@pytest.mark.parametrize(
    "name",
    [
        name
        for name in EXPECTED_ALL
        if inspect.isclass(getattr(mnemon, name))
        and issubclass(getattr(mnemon, name), BaseException)
    ],
)
def test_public_errors_share_one_root(name: str) -> None:
    assert issubclass(getattr(mnemon, name), mnemon.MnemonError)


def test_library_does_not_configure_logging() -> None:
    # a NullHandler keeps "no handler" warnings away; hosts attach their own handlers
    handlers = logging.getLogger("mnemon").handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)
    assert logging.getLogger("mnemon").level == logging.NOTSET


@pytest.mark.parametrize(
    "name",
    [
        name
        for name in EXPECTED_ALL
        if inspect.isclass(getattr(mnemon, name))
        and issubclass(getattr(mnemon, name), BaseException)
    ],
)
def test_public_errors_show_their_public_module(name: str) -> None:
    error = getattr(mnemon, name)
    assert error.__module__ == "mnemon"
    assert f"mnemon.{name}" in repr(error)


def _models_in(annotation: object) -> set[type]:
    found: set[type] = set()
    if inspect.isclass(annotation) and issubclass(annotation, pydantic.BaseModel):
        found.add(annotation)
    for argument in typing.get_args(annotation):
        found |= _models_in(argument)
    return found


def test_every_model_reachable_from_a_public_model_is_public() -> None:
    public = {getattr(mnemon, name) for name in EXPECTED_ALL}
    missing = set()
    for name in EXPECTED_ALL:
        model = getattr(mnemon, name)
        if not (inspect.isclass(model) and issubclass(model, pydantic.BaseModel)):
            continue
        for field in model.model_fields.values():
            missing |= {found.__name__ for found in _models_in(field.annotation) - public}
    assert missing == set()
