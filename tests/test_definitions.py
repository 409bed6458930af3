"""The author SDK's `define_*` helpers: validated, frozen, errors name the field."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pydantic
import pytest

import mnemon.sdk


def _create(init: mnemon.sdk.SourceInit) -> Any:
    return None


def _compose(*args: object) -> Any:
    return None


def _contribute(request: mnemon.sdk.ExtensionRequest) -> Any:
    return {}


def _route(**changes: object) -> dict[str, Any]:
    route: dict[str, Any] = {
        "id": "search",
        "description": "Search the notes",
        "capability": "search",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
    return route | changes


def _action(**changes: object) -> dict[str, Any]:
    action: dict[str, Any] = {
        "id": "add",
        "description": "Add a note",
        "capability": "write",
        "input_schema": {"type": "object"},
    }
    return action | changes


def _source_manifest(**changes: object) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "type_id": "notes",
        "package_name": "mnemon-example-notes",
        "role": "notes",
        "capabilities": ["project", "search", "write"],
        "consistency": "exact-snapshot",
        "routes": [_route()],
        "actions": [_action()],
    }
    return manifest | changes


def _strategy_manifest(**changes: object) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "type_id": "focus",
        "package_name": "mnemon-example-focus",
        "supported_source_roles": ["notes", "narrative"],
        "max_sources": 4,
        "max_routes": 8,
        "max_actions": 8,
        "extension_slots": ["selection", "focus"],
    }
    return manifest | changes


_PLUGIN: dict[str, Any] = {
    "package_name": "mnemon-example-notes",
    "label": "Notes",
    "description": "File-backed notes",
    "roles": ["source"],
    "provides": ["notes"],
}


def _starts(field: str, *words: str) -> str:
    """A pattern: the message opens with `field:` and then contains `words` in order."""
    return "^" + re.escape(f"{field}:") + "".join(f".*{re.escape(word)}" for word in words)


# ------------------------------------------------------------------------- Sources


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        pytest.param({"type_id": "Notes"}, _starts("manifest.type_id"), id="type-id-uppercase"),
        pytest.param({"type_id": "1notes"}, _starts("manifest.type_id"), id="type-id-digit-first"),
        pytest.param({"type_id": "a" * 129}, _starts("manifest.type_id"), id="type-id-129-chars"),
        pytest.param({"type_id": ""}, _starts("manifest.type_id"), id="type-id-empty"),
        pytest.param({"type_id": 5}, _starts("manifest.type_id"), id="type-id-not-a-string"),
        pytest.param(
            {"package_name": "bad name"}, _starts("manifest.package_name"), id="package-with-space"
        ),
        pytest.param(
            {"package_name": "-notes"}, _starts("manifest.package_name"), id="package-dash-first"
        ),
        pytest.param({"role": "Notes"}, _starts("manifest.role"), id="role-uppercase"),
        pytest.param({"role": "my_role"}, _starts("manifest.role"), id="role-underscore"),
        pytest.param(
            {"capabilities": ["project", "search", "write", "teleport"]},
            _starts("manifest.capabilities[3]"),
            id="unknown-capability",
        ),
        pytest.param(
            {"capabilities": [], "routes": [], "actions": []},
            _starts("manifest.capabilities"),
            id="empty-capabilities",
        ),
        pytest.param(
            {"capabilities": ["project", "search", "write", "search"]},
            _starts("manifest.capabilities", "duplicate capability"),
            id="duplicate-capability",
        ),
        pytest.param(
            {"consistency": "eventual"}, _starts("manifest.consistency"), id="unknown-consistency"
        ),
        pytest.param(
            {"routes": [_route(max_calls=0)]},
            _starts("manifest.routes[0].max_calls", "1"),
            id="route-max-calls-0",
        ),
        pytest.param(
            {"routes": [_route(max_calls=101)]},
            _starts("manifest.routes[0].max_calls", "100"),
            id="route-max-calls-101",
        ),
        pytest.param(
            {"routes": [_route(max_calls=True)]},
            _starts("manifest.routes[0].max_calls"),
            id="route-max-calls-bool",
        ),
        pytest.param(
            {"routes": [_route(max_results=0)]},
            _starts("manifest.routes[0].max_results"),
            id="route-max-results-0",
        ),
        pytest.param(
            {"routes": [_route(capability="read")]},
            _starts("manifest.routes[0].capability", "'read' is not among"),
            id="route-capability-undeclared",
        ),
        pytest.param(
            {"actions": [_action(capability="forget")]},
            _starts("manifest.actions[0].capability", "'forget' is not among"),
            id="action-capability-undeclared",
        ),
        pytest.param(
            {"routes": [_route(), _route(description="again")]},
            _starts("manifest.routes", "duplicate route id"),
            id="duplicate-route-ids",
        ),
        pytest.param(
            {"actions": [_action(), _action(description="again")]},
            _starts("manifest.actions", "duplicate action id"),
            id="duplicate-action-ids",
        ),
        pytest.param(
            {"actions": [_action(id="search")]},
            _starts("manifest.actions", "id 'search' also names a route"),
            id="route-and-action-share-id",
        ),
        pytest.param(
            {"routes": [_route(id="Search")]}, _starts("manifest.routes[0].id"), id="bad-route-id"
        ),
        pytest.param(
            {"routes": [_route(input_schema={"type": "string"})]},
            _starts("manifest.routes[0].input_schema", '"type": "object"'),
            id="input-schema-not-object",
        ),
        pytest.param(
            {"routes": [_route(input_schema={"type": "object", "properties": 5})]},
            _starts("manifest.routes[0].input_schema", "invalid JSON Schema", "properties"),
            id="input-schema-invalid",
        ),
        pytest.param(
            {"actions": [_action(input_schema={"type": "object", "required": "query"})]},
            _starts("manifest.actions[0].input_schema", "invalid JSON Schema", "required"),
            id="action-input-schema-invalid",
        ),
        pytest.param(
            {"routes": [_route(input_schema="object")]},
            _starts("manifest.routes[0].input_schema"),
            id="input-schema-not-a-dict",
        ),
        pytest.param(
            {"partition_keys": ["user_id", "team"]},
            _starts("manifest.partition_keys[1]", "'team' is not a scope id (one of tenant_id"),
            id="partition-key-not-a-scope-id",
        ),
        pytest.param(
            {"partition_keys": ["workspace", "workspace"]},
            _starts("manifest.partition_keys[1]", "'workspace' is listed twice"),
            id="partition-key-twice",
        ),
        pytest.param(
            {"partition_keys": "user_id"},
            _starts("manifest.partition_keys"),
            id="partition-keys-not-a-list",
        ),
        pytest.param({"extra": 1}, _starts("manifest.extra"), id="unknown-manifest-key"),
        pytest.param(
            {"routes": [_route(limit=3)]},
            _starts("manifest.routes[0].limit"),
            id="unknown-route-key",
        ),
    ],
)
def test_source_manifest_rejects_malformed_field(changes: dict[str, Any], pattern: str) -> None:
    with pytest.raises(mnemon.DefinitionError, match=pattern):
        mnemon.sdk.define_memory_source(_source_manifest(**changes), _create)


def test_a_route_limit_promising_more_than_its_ceiling_is_refused() -> None:
    # the model and `mnemon recall --limit` read the limit's maximum: one number, not two
    limit = {"type": "integer", "minimum": 1, "maximum": 50}
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "limit": limit}}
    route = _route(input_schema=schema, max_results=20)
    with pytest.raises(mnemon.DefinitionError) as refused:
        mnemon.sdk.define_memory_source(_source_manifest(routes=[route]), _create)
    assert str(refused.value).startswith("manifest.routes[0]: input_schema: limit allows up to 50")
    assert "max_results is 20" in str(refused.value)
    # at the ceiling, or with no ceiling to disagree with, the route is fine
    for fine in (_route(input_schema=schema, max_results=50), _route(input_schema=schema)):
        mnemon.sdk.define_memory_source(_source_manifest(routes=[fine]), _create)


def test_source_manifest_missing_field_is_named() -> None:
    manifest = _source_manifest()
    del manifest["consistency"]
    with pytest.raises(mnemon.DefinitionError, match=_starts("manifest.consistency")):
        mnemon.sdk.define_memory_source(manifest, _create)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"type_id": "a" * 128}, id="type-id-128-chars"),
        pytest.param({"type_id": "a"}, id="type-id-1-char"),
        pytest.param({"routes": [_route(max_calls=1)]}, id="route-max-calls-1"),
        pytest.param({"routes": [_route(max_calls=100)]}, id="route-max-calls-100"),
        pytest.param({"routes": [], "actions": []}, id="no-routes-or-actions"),
        pytest.param({"consistency": "namespace-pinned-live-read"}, id="namespace-pinned"),
    ],
)
def test_source_manifest_accepts_boundary_values(changes: dict[str, Any]) -> None:
    definition = mnemon.sdk.define_memory_source(_source_manifest(**changes), _create)
    for field, value in changes.items():
        if field not in ("routes", "actions"):
            assert getattr(definition.manifest, field) == value


def test_source_factory_must_be_callable() -> None:
    with pytest.raises(mnemon.DefinitionError, match=_starts("create", "callable")):
        mnemon.sdk.define_memory_source(_source_manifest(), "not a factory")  # type: ignore[arg-type]


def test_valid_source_definition_is_frozen() -> None:
    definition = mnemon.sdk.define_memory_source(_source_manifest(), _create)
    assert isinstance(definition, mnemon.sdk.SourceDefinition)
    assert isinstance(definition.manifest, mnemon.sdk.SourceManifest)
    assert definition.type_id == "notes"
    assert definition.package_name == "mnemon-example-notes"
    assert definition.create is _create
    assert definition.manifest.capabilities == ("project", "search", "write")
    assert definition.manifest.routes[0].max_calls == 1  # the default
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        definition.manifest.type_id = "other"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        definition.manifest.routes[0].max_calls = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.create = _create  # type: ignore[misc]
    with pytest.raises(TypeError, match="frozen"):
        definition.manifest.routes[0].input_schema["type"] = "array"  # type: ignore[index]
    assert type(definition.manifest.routes) is tuple


def test_source_definition_accepts_a_manifest_model() -> None:
    manifest = mnemon.sdk.SourceManifest.model_validate(_source_manifest())
    assert mnemon.sdk.define_memory_source(manifest, _create).manifest == manifest


# ------------------------------------------------------------------------- Strategies


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        pytest.param({"type_id": "Focus"}, _starts("manifest.type_id"), id="type-id-uppercase"),
        pytest.param(
            {"package_name": "bad name"}, _starts("manifest.package_name"), id="bad-package-name"
        ),
        pytest.param({"max_sources": 0}, _starts("manifest.max_sources"), id="max-sources-0"),
        pytest.param({"max_sources": 1001}, _starts("manifest.max_sources"), id="max-sources-1001"),
        pytest.param({"max_routes": 0}, _starts("manifest.max_routes"), id="max-routes-0"),
        pytest.param({"max_actions": 1001}, _starts("manifest.max_actions"), id="max-actions-1001"),
        pytest.param(
            {"max_sources": "4"}, _starts("manifest.max_sources"), id="max-sources-as-string"
        ),
        pytest.param(
            {"supported_source_roles": ["*", "notes"]},
            _starts("manifest.supported_source_roles", '"*"'),
            id="star-with-another-role",
        ),
        pytest.param(
            {"supported_source_roles": []},
            _starts("manifest.supported_source_roles"),
            id="empty-roles",
        ),
        pytest.param(
            {"supported_source_roles": ["Notes"]},
            _starts("manifest.supported_source_roles", "'Notes'"),
            id="bad-role-id",
        ),
        pytest.param(
            {"supported_source_roles": ["notes", "notes"]},
            _starts("manifest.supported_source_roles", "duplicate"),
            id="duplicate-roles",
        ),
        pytest.param(
            {"extension_slots": ["focus", "focus"]},
            _starts("manifest.extension_slots", "duplicate slot"),
            id="duplicate-extension-slots",
        ),
        pytest.param(
            {"extension_slots": ["Focus"]},
            _starts("manifest.extension_slots[0]"),
            id="bad-extension-slot",
        ),
        pytest.param({"extra": True}, _starts("manifest.extra"), id="unknown-manifest-key"),
    ],
)
def test_strategy_manifest_rejects_malformed_field(changes: dict[str, Any], pattern: str) -> None:
    with pytest.raises(mnemon.DefinitionError, match=pattern):
        mnemon.sdk.define_memory_strategy(_strategy_manifest(**changes), _compose)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"supported_source_roles": ["*"]}, id="star-alone"),
        pytest.param({"max_sources": 1, "max_routes": 1, "max_actions": 1}, id="maxima-1"),
        pytest.param(
            {"max_sources": 1000, "max_routes": 1000, "max_actions": 1000}, id="maxima-1000"
        ),
        pytest.param({"extension_slots": []}, id="no-slots"),
    ],
)
def test_strategy_manifest_accepts_boundary_values(changes: dict[str, Any]) -> None:
    definition = mnemon.sdk.define_memory_strategy(_strategy_manifest(**changes), _compose)
    for field, value in changes.items():
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(definition.manifest, field) == expected


def test_strategy_star_role_supports_every_role() -> None:
    star = mnemon.sdk.define_memory_strategy(
        _strategy_manifest(supported_source_roles=["*"]), _compose
    )
    named = mnemon.sdk.define_memory_strategy(_strategy_manifest(), _compose)
    assert star.manifest.supports_role("anything")
    assert named.manifest.supports_role("notes")
    assert not named.manifest.supports_role("durable-evidence")


@pytest.mark.parametrize(
    ("compose", "create_turn", "field"),
    [
        pytest.param("not callable", None, "compose", id="compose-not-callable"),
        pytest.param(_compose, 5, "create_turn", id="create-turn-not-callable"),
    ],
)
def test_strategy_functions_must_be_callable(compose: Any, create_turn: Any, field: str) -> None:
    with pytest.raises(mnemon.DefinitionError, match=_starts(field)):
        mnemon.sdk.define_memory_strategy(_strategy_manifest(), compose, create_turn)


def test_valid_strategy_definition_is_frozen() -> None:
    definition = mnemon.sdk.define_memory_strategy(_strategy_manifest(), _compose, _compose)
    assert isinstance(definition, mnemon.sdk.StrategyDefinition)
    assert definition.type_id == "focus"
    assert definition.package_name == "mnemon-example-focus"
    assert definition.manifest.supported_source_roles == ("notes", "narrative")
    assert definition.create_turn is _compose
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        definition.manifest.max_sources = 9  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.compose = _compose  # type: ignore[misc]


# ------------------------------------------------------------------------- plugin descriptors


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        pytest.param({"provides": []}, _starts("plugin.provides"), id="empty-provides"),
        pytest.param({"roles": ["sauce"]}, _starts("plugin.roles[0]"), id="unknown-role"),
        pytest.param({"roles": []}, _starts("plugin.roles"), id="empty-roles"),
        pytest.param({"roles": "source"}, _starts("plugin.roles"), id="bare-string-roles"),
        pytest.param(
            {"roles": ["source", "source"]},
            _starts("plugin.roles", "duplicate role"),
            id="duplicate-role",
        ),
        pytest.param(
            {"requires": ["notes"]},
            _starts("plugin.requires", "may not require what it provides", "'notes'"),
            id="requires-what-it-provides",
        ),
        pytest.param(
            {"requires": ["source.notes", "source.notes"]},
            _starts("plugin.requires", "duplicate capability"),
            id="duplicate-requirement",
        ),
        pytest.param(
            {"requires": "source.notes"}, _starts("plugin.requires"), id="bare-string-requires"
        ),
        pytest.param(
            {"provides": ["notes", "notes"]},
            _starts("plugin.provides", "duplicate capability"),
            id="duplicate-provided",
        ),
        pytest.param(
            {"provides": ["Notes"]}, _starts("plugin.provides[0].id"), id="bad-capability-id"
        ),
        pytest.param(
            {"provides": [{"id": "notes", "exclusive": "yes"}]},
            _starts("plugin.provides[0].exclusive"),
            id="exclusive-not-bool",
        ),
        pytest.param(
            {"package_name": "bad name"}, _starts("plugin.package_name"), id="bad-package-name"
        ),
        pytest.param({"label": ""}, _starts("plugin.label"), id="empty-label"),
        pytest.param({"description": ""}, _starts("plugin.description"), id="empty-description"),
    ],
)
def test_plugin_descriptor_rejects_malformed_field(changes: dict[str, Any], pattern: str) -> None:
    with pytest.raises(mnemon.DefinitionError, match=pattern):
        mnemon.sdk.define_memory_plugin(**(_PLUGIN | changes))


def test_plugin_descriptor_rejects_bare_string_provides() -> None:
    # "notes" is a slip for ["notes"]; it must not become the capabilities n, o, t, e, s
    with pytest.raises(mnemon.DefinitionError, match=_starts("plugin.provides")):
        mnemon.sdk.define_memory_plugin(**(_PLUGIN | {"provides": "notes"}))


def test_valid_plugin_descriptor_is_frozen_and_normalized() -> None:
    descriptor = mnemon.sdk.define_memory_plugin(
        "mnemon-example-notes",
        "Notes",
        "File-backed notes",
        roles=["source", "strategy-extension"],
        provides=["notes", {"id": "notes.index", "exclusive": True}],
        requires=["source.narrative"],
    )
    assert isinstance(descriptor, mnemon.sdk.PluginDescriptor)
    assert descriptor.roles == ("source", "strategy-extension")
    assert descriptor.provides == (
        mnemon.sdk.ProvidedCapability(id="notes"),
        mnemon.sdk.ProvidedCapability(id="notes.index", exclusive=True),
    )
    assert descriptor.provides[0].exclusive is False
    assert descriptor.requires == ("source.narrative",)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        descriptor.label = "Other"  # type: ignore[misc]


# ------------------------------------------------------------------------- View extensions


@pytest.mark.parametrize(
    ("arguments", "pattern"),
    [
        pytest.param({"slot": "Selection"}, _starts("extension.slot"), id="slot-uppercase"),
        pytest.param({"slot": ""}, _starts("extension.slot"), id="slot-empty"),
        pytest.param(
            {"slot": "focus"},
            _starts("extension.slot", "'focus'", "strategy_type_id"),
            id="custom-slot-for-any-strategy",
        ),
        pytest.param({"type_id": "Scoped"}, _starts("extension.type_id"), id="type-id-uppercase"),
        pytest.param({"type_id": "a" * 129}, _starts("extension.type_id"), id="type-id-129-chars"),
        pytest.param(
            {"package_name": "bad name"}, _starts("extension.package_name"), id="bad-package-name"
        ),
        pytest.param(
            {"strategy_type_id": "Focus"},
            _starts("extension.strategy_type_id"),
            id="bad-strategy-type-id",
        ),
        pytest.param({"contribute": None}, _starts("contribute"), id="contribute-not-callable"),
    ],
)
def test_view_extension_rejects_malformed_field(arguments: dict[str, Any], pattern: str) -> None:
    base: dict[str, Any] = {
        "type_id": "scoped",
        "package_name": "mnemon-strategy-scoped",
        "slot": "selection",
        "contribute": _contribute,
    }
    with pytest.raises(mnemon.DefinitionError, match=pattern):
        mnemon.sdk.define_view_extension(**(base | arguments))


@pytest.mark.parametrize("slot", ["selection", "projection", "capture"])
def test_view_extension_accepts_standard_slot_for_any_strategy(slot: str) -> None:
    extension = mnemon.sdk.define_view_extension(
        "scoped", "mnemon-strategy-scoped", slot, _contribute
    )
    assert extension.slot == slot
    assert extension.strategy_type_id == "*"


def test_view_extension_accepts_custom_slot_for_named_strategy() -> None:
    extension = mnemon.sdk.define_view_extension(
        "pin", "mnemon-example-focus", "focus", _contribute, strategy_type_id="focus"
    )
    assert isinstance(extension, mnemon.sdk.ViewExtensionDefinition)
    assert (extension.type_id, extension.slot, extension.strategy_type_id) == (
        "pin",
        "focus",
        "focus",
    )
    assert extension.contribute is _contribute
    with pytest.raises(dataclasses.FrozenInstanceError):
        extension.slot = "selection"  # type: ignore[misc]


def test_definition_errors_are_mnemon_value_errors() -> None:
    assert issubclass(mnemon.DefinitionError, mnemon.MnemonError)
    assert issubclass(mnemon.DefinitionError, ValueError)
