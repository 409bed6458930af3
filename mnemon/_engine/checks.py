"""The checks the engine runs on what a Source answers and on what callers send it.

Composition, turn execution and the management plane all hold a Source to its manifest and
refuse bad input the same way; they share these instead of borrowing from each other.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from .._errors import CompositionRejected, MnemonError, SourceError, _CodedError
from .._json import FrozenDict, JsonValueError, freeze_json, json_size_exceeds
from .._models import SourceFacts, validate_model
from .._schema import input_problems
from .generation import SourceSlot

__all__ = ["checked_facts", "checked_input", "source_failure"]

# a Source's failure is logged where it has always been, whichever plane met it
_log = logging.getLogger("mnemon.execution")


def checked_facts(slot: SourceSlot, value: Any) -> SourceFacts:
    """`value` as the facts of `slot`'s Source, refused when it contradicts the manifest.

    Raises:
        CompositionRejected: the facts are malformed, or claim what the manifest does not.
    """
    subject = f"Memory Source {slot.key} facts()"
    facts = validate_model(SourceFacts, value, subject=subject, error=CompositionRejected)
    manifest = slot.manifest
    problem = None
    if facts.instance_key != slot.key:
        problem = f"reports instance key {facts.instance_key!r}"
    elif facts.type_id != manifest.type_id:
        problem = f"reports type {facts.type_id!r}, manifest says {manifest.type_id!r}"
    elif facts.role != manifest.role:
        problem = f"reports role {facts.role!r}, manifest says {manifest.role!r}"
    else:
        extra = sorted(set(facts.capabilities) - set(manifest.capabilities))
        routes = sorted(set(facts.route_ids) - {route.id for route in manifest.routes})
        actions = sorted(set(facts.action_ids) - {action.id for action in manifest.actions})
        if extra:
            problem = f"claims undeclared capability {extra[0]!r}"
        elif routes:
            problem = f"claims undeclared route {routes[0]!r}"
        elif actions:
            problem = f"claims undeclared action {actions[0]!r}"
    if problem is not None:
        raise CompositionRejected(f"{subject} contradicts its manifest: {problem}")
    return facts


def checked_input(
    schema: Mapping[str, Any],
    value: object,
    subject: str,
    error: type[MnemonError],
    *,
    max_bytes: int,
    size_checked: bool = False,
) -> FrozenDict:
    """Freeze `value` and check it against `schema`; `error` names the property at fault.

    The size is checked first, with a walk bounded by `max_bytes`, so an oversized input is
    refused before any copy or schema work can stall the event loop; `size_checked` says the
    caller already walked this very value against the same limit.

    Raises:
        MnemonError: of class `error`, for oversized, non-JSON, non-object or schema-breaking
            input.
    """
    if not size_checked and json_size_exceeds(value, max_bytes):
        raise error(  # type: ignore[call-arg]
            f"{subject}: larger than {max_bytes} bytes of JSON (the host's max_input_bytes)",
            code="input-too-large",
        )
    try:
        frozen = freeze_json({} if value is None else value, what=subject)
    except JsonValueError as exc:
        raise error(str(exc), code="invalid-input") from None  # type: ignore[call-arg]
    if not isinstance(frozen, FrozenDict):
        raise error(f"{subject}: must be a JSON object", code="invalid-input")  # type: ignore[call-arg]
    problems = input_problems(schema, frozen)
    if problems:
        raise error(f"{subject}: {'; '.join(problems)}", code="invalid-input")  # type: ignore[call-arg]
    return frozen


def source_failure(
    where: str, failure: BaseException, error: type[_CodedError], **extra: Any
) -> NoReturn:
    """Raise `error` for a Source's failure without copying its text (only a SourceError code)."""
    if isinstance(failure, SourceError):
        raise error(
            f"{where} failed ({failure.code})",
            code=failure.code,
            retryable=failure.retryable,
            kind=failure.kind,
            retry_after=failure.retry_after,
            origin_code=failure.origin_code,
            **extra,
        ) from failure
    _log.warning("%s failed", where)
    _log.debug("%s failure", where, exc_info=failure)
    raise error(f"{where} failed", code="source-failed", **extra) from None
