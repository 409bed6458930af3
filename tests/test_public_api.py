"""The public surface: each front door has one exact, sorted `__all__`, every name documented."""

from __future__ import annotations

import importlib
import inspect
import logging
import typing

import pydantic
import pytest

import mnemon.sdk

# Adding or removing a public name is a decision: change this list on purpose.
EXPECTED_ALL = [
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

# the plugin author's door: everything a plugin uses, the names hosts use too included
SDK_ALL = [
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


# each front door's exact `__all__`: a host's, and a plugin author's
DOORS = {"mnemon": EXPECTED_ALL, "mnemon.sdk": SDK_ALL}
EXPORTS = [(door, name) for door, names in DOORS.items() for name in names]


def _export(door: str, name: str) -> object:
    return getattr(importlib.import_module(door), name)


def _exports_where(test: typing.Callable[[object], bool]) -> list[tuple[str, str]]:
    return [(door, name) for door, name in EXPORTS if test(_export(door, name))]


def _is_model(value: object) -> bool:
    return inspect.isclass(value) and issubclass(value, pydantic.BaseModel)


def _is_error(value: object) -> bool:
    return inspect.isclass(value) and issubclass(value, BaseException)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_all_is_exactly_the_expected_list_sorted_without_duplicates(door: str) -> None:
    names = importlib.import_module(door).__all__
    assert names == DOORS[door]
    assert names == sorted(set(names))


@pytest.mark.parametrize(("door", "name"), EXPORTS)
def test_every_public_name_resolves(door: str, name: str) -> None:
    assert _export(door, name) is not None


def test_names_in_both_doors_are_the_same_objects() -> None:
    shared = set(EXPECTED_ALL) & set(SDK_ALL)
    assert {
        name for name in shared if getattr(mnemon, name) is not getattr(mnemon.sdk, name)
    } == set()
    # everything a host uses but the author's door lacks is the host itself
    assert set(EXPECTED_ALL) - set(SDK_ALL) == {
        "HostSettings", "ManagementClient", "MemoryHost", "MemoryTurn", "Profile",
        "ProfileEntry", "Unmount", "discover_plugins", "load_profile", "render_wake",
    }  # fmt: skip


def test_functions_and_errors_only_an_author_uses_say_they_live_in_the_sdk() -> None:
    for name in set(SDK_ALL) - set(EXPECTED_ALL):
        value = getattr(mnemon.sdk, name)
        if inspect.isfunction(value) or _is_error(value):
            assert value.__module__ == "mnemon.sdk", name


# author names that arrived with `mnemon.sdk`, or after it: they were never on `mnemon`
NEW_IN_SDK = {
    "ArchiveMove", "Configuration", "MaintenancePlan", "MaintenancePolicy", "MaintenanceRequest",
    "MaintenanceSource", "SourceKeys", "StringList", "Text", "Textarea", "WriteScope",
    "configuration_fields", "configuration_schema", "describe_schema_error", "waiting",
}  # fmt: skip
MOVED = sorted(set(SDK_ALL) - set(EXPECTED_ALL) - NEW_IN_SDK)


@pytest.mark.parametrize("name", MOVED)
def test_an_author_name_still_resolves_from_mnemon_with_a_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"mnemon.{name} moved to mnemon.sdk.{name}"):
        assert getattr(mnemon, name) is getattr(mnemon.sdk, name)


@pytest.mark.parametrize("module", ["storage", "postgres"])
def test_the_moved_storage_modules_still_import_with_a_warning(module: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"mnemon.{module} moved to mnemon.sdk.{module}"):
        old = importlib.import_module(f"mnemon.{module}")
    assert old is importlib.import_module(f"mnemon.sdk.{module}")


@pytest.mark.parametrize("name", ["nothing_here", *sorted(NEW_IN_SDK)])
def test_an_unknown_name_is_still_an_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match=f"no attribute '{name}'"):
        getattr(mnemon, name)


# documented public modules: importing one binds its name on the package
PUBLIC_MODULES = {"cli", "sdk", "tools", "versions"}
# each public module's exact `__all__`; what it exports says it lives there (`__module__`)
MODULE_EXPORTS = {
    "mnemon.cli": [
        "CommandError", "FlagError", "Printer", "echo_json", "identity", "json_option",
        "management_entry", "mutate", "printer_of", "profile_path", "progress",
        "read_text_argument", "require_confirmation", "run_with_host", "scope_of", "shown_path",
    ],
    "mnemon.sdk.storage": [
        "PRIVATE_FILE_MODE", "PRIVATE_FOLDER_MODE", "hold_lock", "open_private", "open_regular",
        "private_folder", "remove_leftovers", "remove_leftovers_in", "switch_to_wal",
        "temporary_path", "tighten_file", "write_atomically",
    ],
    "mnemon.tools": [
        "MAX_TOOL_NAME", "TOOL_NAME_PATTERN", "Tool", "ToolDispatcher", "ToolFormat",
        "ToolResult", "ToolSet", "evidence_text", "receipt_text",
    ],
    "mnemon.sdk.postgres": [
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
    # importing a moved module by its old name binds it too (the warning test does)
    assert public - PUBLIC_MODULES - {"storage", "postgres"} == set(mnemon.__all__)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_star_import_gives_exactly_all(door: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {door} import *", namespace)
    assert {name for name in namespace if name != "__builtins__"} == set(DOORS[door])


def _own_doc(obj: object) -> str:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    return (doc or "").strip()


@pytest.mark.parametrize(("door", "name"), EXPORTS)
def test_every_public_name_has_a_docstring(door: str, name: str) -> None:
    obj = _export(door, name)
    assert inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj)
    doc = _own_doc(obj)
    assert doc, f"{door}.{name} has no docstring"
    # a dataclass without a docstring gets its signature as one; that is not documentation
    assert not doc.startswith(f"{name}("), f"{door}.{name} has only a generated docstring"


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


@pytest.mark.parametrize(("door", "name"), _exports_where(inspect.isclass))
def test_public_methods_of_public_classes_have_docstrings(door: str, name: str) -> None:
    undocumented = [
        attribute
        for attribute, function in _public_members(_export(door, name))  # type: ignore[arg-type]
        if not (function.__doc__ or "").strip()
    ]
    assert undocumented == []


@pytest.mark.parametrize("door", sorted(DOORS))
def test_module_has_a_docstring(door: str) -> None:
    assert (importlib.import_module(door).__doc__ or "").strip()


@pytest.mark.parametrize(("door", "name"), _exports_where(_is_model))
def test_public_wire_models_are_frozen_and_forbid_extra_fields(door: str, name: str) -> None:
    config = _export(door, name).model_config  # type: ignore[attr-defined]
    assert config.get("frozen") is True
    assert config.get("extra") == "forbid"


@pytest.mark.parametrize(("door", "name"), _exports_where(_is_error))
def test_public_errors_share_one_root(door: str, name: str) -> None:
    assert issubclass(_export(door, name), mnemon.MnemonError)  # type: ignore[arg-type]


def test_library_does_not_configure_logging() -> None:
    # a NullHandler keeps "no handler" warnings away; hosts attach their own handlers
    handlers = logging.getLogger("mnemon").handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)
    assert logging.getLogger("mnemon").level == logging.NOTSET


@pytest.mark.parametrize(("door", "name"), _exports_where(_is_error))
def test_public_errors_show_their_public_module(door: str, name: str) -> None:
    error = _export(door, name)
    home = "mnemon" if name in EXPECTED_ALL else "mnemon.sdk"
    assert error.__module__ == home  # type: ignore[attr-defined]
    assert f"{home}.{name}" in repr(error)


def _models_in(annotation: object) -> set[type]:
    found: set[type] = set()
    if _is_model(annotation):
        found.add(annotation)  # type: ignore[arg-type]
    for argument in typing.get_args(annotation):
        found |= _models_in(argument)
    return found


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_model_reachable_from_a_public_model_is_public(door: str) -> None:
    public = {_export(door, name) for name in DOORS[door]}
    missing = set()
    for name in DOORS[door]:
        model = _export(door, name)
        if not _is_model(model):
            continue
        for field in model.model_fields.values():  # type: ignore[attr-defined]
            missing |= {found.__name__ for found in _models_in(field.annotation) - public}
    assert missing == set()
