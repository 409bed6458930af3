"""Plugins for the core's own tests, written against the public SDK only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnemon import Evidence, EvidenceItem, Fragment, MutationReceipt, ReadGrant
from mnemon.sdk import (
    ComposeRequest,
    ExtensionContribution,
    FactsRequest,
    MutationRequest,
    PluginContext,
    PluginDescriptor,
    ProjectionRequest,
    QueryRequest,
    SourceCandidate,
    SourceFacts,
    SourceInit,
    ViewContribution,
    ViewSpec,
    create_mutation_receipt,
    define_memory_source,
    define_memory_strategy,
    install_memory,
)

OBJECT = {"type": "object", "additionalProperties": False, "properties": {}}
QUERY = {
    "type": "object",
    "properties": {"query": {"type": "string", "maxLength": 200}},
    "additionalProperties": False,
}


def source_manifest(
    type_id: str = "fake",
    *,
    role: str = "notes",
    routes: Sequence[str] = ("lookup",),
    actions: Sequence[str] = ("store",),
    capabilities: Sequence[str] = ("project", "search", "write"),
    package_name: str = "mnemon-test-fake",
    consistency: str = "exact-snapshot",
) -> dict[str, Any]:
    return {
        "type_id": type_id,
        "package_name": package_name,
        "role": role,
        "capabilities": list(capabilities),
        "consistency": consistency,
        "routes": [
            {
                "id": route,
                "description": f"Look up {route}.",
                "capability": "search",
                "input_schema": QUERY,
                "max_calls": 2,
            }
            for route in routes
        ],
        "actions": [
            {
                "id": action,
                "description": f"Store {action}.",
                "capability": "write",
                "input_schema": OBJECT,
            }
            for action in actions
        ],
    }


Hook = Callable[..., Awaitable[Any]]


@dataclass
class Probe:
    """Shared, observable behaviour of every runtime one fake Source definition creates."""

    text: str = "remembered text"
    revision: str = "r1"
    hints: dict[str, Any] = field(default_factory=dict)
    on_facts: Hook | None = None
    on_project: Hook | None = None
    on_create: Callable[[SourceInit], None] | None = None
    on_query: Hook | None = None
    on_mutate: Hook | None = None
    queries: list[QueryRequest] = field(default_factory=list)
    mutations: list[MutationRequest] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    disposed: list[str] = field(default_factory=list)
    facts_calls: int = 0
    project_calls: int = 0
    project_requests: list[ProjectionRequest] = field(default_factory=list)
    inits: list[SourceInit] = field(default_factory=list)


class FakeSource:
    def __init__(self, init: SourceInit, manifest: dict[str, Any], probe: Probe) -> None:
        self.key = init.instance_key
        self.manifest = manifest
        self.probe = probe

    def default_facts(self) -> SourceFacts:
        return SourceFacts(
            instance_key=self.key,
            type_id=self.manifest["type_id"],
            role=self.manifest["role"],
            availability="ready",
            revision=self.probe.revision,
            capabilities=tuple(self.manifest["capabilities"]),
            route_ids=tuple(route["id"] for route in self.manifest["routes"]),
            action_ids=tuple(action["id"] for action in self.manifest["actions"]),
            hints=self.probe.hints,
        )

    async def facts(self, request: FactsRequest) -> SourceFacts:
        self.probe.facts_calls += 1
        if self.probe.on_facts is not None:
            return await self.probe.on_facts(self, request)  # type: ignore[no-any-return]
        return self.default_facts()

    def default_contribution(self, request: ProjectionRequest) -> ViewContribution:
        text = self.probe.text[: request.max_characters]
        fragments = (Fragment(source_key=self.key, mode=request.mode, text=text),) if text else ()
        return ViewContribution(
            fragments=fragments,
            grant=ReadGrant(
                source_key=self.key, value={"pinned": self.probe.text, "secret": "grant-token-42"}
            ),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        self.probe.project_calls += 1
        self.probe.project_requests.append(request)
        if self.probe.on_project is not None:
            return await self.probe.on_project(self, request)  # type: ignore[no-any-return]
        return self.default_contribution(request)

    async def query(self, request: QueryRequest) -> Evidence:
        self.probe.queries.append(request)
        if self.probe.on_query is not None:
            return await self.probe.on_query(self, request)  # type: ignore[no-any-return]
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self.key,
            items=(EvidenceItem(id="1", text=str(request.grant.value["pinned"])),),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        self.probe.mutations.append(request)
        if self.probe.on_mutate is not None:
            return await self.probe.on_mutate(self, request)  # type: ignore[no-any-return]
        return create_mutation_receipt(request, completion="accepted")

    async def dispose(self) -> None:
        self.probe.disposed.append(self.key)


class Plugin:
    """A plugin object: `apply(ctx)` installs the given definitions, plus a descriptor."""

    def __init__(
        self,
        *,
        sources: Sequence[Any] = (),
        strategies: Sequence[Any] = (),
        extensions: Sequence[Any] = (),
        descriptor: PluginDescriptor | None = None,
        fail_after_install: bool = False,
    ) -> None:
        self.sources = sources
        self.strategies = strategies
        self.extensions = extensions
        self.memory_plugin = descriptor
        self.fail_after_install = fail_after_install
        self.contexts: list[PluginContext] = []

    def apply(self, ctx: PluginContext) -> None:
        self.contexts.append(ctx)
        install_memory(
            ctx,
            sources=self.sources,
            strategies=self.strategies,
            view_extensions=self.extensions,
        )
        if self.fail_after_install:
            raise RuntimeError("apply failed after registering")


def fake_source(probe: Probe | None = None, **manifest: Any) -> tuple[Plugin, Probe]:
    """A plugin installing one fake Source, and the probe observing it."""
    probe = probe or Probe()
    spec = source_manifest(**manifest)

    def create(init: SourceInit) -> FakeSource:
        probe.inits.append(init)
        if probe.on_create is not None:
            probe.on_create(init)
        probe.created.append(init.instance_key)
        return FakeSource(init, spec, probe)

    return Plugin(sources=[define_memory_source(spec, create)]), probe


def select_all(
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
    *,
    type_id: str = "select-all",
    required: bool = False,
    mode: str = "eager",
) -> ViewSpec:
    """Select every available Source with all its routes and actions; split the budget."""
    chosen = [s for s in sources if s.facts.availability != "unavailable"]
    share = request.budget.max_projection_characters // max(1, len(chosen))
    return ViewSpec(
        strategy_type_id=type_id,
        sources=tuple(
            {
                "source_key": source.key,
                "required": required,
                "projection": {"mode": mode, "max_characters": share}
                if "project" in source.facts.capabilities
                else None,
                "route_ids": tuple(route.id for route in source.routes),
                "action_ids": tuple(action.id for action in source.actions),
            }
            for source in chosen
        ),
        explanation=f"all {len(chosen)} available Sources",
    )


def strategy_plugin(
    compose: Callable[..., Any] | None = None,
    *,
    type_id: str = "select-all",
    required: bool = False,
    roles: Sequence[str] = ("*",),
    max_sources: int = 32,
    max_routes: int = 64,
    max_actions: int = 64,
    extension_slots: Sequence[str] = (),
    descriptor: PluginDescriptor | None = None,
    create_turn: Callable[..., Any] | None = None,
) -> Plugin:
    """A plugin installing one Strategy (by default: select everything available)."""

    def default(request: Any, sources: Any, contributions: Any) -> ViewSpec:
        return select_all(request, sources, contributions, type_id=type_id, required=required)

    strategy = define_memory_strategy(
        {
            "type_id": type_id,
            "package_name": "mnemon-test-strategy",
            "supported_source_roles": list(roles),
            "max_sources": max_sources,
            "max_routes": max_routes,
            "max_actions": max_actions,
            "extension_slots": list(extension_slots),
        },
        compose or default,
        create_turn,
    )
    return Plugin(strategies=[strategy], descriptor=descriptor)
