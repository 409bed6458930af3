"""View extensions: slot ownership, activation, and their bounded, deterministic contributions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Strict, StringConstraints, ValidationError

from .._definitions import STANDARD_SLOTS, ExtensionRequest, ViewExtensionDefinition
from .._errors import CompositionRejected, InstallError
from .._json import JsonValueError, canonical_json, digest, freeze_json
from .._models import (
    CaptureSlotValue,
    ComposeRequest,
    ExtensionContribution,
    ExtensionRecord,
    ProjectionSlotValue,
    SelectionSlotValue,
    SourceCandidate,
    WireModel,
    describe_validation_error,
)
from .installed import Installed

__all__ = ["CONTRIBUTION_LIMIT", "check_slot_ownership", "collect_contributions"]

CONTRIBUTION_LIMIT = 64_000
_Key = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]


def _definition(item: Installed) -> ViewExtensionDefinition:
    definition = item.definition
    assert isinstance(definition, ViewExtensionDefinition)
    return definition


def _collide(first: ViewExtensionDefinition, second: ViewExtensionDefinition) -> bool:
    if first.slot != second.slot:
        return False
    return "*" in (first.strategy_type_id, second.strategy_type_id) or (
        first.strategy_type_id == second.strategy_type_id
    )


def check_slot_ownership(installed: Sequence[Installed], batch: Sequence[Installed]) -> None:
    """Reject a batch whose extensions would share a slot with an owner (one owner per slot).

    Raises:
        InstallError: naming the slot and both instance keys; nothing is installed.
    """
    for index, item in enumerate(batch):
        if not isinstance(item.definition, ViewExtensionDefinition):
            raise InstallError(f"{item.instance_key}: expected a define_view_extension() result")
        for other in (*installed, *batch[:index]):
            if _collide(_definition(other), item.definition):
                raise InstallError(
                    f"slot {item.definition.slot!r} is already owned by {other.instance_key}; "
                    f"{item.instance_key} cannot also fill it"
                )


_SLOT_VALUES: dict[str, type[WireModel]] = {
    "selection": SelectionSlotValue,
    "projection": ProjectionSlotValue,
    "capture": CaptureSlotValue,
}
assert set(_SLOT_VALUES) == set(STANDARD_SLOTS)


def _contribute_once(item: Installed, request: ExtensionRequest) -> tuple[Any, bytes]:
    definition = _definition(item)
    try:
        produced = definition.contribute(request)
    except Exception:
        raise CompositionRejected(
            f"View extension {item.instance_key} contribute() failed"
        ) from None
    try:
        value = freeze_json(produced, what=f"View extension {item.instance_key} contribution")
    except JsonValueError as exc:
        raise CompositionRejected(str(exc)) from None
    return value, canonical_json(value)


def collect_contributions(
    active: Sequence[Installed],
    request: ComposeRequest,
    sources: tuple[SourceCandidate, ...],
) -> tuple[tuple[ExtensionContribution, ...], tuple[ExtensionRecord, ...]]:
    """Run each active extension twice, check the results, and return them sorted by key.

    Raises:
        CompositionRejected: a contribution failed, was not JSON, differed between the two
            calls, exceeded 64,000 characters, or broke its standard slot's rules.
    """
    contributions = []
    records = []
    for item in sorted(active, key=lambda installed: installed.instance_key):
        definition = _definition(item)
        ext_request = ExtensionRequest(
            instance_key=item.instance_key,
            configuration=item.configuration,
            request=request,
            sources=sources,
        )
        value, first = _contribute_once(item, ext_request)
        _, second = _contribute_once(item, ext_request)
        if first != second:
            raise CompositionRejected(
                f"View extension {item.instance_key} is not deterministic: two contribute() "
                "calls on the same input differ"
            )
        if len(first.decode()) > CONTRIBUTION_LIMIT:
            raise CompositionRejected(
                f"View extension {item.instance_key} contribution exceeds "
                f"{CONTRIBUTION_LIMIT:,} characters of canonical JSON"
            )
        model = _SLOT_VALUES.get(definition.slot)
        if model is not None:
            try:
                model.model_validate(value)
            except ValidationError as exc:
                problem = describe_validation_error(exc, f"{definition.slot} value")
                raise CompositionRejected(
                    f"View extension {item.instance_key}: {problem}"
                ) from None
        contributions.append(
            ExtensionContribution(
                instance_key=item.instance_key,
                type_id=definition.type_id,
                slot=definition.slot,
                value=value,
            )
        )
        records.append(
            ExtensionRecord(
                instance_key=item.instance_key,
                slot=definition.slot,
                digest=digest("extension", value),
            )
        )
    return tuple(contributions), tuple(records)
