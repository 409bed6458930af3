"""Composition: facts, extensions, a twice-run Strategy, projection, and the pinned View."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from .._definitions import StrategyDefinition
from .._errors import CompositionRejected
from .._json import canonical_json
from .._models import (
    ComposeRequest,
    CompositionRequest,
    Diagnostic,
    ExtensionContribution,
    FactsRequest,
    ProjectionRequest,
    SourceCandidate,
    SourceFacts,
    SourceSelection,
    ViewContribution,
    ViewSpec,
    from_checked,
    validate_model,
)
from .assembly import PinnedView, assemble
from .checks import checked_facts
from .extensions import collect_contributions
from .generation import Generation, SourceSlot
from .reads import ReadOutcome, read_concurrently

__all__ = ["compose_view"]

_M = TypeVar("_M", bound=BaseModel)

_PHASE_WORDS = {"timeout": "timed out", "failed": "failed", "invalid": "broke its contract"}
_log = logging.getLogger("mnemon.compose")


def _outage(key: str, phase: str, failure: str) -> Diagnostic:
    # `invalid`: the answer broke the contract; a plugin's broken answer costs only that plugin
    return Diagnostic(
        code=f"source-{phase}-{failure}",
        message=f"Memory Source {key} {phase}() {_PHASE_WORDS[failure]}",
        key=key,
    )


def _contract_broken(key: str, phase: str, broken: CompositionRejected) -> None:
    # the rule's wording may quote what the Source answered: only at DEBUG, for its author
    _log.warning("Memory Source %s %s() broke its contract", key, phase)
    _log.debug("Memory Source %s %s(): %s", key, phase, broken)


def _reported(key: str, facts: SourceFacts) -> Diagnostic:
    # the Source speaks only through a coded reason: no free text reaches the View
    reason = f" ({facts.reason})" if facts.reason else ""
    return Diagnostic(
        code=f"source-{facts.availability}",
        message=f"Memory Source {key} is {facts.availability}{reason}",
        key=key,
        reason=facts.reason,
    )


def _not_selected(
    strategy: StrategyDefinition,
    strategy_key: str,
    candidates: Mapping[str, SourceCandidate],
    selections: Sequence[SourceSelection],
    contributions: Sequence[ExtensionContribution],
) -> list[Diagnostic]:
    """A serving Source the Strategy left out is said, with a reason code, not dropped silently.

    The reason is the engine's reading of the Strategy's manifest and the selection slot:
    `role-not-supported` (the Strategy does not take the Source's role), `max-sources` (the
    Strategy's limit was reached), `excluded-by-selection` (a `selection` View extension left
    it out) or `not-chosen` (the Strategy chose not to use it).
    """
    chosen = {selection.source_key for selection in selections}
    manifest = strategy.manifest
    narrowed: set[str] | None = None
    for contribution in contributions:
        if contribution.slot == "selection" and isinstance(contribution.value, Mapping):
            keys = contribution.value.get("source_keys")
            if isinstance(keys, Sequence) and not isinstance(keys, str):
                narrowed = (narrowed or set()) | {str(key) for key in keys}
    found = []
    for key, candidate in sorted(candidates.items()):
        if key in chosen or candidate.facts.availability == "unavailable":
            continue  # an unavailable Source already has its own diagnostic
        if not manifest.supports_role(candidate.facts.role):
            reason = "role-not-supported"
        elif narrowed is not None and key not in narrowed:
            reason = "excluded-by-selection"
        elif len(chosen) >= manifest.max_sources:
            reason = "max-sources"
        else:
            reason = "not-chosen"
        found.append(
            Diagnostic(
                code="source-not-selected",
                message=(
                    f"Memory Source {key} is serving but memory Strategy {strategy_key} did not "
                    f"select it ({reason})"
                ),
                key=key,
            )
        )
    return found


def _unavailable(slot: SourceSlot) -> SourceFacts:
    return SourceFacts(
        instance_key=slot.key,
        type_id=slot.manifest.type_id,
        role=slot.manifest.role,
        availability="unavailable",
    )


def _candidate(slot: SourceSlot, facts: SourceFacts) -> SourceCandidate:
    """Narrow facts by the host's ceiling and derive the routes and actions on offer."""
    ceiling = slot.plan.ceiling
    capabilities = facts.capabilities
    availability = facts.availability
    if ceiling is not None:
        capabilities = tuple(item for item in capabilities if item in ceiling)
        if facts.capabilities and not capabilities:
            availability = "unavailable"
    if availability == "unavailable":
        capabilities = ()
    allowed = set(capabilities)
    route_ids = set(facts.route_ids)
    action_ids = set(facts.action_ids)
    routes = tuple(
        route for route in slot.routes if route.id in route_ids and route.capability in allowed
    )
    actions = tuple(
        action
        for action in slot.actions
        if action.id in action_ids and action.capability in allowed
    )
    if (
        availability != facts.availability
        or capabilities != facts.capabilities
        or len(routes) != len(facts.route_ids)
        or len(actions) != len(facts.action_ids)
    ):
        facts = _derived(
            facts,
            {
                "availability": availability,
                "capabilities": capabilities,
                "route_ids": tuple(route.id for route in routes),
                "action_ids": tuple(action.id for action in actions),
            },
        )
    return SourceCandidate(
        key=slot.key,
        package_name=slot.plan.provenance.package_name,
        consistency=slot.manifest.consistency,
        facts=facts,
        routes=routes,
        actions=actions,
    )


def _derived(model: _M, changes: dict[str, Any]) -> _M:
    """A copy of a validated model with values the core derived from validated data."""
    return BaseModel.model_copy(model, update=changes)


def _compose_once(
    strategy: StrategyDefinition,
    key: str,
    request: ComposeRequest,
    candidates: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
) -> Any:
    try:
        return strategy.compose(request, candidates, contributions)
    except CompositionRejected:
        raise
    except Exception as exc:
        raise CompositionRejected(f"memory Strategy {key} compose() failed") from exc


def _checked_spec(key: str, produced: Any) -> ViewSpec:
    return validate_model(
        ViewSpec, produced, subject=f"memory Strategy {key} ViewSpec", error=CompositionRejected
    )


def _spec_json(spec: ViewSpec) -> bytes:
    return canonical_json(spec.model_dump(mode="json"))


def _json_bytes(value: Any) -> bytes | None:
    """Canonical JSON of a raw value, or None when it is not JSON as it stands."""
    try:
        return canonical_json(value)
    except TypeError:  # orjson's error for types it cannot write, cycles and big integers
        return None


def _deterministic_spec(
    strategy: StrategyDefinition,
    key: str,
    request: ComposeRequest,
    candidates: tuple[SourceCandidate, ...],
    contributions: tuple[ExtensionContribution, ...],
    cache: dict[tuple[Any, ...], Any],
) -> tuple[ViewSpec, bytes | None]:
    """Run the Strategy twice on the same frozen input; the two specs must be identical.

    Returns the spec and, when the Strategy returned plain JSON, its canonical bytes.

    Each result is captured before the next call (a Strategy may mutate what it returned).
    A result equal to its own canonical JSON (no NaN written as null, no enum, UUID or date
    written as text) validates exactly as that JSON does, so the second is proven the same
    by equal bytes, and a spec already validated from the same bytes is reused. A frozen
    `ViewSpec` equal to the first is the same too (strict fields: equal values dump alike).
    Anything else is validated and its dump compared.

    Raises:
        CompositionRejected: compose() failed, returned an invalid spec, or two different ones.
    """
    produced = _compose_once(strategy, key, request, candidates, contributions)
    first = parsed = None
    if not isinstance(produced, ViewSpec):
        first = _json_bytes(produced)
        if first is not None:
            parsed = orjson.loads(first)
            if parsed != produced:
                first = None
    known = None if first is None else cache.get(("spec", first))
    if known is None:
        spec = _checked_spec(key, produced)
        if first is not None:
            cache["spec", first] = spec
    else:
        spec = known
    again = _compose_once(strategy, key, request, candidates, contributions)
    if again is spec:
        return spec, None
    if first is not None and _json_bytes(again) == first and parsed == again:
        return spec, first
    if isinstance(again, ViewSpec) and type(again) is type(spec) and again == spec:
        return spec, None
    if _spec_json(_checked_spec(key, again)) != _spec_json(spec):
        raise CompositionRejected(
            f"memory Strategy {key} is not deterministic: two compose() calls on the "
            "same input differ"
        )
    return spec, None


def _validate_spec(
    spec: ViewSpec,
    strategy: StrategyDefinition,
    key: str,
    candidates: Mapping[str, SourceCandidate],
    request: CompositionRequest,
) -> list[SourceSelection]:
    """Check a spec against facts, roles, maxima and budget; drop unavailable optionals."""
    manifest = strategy.manifest
    subject = f"memory Strategy {key}"
    if spec.strategy_type_id != manifest.type_id:
        raise CompositionRejected(
            f"{subject} returned a spec for {spec.strategy_type_id!r}, not {manifest.type_id!r}"
        )
    if len(spec.sources) > manifest.max_sources:
        raise CompositionRejected(
            f"{subject} selected {len(spec.sources)} Sources; its maximum is {manifest.max_sources}"
        )
    seen: set[str] = set()
    kept: list[SourceSelection] = []
    routes = actions = projected = 0
    for selection in spec.sources:
        source_key = selection.source_key
        candidate = candidates.get(source_key)
        if candidate is None:
            raise CompositionRejected(f"{subject} selected unknown Source {source_key!r}")
        if source_key in seen:
            raise CompositionRejected(f"{subject} selected Source {source_key} twice")
        seen.add(source_key)
        facts = candidate.facts
        if not manifest.supports_role(facts.role):
            raise CompositionRejected(
                f"{subject} selected Source {source_key} of unsupported role {facts.role!r}"
            )
        if facts.availability == "unavailable":
            if selection.required:
                raise CompositionRejected(f"required Memory Source {source_key} is unavailable")
            continue
        if selection.projection is not None and "project" not in facts.capabilities:
            raise CompositionRejected(
                f"{subject} projects Source {source_key}, which cannot project now"
            )
        for kind, chosen, offered in (
            ("route", selection.route_ids, candidate.routes),
            ("policy route", selection.policy_route_ids, candidate.routes),
            ("action", selection.action_ids, candidate.actions),
        ):
            if len(set(chosen)) != len(chosen):
                raise CompositionRejected(f"{subject} selected a {kind} of {source_key} twice")
            available = {item.id for item in offered}
            for item_id in chosen:
                if item_id not in available:
                    raise CompositionRejected(
                        f"{subject} selected {kind} {item_id!r}, which Source {source_key} "
                        "does not offer"
                    )
        if selection.policy_route_ids:
            if strategy.create_turn is None:
                raise CompositionRejected(
                    f"{subject} pins policy routes of {source_key}, but has no turn policy "
                    "(create_turn) to read them"
                )
            both = sorted(set(selection.route_ids) & set(selection.policy_route_ids))
            if both:
                raise CompositionRejected(
                    f"{subject} selected route {both[0]!r} of {source_key} both for the model "
                    "and for its turn policy alone"
                )
        routes += len(selection.route_ids) + len(selection.policy_route_ids)
        actions += len(selection.action_ids)
        if selection.projection is not None:
            projected += selection.projection.max_characters
        kept.append(selection)
    if routes > manifest.max_routes:
        raise CompositionRejected(
            f"{subject} selected {routes} routes; its maximum is {manifest.max_routes}"
        )
    if actions > manifest.max_actions:
        raise CompositionRejected(
            f"{subject} selected {actions} actions; its maximum is {manifest.max_actions}"
        )
    budget = request.budget.max_projection_characters
    if projected > budget:
        raise CompositionRejected(
            f"{subject} allocated {projected} projection characters; the budget is {budget}"
        )
    return kept


def _checked_contribution(
    slot: SourceSlot, selection: SourceSelection, request: ProjectionRequest, value: Any
) -> ViewContribution:
    subject = f"Memory Source {slot.key} project()"
    contribution = validate_model(
        ViewContribution, value, subject=subject, error=CompositionRejected
    )
    total = 0
    for fragment in contribution.fragments:
        if fragment.source_key != slot.key:
            raise CompositionRejected(f"{subject} returned a fragment of {fragment.source_key!r}")
        if fragment.mode != request.mode:
            raise CompositionRejected(
                f"{subject} returned a {fragment.mode} fragment; {request.mode} was requested"
            )
        total += len(fragment.text)
    if total > request.max_characters:
        raise CompositionRejected(
            f"{subject} returned {total} characters; at most {request.max_characters} were allowed"
        )
    grant = contribution.grant
    if grant is not None and grant.source_key != slot.key:
        raise CompositionRejected(f"{subject} returned a grant of another Source")
    if grant is None and (selection.route_ids or selection.policy_route_ids):
        raise CompositionRejected(f"{subject} returned no read grant, but routes were selected")
    return contribution


def _observe_calls(generation: Generation, phase: str, outcomes: list[ReadOutcome]) -> None:
    observers = generation.observers
    if not observers.active:
        return
    for outcome in outcomes:
        manifest = generation.by_key[outcome.key].manifest
        observers.emit(
            "mnemon_observe_source_call",
            phase=phase,
            type_id=manifest.type_id,
            role=manifest.role,
            outcome=outcome.failure or "ok",
            error_code=outcome.error_code,
            origin_code=outcome.origin_code,
            retry_after=outcome.retry_after,
            duration=outcome.duration,
        )


async def compose_view(generation: Generation, request: CompositionRequest) -> PinnedView:
    """Compose one View on `generation` (a turn's steps from facts to the assembled View).

    Raises:
        CompositionRejected: a protocol violation, a non-deterministic Strategy, an invalid
            spec, or a required Source's failure.
    """
    plan = generation.plan
    timeout = plan.settings.source_timeout
    strategy = plan.strategy_definition
    strategy_key = plan.strategy.instance_key
    diagnostics = list(plan.diagnostics)
    scope, scenario = request.scope, request.scenario

    outcomes = await read_concurrently(
        [
            (
                slot.key,
                partial(
                    slot.runtime.facts,
                    # built from the validated request: no second validation per Source
                    from_checked(
                        FactsRequest,
                        {"instance_key": slot.key, "scope": scope, "scenario": scenario},
                    ),
                ),
            )
            for slot in generation.sources
        ],
        timeout,
        "facts",
    )
    _observe_calls(generation, "facts", outcomes)
    candidates: dict[str, SourceCandidate] = {}
    cache = generation.assembly_cache
    for slot, outcome in zip(generation.sources, outcomes, strict=True):
        if outcome.failure is not None:
            diagnostics.append(_outage(slot.key, "facts", outcome.failure))
            candidates[slot.key] = _candidate(slot, _unavailable(slot))
            continue
        value = outcome.value
        entry: tuple[Any, ...] = ("facts", slot.key)
        known = cache.get(entry)
        # the very facts model checked before (frozen): the same candidate and diagnostic;
        # a plain value is checked every time (its owner may have changed it in place)
        if known is None or known[0] is not value or not isinstance(value, SourceFacts):
            try:
                facts = checked_facts(slot, value)
            except CompositionRejected as exc:
                _contract_broken(slot.key, "facts", exc)
                diagnostics.append(_outage(slot.key, "facts", "invalid"))
                candidates[slot.key] = _candidate(slot, _unavailable(slot))
                continue
            note = _reported(slot.key, facts) if facts.availability != "ready" else None
            known = cache[entry] = (value, (_candidate(slot, facts), note))
        candidate, note = known[1]
        if note is not None:
            diagnostics.append(note)
        candidates[slot.key] = candidate
    offered = tuple(candidates.values())

    compose_request = from_checked(
        ComposeRequest, {"scope": scope, "scenario": scenario, "budget": request.budget}
    )
    contributions, extension_records = collect_contributions(
        plan.active_extensions, compose_request, offered
    )
    spec, spec_json = _deterministic_spec(
        strategy, strategy_key, compose_request, offered, contributions, cache
    )
    # the same spec on the very same candidates and budget selects the same (no extensions:
    # their contributions take part in it)
    entry = ("selected", spec_json, request.budget.max_projection_characters)
    known = None if spec_json is None or contributions else cache.get(entry)
    if (
        known is not None
        and len(known[0]) == len(offered)
        and all(old is new for old, new in zip(known[0], offered, strict=True))
    ):
        selections, not_selected = known[1]
    else:
        selections = _validate_spec(spec, strategy, strategy_key, candidates, request)
        not_selected = _not_selected(strategy, strategy_key, candidates, selections, contributions)
        if spec_json is not None and not contributions:
            cache[entry] = (offered, (tuple(selections), tuple(not_selected)))
    diagnostics.extend(not_selected)

    projected = [
        s for s in selections if s.projection is not None or s.route_ids or s.policy_route_ids
    ]
    requests = {
        selection.source_key: from_checked(
            ProjectionRequest,
            {
                "instance_key": selection.source_key,
                "scope": scope,
                "scenario": scenario,
                "expected_revision": candidates[selection.source_key].facts.revision,
                "mode": selection.projection.mode if selection.projection else "routed",
                "max_characters": (
                    selection.projection.max_characters if selection.projection else 0
                ),
            },
        )
        for selection in projected
    }
    outcomes = await read_concurrently(
        [
            (
                s.source_key,
                partial(generation.by_key[s.source_key].runtime.project, requests[s.source_key]),
            )
            for s in projected
        ],
        timeout,
        "project",
    )
    _observe_calls(generation, "project", outcomes)
    by_key = {s.source_key: s for s in selections}
    results: dict[str, ViewContribution] = {}
    for outcome in outcomes:
        selection = by_key[outcome.key]
        project_request = requests[outcome.key]
        failure: str | None = outcome.failure
        invalid: CompositionRejected | None = None
        if failure is None:
            try:
                contribution = _checked_contribution(
                    generation.by_key[outcome.key], selection, project_request, outcome.value
                )
            except CompositionRejected as exc:
                invalid, failure = exc, "invalid"
                _contract_broken(outcome.key, "project", exc)
            else:
                if (
                    contribution.revision is not None
                    and contribution.revision != project_request.expected_revision
                ):
                    # the Source moved on between facts and project: not the pinned revision
                    failure = "failed"
                else:
                    results[outcome.key] = contribution
        if failure is not None:
            if selection.required:
                # the host's developer learns which rule broke; the model never sees this
                detail = f": {invalid}" if invalid is not None else ""
                raise CompositionRejected(
                    f"required Memory Source {outcome.key} project() "
                    f"{_PHASE_WORDS[failure]}{detail}"
                )
            diagnostics.append(_outage(outcome.key, "project", failure))
            del by_key[outcome.key]

    return assemble(
        generation,
        request,
        spec,
        [s for s in selections if s.source_key in by_key],
        candidates,
        results,
        extension_records,
        diagnostics,
    )
