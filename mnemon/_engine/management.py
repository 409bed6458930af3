"""The management plane: authenticated humans read and change Sources, never the model."""

from __future__ import annotations

import time

from .._errors import ManagementError, RevisionConflict
from .._models import (
    FactsRequest,
    ManagementEntry,
    ManagementRequest,
    ManagementResult,
    ManageRequest,
    Scope,
    management_operations,
    validate_model,
)
from .checks import checked_facts, checked_input, source_failure
from .generation import Generation
from .reads import call_source
from .records import checked_record_output

__all__ = ["current_revision", "management_catalog", "run_management"]


def management_catalog(generation: Generation) -> tuple[ManagementEntry, ...]:
    """Every Source with a management descriptor: its form and operations, never its data."""
    entries = []
    for slot in generation.sources:
        descriptor = slot.manifest.management
        if descriptor is None:
            continue
        entries.append(
            ManagementEntry(
                source_key=slot.key,
                type_id=slot.manifest.type_id,
                role=slot.manifest.role,
                package_name=slot.plan.provenance.package_name,
                label=descriptor.label,
                description=descriptor.description,
                fields=descriptor.fields,
                operations=management_operations(descriptor),
                records=descriptor.records,
                partition_keys=slot.partition_keys,
            )
        )
    return tuple(entries)


async def current_revision(generation: Generation, key: str, scope: Scope) -> str | None:
    """The revision fresh facts report for `key` in `scope`.

    Raises:
        ManagementError: unknown Source, or its facts() failed or timed out.
    """
    slot = generation.by_key.get(key)
    if slot is None:
        raise ManagementError(f"Source {key} is not installed", code="unknown-source")
    request = FactsRequest(instance_key=key, scope=scope, scenario="management")
    facts, failure, timed_out = await call_source(
        lambda: slot.runtime.facts(request), generation.plan.settings.source_timeout
    )
    where = f"management {key}: Memory Source {key} facts()"
    if timed_out:
        raise ManagementError(f"{where} timed out", code="timeout", retryable=True, source_key=key)
    if failure is not None:
        source_failure(where, failure, ManagementError, source_key=key)
    return checked_facts(slot, facts).revision


async def run_management(
    generation: Generation, request: ManagementRequest, *, size_checked: bool = False
) -> ManagementResult:
    """Run one management operation; a mutation needs confirmation and a fresh revision.

    `size_checked` says the host already checked the input's size against
    `max_input_bytes` before copying it into the request: it is not walked again.

    Raises:
        ManagementError: unknown Source or operation, invalid input, unconfirmed mutation,
            or a failing Source (its text is never copied).
        RevisionConflict: the expected revision is not the Source's current one.
    """
    key = request.source_key
    slot = generation.by_key.get(key)
    descriptor = slot.manifest.management if slot is not None else None
    if slot is None or descriptor is None:
        raise ManagementError(f"Source {key} has no management plane", code="unknown-source")
    operations = management_operations(descriptor)
    operation = next((op for op in operations if op.id == request.operation), None)
    if operation is None:
        raise ManagementError(
            f"Source {key} has no management operation {request.operation!r}",
            code="unknown-operation",
        )
    subject = f"management {key}/{operation.id} input"
    settings = generation.plan.settings
    value = checked_input(
        operation.input_schema,
        request.input,
        subject,
        ManagementError,
        max_bytes=settings.max_input_bytes,
        size_checked=size_checked,
    )
    deadline = settings.source_timeout
    runtime = slot.runtime
    if operation.kind == "mutate":
        if not request.confirmed:
            raise ManagementError(
                f"management {key}/{operation.id} changes memory: confirm it (confirmed=True)",
                code="unconfirmed",
            )
        if request.expected_revision is None:
            raise ManagementError(
                f"management {key}/{operation.id} needs the expected revision it changes",
                code="invalid-input",
            )
        current = await current_revision(generation, key, request.scope)
        if current != request.expected_revision:
            raise RevisionConflict(
                f"revision conflict: {key} is at {current!r}, not {request.expected_revision!r}"
            )
    manage_request = ManageRequest(
        instance_key=key,
        scope=request.scope,
        operation=operation,
        input=value,
        expected_revision=request.expected_revision,
    )
    started = time.perf_counter()
    produced, failure, timed_out = await call_source(
        lambda: runtime.manage(manage_request), deadline
    )
    generation.observe_call("manage", key, failure, timed_out, started)
    where = f"management {key}/{operation.id}: Memory Source {key} manage()"
    if timed_out:
        raise ManagementError(f"{where} timed out", code="timeout", retryable=True, source_key=key)
    if failure is not None:
        if isinstance(failure, RevisionConflict):
            raise failure  # the Source re-checked inside its own lock
        source_failure(where, failure, ManagementError, source_key=key)
    if not isinstance(produced, ManagementResult):
        produced = {"source_key": key, "operation": operation.id, "output": produced}
    result = validate_model(
        ManagementResult, produced, subject=f"{where} result", error=ManagementError
    )
    if (result.source_key, result.operation) != (key, operation.id):
        raise ManagementError(f"{where} returned another operation's result", code="contract")
    # a record operation's output has the core's shape, whatever the Source answered
    return checked_record_output(descriptor, operation.id, value, result, where)
