"""A long-term memory written from the maintenance contract's text, answering as a test says.

It keeps memories in a dict, declares a writable, grouped `memory` kind and the `write-scope`
preflight, and answers the preflight `ok` (its one group), `empty` (deny-all), `malformed`
(another shape), `other-view` (another View's id) or `other-source` (another Source's key).
"""

from __future__ import annotations

from typing import Any

from mnemon.sdk import (
    FactsRequest,
    ManagementResult,
    ManageRequest,
    MutationReceipt,
    MutationRequest,
    PluginContext,
    ProjectionRequest,
    QueryRequest,
    ReadGrant,
    SourceError,
    SourceFacts,
    SourceInit,
    ViewContribution,
    create_mutation_receipt,
    define_memory_source,
    install_memory,
)

ANSWERS = ("ok", "empty", "malformed", "other-view", "other-source")

_TEXT = {"type": "string", "minLength": 1, "maxLength": 4_000}


def _manifest(type_id: str) -> dict[str, Any]:
    return {
        "type_id": type_id,
        "package_name": "archive-probe",
        "role": "durable-evidence",
        "capabilities": ["project", "recall", "write"],
        "consistency": "namespace-pinned-live-read",
        "routes": [
            {
                "id": "recall",
                "description": "Recall memories.",
                "capability": "recall",
                "input_schema": {
                    "type": "object",
                    "properties": {"query": _TEXT},
                    "required": ["query"],
                    "additionalProperties": False,
                },
                "max_calls": 2,
            }
        ],
        "actions": [
            {
                "id": "store",
                "description": "Store a memory.",
                "capability": "write",
                "input_schema": {
                    "type": "object",
                    "properties": {"text": _TEXT},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            }
        ],
        "management": {
            "label": "Archive probe",
            "description": "Memories kept in a dict.",
            "records": [
                {
                    "id": "memory",
                    "label": "Memory",
                    "description": "A memory.",
                    "record_schema": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "space": {"type": "string"},
                            "text": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["space", "text"],
                        "additionalProperties": False,
                    },
                    "readable": True,
                    "writable": True,
                    "label_field": "text",
                    "group_field": "space",
                    "key_fields": ["space", "text"],
                }
            ],
            "write_scope": True,
        },
    }


class ArchiveProbe:
    """The plugin: mount it as a long-term memory answering the preflight with `answer`."""

    def __init__(self, answer: str = "ok", type_id: str = "archive-probe") -> None:
        assert answer in ANSWERS
        self.answer = answer
        self.memories: dict[str, dict[str, Any]] = {}
        self.preflights = 0
        self.definition = define_memory_source(_manifest(type_id), self._create)

    def apply(self, ctx: PluginContext) -> None:
        install_memory(ctx, sources=[self.definition])

    def _create(self, init: SourceInit) -> _Runtime:
        return _Runtime(self, init.instance_key)


class _Runtime:
    def __init__(self, probe: ArchiveProbe, key: str) -> None:
        self.probe = probe
        self.key = key

    async def facts(self, request: FactsRequest) -> SourceFacts:
        return SourceFacts(
            instance_key=self.key,
            type_id=self.probe.definition.type_id,
            role="durable-evidence",
            availability="ready",
            revision="probe-1",
            capabilities=("project", "recall", "write"),
            route_ids=("recall",),
            action_ids=("store",),
        )

    async def project(self, request: ProjectionRequest) -> ViewContribution:
        return ViewContribution(
            grant=ReadGrant(source_key=self.key, value={"probe": self.key}), revision="probe-1"
        )

    async def query(self, request: QueryRequest) -> Any:
        raise SourceError("unsupported", "the probe does not recall")

    async def mutate(self, request: MutationRequest) -> MutationReceipt:
        return create_mutation_receipt(request, completion="accepted")

    async def manage(self, request: ManageRequest) -> ManagementResult:
        operation = request.operation.id
        if operation == "write-scope":
            return self._write_scope(request)
        if operation == "records-read":
            records = list(self.probe.memories.values())
            output: Any = {"records": records, "next_cursor": None, "groups": ["kept"]}
        elif operation == "records-write":
            results = []
            for index, item in enumerate(request.input["records"]):
                memory_id = f"p-{item['idempotency_key'][-12:]}"
                replayed = memory_id in self.probe.memories
                self.probe.memories[memory_id] = {"id": memory_id, **item["record"]}
                results.append(
                    {"index": index, "completion": "committed", "id": memory_id,
                     "replayed": replayed}
                )  # fmt: skip
            output = {"results": results}
        else:
            raise SourceError("invalid_payload", "no such operation")
        return ManagementResult(
            source_key=self.key, operation=operation, output=output, revision="probe-1"
        )

    def _write_scope(self, request: ManageRequest) -> ManagementResult:
        self.probe.preflights += 1
        asked = request.input["write_scope"]
        answer = self.probe.answer
        scope: dict[str, Any] = {
            "view_id": asked["view_id"],
            "source_key": self.key,
            "groups": [] if answer == "empty" else ["kept"],
        }
        if answer == "other-view":
            scope["view_id"] = "view:another"
        if answer == "other-source":
            scope["source_key"] = "source:elsewhere"
        output: Any = {"write_scope": scope}
        if answer == "malformed":
            output = {"write_scope": {"view": asked["view_id"], "groups": "kept"}}
        return ManagementResult(source_key=self.key, operation="write-scope", output=output)
