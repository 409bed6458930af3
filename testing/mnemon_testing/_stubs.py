"""`StubSource`: an in-memory Source for Strategy and extension authors to compose against."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mnemon import Evidence, EvidenceItem, Fragment, MutationReceipt, ReadGrant
from mnemon.sdk import (
    FactsRequest,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_source,
    install_memory,
)

__all__ = ["StubSource"]

# the capability each conventional route or action id needs
_CAPABILITY = {
    "inspect": "status",
    "search": "search",
    "recall": "recall",
    "related": "related",
    "read": "read",
    "browse": "browse",
    "link": "link",
    "forget": "forget",
}
_INPUT = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 2_000},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "id": {"type": "string", "maxLength": 200},
        "text": {"type": "string", "maxLength": 10_000},
    },
    "additionalProperties": False,
}
Items = Sequence[tuple[str, str]] | Callable[[QueryRequest], Sequence[tuple[str, str]]]


class StubSource:
    """A plugin installing one in-memory Source with the role, routes and actions you choose.

    Every query returns `items` (`(id, text)` pairs, or a function of the request), and
    every write is accepted (`completion="accepted"`); `queries` and `mutations` record what
    the Source received, `projections` the projection requests.
    """

    def __init__(
        self,
        role: str = "notes",
        *,
        type_id: str = "stub",
        text: str = "stub memory",
        routes: Sequence[str] = (),
        actions: Sequence[str] = (),
        items: Items = (),
        availability: str = "ready",
        max_calls: int = 3,
    ) -> None:
        self.role = role
        self.text = text
        self.items = items
        self.availability = availability
        self.queries: list[QueryRequest] = []
        self.mutations: list[MutationRequest] = []
        self.projections: list[ProjectionRequest] = []
        capabilities = {"project", *(_CAPABILITY.get(r, "search") for r in routes)}
        capabilities |= {_CAPABILITY.get(a, "write") for a in actions}
        self.manifest: dict[str, Any] = {
            "type_id": type_id,
            "package_name": "mnemon-testing",
            "role": role,
            "capabilities": sorted(capabilities),
            "consistency": "exact-snapshot",
            "routes": [
                {
                    "id": route,
                    "description": f"Stub route {route}.",
                    "capability": _CAPABILITY.get(route, "search"),
                    "input_schema": _INPUT,
                    "max_calls": max_calls,
                    "max_results": 100,
                }
                for route in routes
            ],
            "actions": [
                {
                    "id": action,
                    "description": f"Stub action {action}.",
                    "capability": _CAPABILITY.get(action, "write"),
                    "input_schema": _INPUT,
                }
                for action in actions
            ],
        }
        self.definition = define_memory_source(self.manifest, self._create)

    def apply(self, ctx: PluginContext) -> None:
        """Install the stub Source."""
        install_memory(ctx, sources=[self.definition])

    def _create(self, init: SourceInit) -> _StubRuntime:
        return _StubRuntime(self, init.instance_key)


class _StubRuntime:
    def __init__(self, stub: StubSource, key: str) -> None:
        self.stub = stub
        self.key = key

    async def facts(self, request: FactsRequest) -> SourceFacts:
        manifest = self.stub.manifest
        return SourceFacts.model_validate(
            {
                "instance_key": self.key,
                "type_id": manifest["type_id"],
                "role": manifest["role"],
                "availability": self.stub.availability,
                "revision": "stub-1",
                "capabilities": manifest["capabilities"],
                "route_ids": [route["id"] for route in manifest["routes"]],
                "action_ids": [action["id"] for action in manifest["actions"]],
            }
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        self.stub.projections.append(request)
        text = self.stub.text[: request.max_characters]
        fragments = (Fragment(source_key=self.key, mode=request.mode, text=text),) if text else ()
        return ViewContribution(
            fragments=fragments, grant=ReadGrant(source_key=self.key, value="stub-1")
        )

    async def query(self, request: QueryRequest) -> Evidence:
        self.stub.queries.append(request)
        items: Any = self.stub.items
        pairs = items(request) if callable(items) else items
        return Evidence(
            view_id=request.view.id,
            route_id=request.route.id,
            source_key=self.key,
            items=tuple(EvidenceItem(id=item_id, text=text) for item_id, text in pairs),
        )

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        self.stub.mutations.append(request)
        return create_mutation_receipt(request, completion="accepted")
