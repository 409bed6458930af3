"""Assembly: the pinned View built from a Strategy's proposal and the Sources' projections.

Every part is derived from models already validated, so it is built without validating
again; the parts that repeat turn after turn (routes, offers, pins) are built and dumped once
per generation and reused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from .._definitions import StrategyDefinition
from .._json import content_hash, digest
from .._models import (
    KEEP_FROZEN,
    ActionOffer,
    CompositionRequest,
    Diagnostic,
    ExtensionRecord,
    Fragment,
    GrantRecord,
    ReadGrant,
    SourceCandidate,
    SourceConsistency,
    SourceSelection,
    View,
    ViewBudget,
    ViewContribution,
    ViewRoute,
    ViewSpec,
    from_checked,
)
from .generation import Generation

__all__ = ["PinnedView", "assemble"]

_M = TypeVar("_M", bound=BaseModel)
# the View fields its digest leaves out
_UNHASHED = {"id", "digest", "generation_id", "created_at"}


@dataclass(frozen=True, slots=True)
class PinnedView:
    """A View together with what only the host may hold: its generation and read grants."""

    view: View
    generation: Generation
    grants: Mapping[str, ReadGrant]
    strategy: StrategyDefinition


def assemble(
    generation: Generation,
    request: CompositionRequest,
    spec: ViewSpec,
    selections: Sequence[SourceSelection],
    candidates: Mapping[str, SourceCandidate],
    results: Mapping[str, ViewContribution],
    extension_records: tuple[ExtensionRecord, ...],
    diagnostics: list[Diagnostic],
) -> PinnedView:
    """The View of `selections` (those still served), pinned with its grants and generation."""
    # every part below is derived from validated models, so it is built without re-validation;
    # routes, offers and pins repeat turn after turn, so each is built and dumped once
    budget = request.budget
    cache = generation.assembly_cache
    if len(cache) > _ASSEMBLY_CACHE_LIMIT:  # budgets and revisions a host varies freely
        cache.clear()
    fragments: list[Fragment] = []
    routes: list[ViewRoute] = []
    policy_routes: list[ViewRoute] = []
    offers: list[ActionOffer] = []
    grants: dict[str, ReadGrant] = {}
    consistency: list[SourceConsistency] = []
    dumped_routes: list[Any] = []
    dumped_policy_routes: list[Any] = []
    dumped_offers: list[Any] = []
    dumped_consistency: list[Any] = []
    dumped_fragments: list[Any] = []
    grant_records: list[GrantRecord] = []
    dumped_grants: list[Any] = []
    for selection in selections:
        key = selection.source_key
        candidate = candidates[key]
        contribution = results.get(key)
        if contribution is not None:
            # a Source that serves the very same (frozen) contribution again costs no dumps
            entry: tuple[Any, ...] = ("contribution", key)
            known = cache.get(entry)
            if known is None or known[0] is not contribution:
                known = cache[entry] = (contribution, _contribution_parts(key, contribution))
            parts: _ContributionParts = known[1]
            fragments.extend(contribution.fragments)
            dumped_fragments.extend(parts.fragments)
            if contribution.grant is not None:
                grants[key] = contribution.grant
                grant_records.append(parts.grant)
                dumped_grants.append(parts.dumped_grant)
        for chosen, pinned, dumped in (
            (selection.route_ids, routes, dumped_routes),
            (selection.policy_route_ids, policy_routes, dumped_policy_routes),
        ):
            for route_id in chosen:
                entry = (
                    "route",
                    key,
                    route_id,
                    budget.max_evidence_characters,
                    budget.max_evidence_results,
                )
                built = cache.get(entry)
                if built is None:
                    built = cache[entry] = _dumped(_view_route(candidate, route_id, budget))
                pinned.append(built[0])
                dumped.append(built[1])
        for action_id in selection.action_ids:
            entry = ("offer", key, action_id)
            built = cache.get(entry)
            if built is None:
                built = cache[entry] = _dumped(_action_offer(candidate, action_id))
            offers.append(built[0])
            dumped_offers.append(built[1])
        revision = candidate.facts.revision
        entry = ("consistency", key, candidate.consistency, revision)
        built = cache.get(entry)
        if built is None:
            built = cache[entry] = _dumped(
                from_checked(
                    SourceConsistency,
                    {
                        "source_key": key,
                        "consistency": candidate.consistency,
                        "revision": revision,
                        "role": candidate.facts.role,
                    },
                )
            )
        consistency.append(built[0])
        dumped_consistency.append(built[1])
    diagnostics.sort(key=lambda item: (item.key or "", item.code))
    plan = generation.plan
    body: dict[str, Any] = {
        "request": request,
        "strategy_key": plan.strategy.instance_key,
        "strategy_type_id": spec.strategy_type_id,
        "explanation": spec.explanation,
        "guidance": spec.guidance,
        "fragments": tuple(fragments),
        "routes": tuple(routes),
        "policy_routes": tuple(policy_routes),
        "offers": tuple(offers),
        "grants": tuple(grant_records),
        "consistency": tuple(consistency),
        "extensions": extension_records,
        "diagnostics": tuple(diagnostics),
        "tool_ids": _tool_ids(generation),
    }
    # the digest covers the body: neither the generation nor the creation time; this is the
    # View's own dump without `_UNHASHED`, its repeated parts taken from the cache
    content = {
        "request": request.model_dump(context=KEEP_FROZEN),
        "strategy_key": body["strategy_key"],
        "strategy_type_id": spec.strategy_type_id,
        "explanation": spec.explanation,
        "guidance": None
        if spec.guidance is None
        else spec.guidance.model_dump(context=KEEP_FROZEN),
        "fragments": dumped_fragments,
        "routes": dumped_routes,
        "policy_routes": dumped_policy_routes,
        "offers": dumped_offers,
        "grants": dumped_grants,
        "consistency": dumped_consistency,
        "extensions": [item.model_dump(context=KEEP_FROZEN) for item in extension_records],
        "diagnostics": [item.model_dump(context=KEEP_FROZEN) for item in diagnostics],
        "tool_ids": list(body["tool_ids"]),
    }
    view_digest = content_hash(content)
    view = from_checked(
        View,
        {
            "id": f"view:{view_digest}",
            "digest": view_digest,
            "generation_id": generation.id,
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            **body,
        },
    )
    return PinnedView(
        view=view, generation=generation, grants=grants, strategy=plan.strategy_definition
    )


_ASSEMBLY_CACHE_LIMIT = 4096


def _tool_ids(generation: Generation) -> tuple[str, ...]:
    """Every route and action the generation's Sources declare: the same for every scope."""
    entry = ("tool_ids",)
    known: tuple[str, ...] | None = generation.assembly_cache.get(entry)
    if known is None:
        known = generation.assembly_cache[entry] = tuple(
            sorted(
                f"{kind}:{plan.key}/{item.id}"
                for plan in generation.plan.sources
                for kind, items in (
                    ("route", plan.manifest.routes),
                    ("action", plan.manifest.actions),
                )
                for item in items
            )
        )
    return known


@dataclass(frozen=True, slots=True)
class _ContributionParts:
    """What the digest needs of one contribution: its fragments' dumps and its grant record."""

    fragments: tuple[Any, ...]
    grant: Any  # GrantRecord | None
    dumped_grant: Any


def _contribution_parts(key: str, contribution: ViewContribution) -> _ContributionParts:
    fragments = tuple(item.model_dump(context=KEEP_FROZEN) for item in contribution.fragments)
    if contribution.grant is None:
        return _ContributionParts(fragments, None, None)
    dumped = {"source_key": key, "digest": digest("grant", contribution.grant.value)}
    return _ContributionParts(fragments, from_checked(GrantRecord, dict(dumped)), dumped)


def _dumped(model: _M) -> tuple[_M, dict[str, Any]]:
    return model, model.model_dump(context=KEEP_FROZEN)


def _view_route(candidate: SourceCandidate, route_id: str, budget: ViewBudget) -> ViewRoute:
    route = next(route for route in candidate.routes if route.id == route_id)
    key = candidate.key
    characters = min(
        route.max_characters or budget.max_evidence_characters, budget.max_evidence_characters
    )
    return from_checked(
        ViewRoute,
        {
            "id": f"{key}/{route_id}",
            "source_key": key,
            "route_id": route_id,
            "description": route.description,
            "capability": route.capability,
            "input_schema": route.input_schema,
            "max_calls": route.max_calls,
            "max_results": min(
                route.max_results or budget.max_evidence_results, budget.max_evidence_results
            ),
            "max_characters": characters,
            "max_item_characters": characters,
        },
    )


def _action_offer(candidate: SourceCandidate, action_id: str) -> ActionOffer:
    action = next(action for action in candidate.actions if action.id == action_id)
    key = candidate.key
    return from_checked(
        ActionOffer,
        {
            "id": f"{key}/{action_id}",
            "source_key": key,
            "action_id": action_id,
            "description": action.description,
            "capability": action.capability,
            "input_schema": action.input_schema,
            "authority": action.authority,
        },
    )
