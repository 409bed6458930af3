"""What a Source sees and returns while a View is composed: scope, facts, projections."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict, StringConstraints

from .._json import FrozenDict
from .base import (
    MAX_PROJECTION_CHARACTERS,
    SCENARIO_PATTERN,
    Availability,
    EntryId,
    Id,
    InstanceKey,
    JsonObject,
    JsonValue,
    PackageName,
    ProjectionMode,
    Revision,
    ScopeValue,
    SourceCapability,
    StrictInt,
    WireModel,
)


class Scope(WireModel):
    """The identity a View is for; each Source declares which parts it needs."""

    tenant_id: ScopeValue | None = None
    user_id: ScopeValue | None = None
    agent_id: ScopeValue | None = None
    session_id: ScopeValue | None = None
    workspace: ScopeValue | None = None


class ViewBudget(WireModel):
    """How much a View may hold: projected characters and evidence per route read."""

    max_projection_characters: Annotated[StrictInt, Field(ge=0, le=MAX_PROJECTION_CHARACTERS)] = (
        16_000
    )
    max_evidence_results: Annotated[StrictInt, Field(ge=1, le=1_000)] = 8
    max_evidence_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] = 12_000


class CompositionRequest(WireModel):
    """What a turn asks for: whose View, in which scenario, within which budget."""

    scope: Scope = Scope()
    scenario: Annotated[str, Strict(), StringConstraints(pattern=SCENARIO_PATTERN)] = "agent.turn"
    budget: ViewBudget = ViewBudget()


class SourceProvenance(WireModel):
    """Where a Source instance comes from; never carries configuration or secrets."""

    entry_id: EntryId
    package_name: PackageName
    type_id: Id


class SourceInit(WireModel):
    """What a Source factory receives: its key, provenance, configuration and the host's folders.

    `data_dir` is the host's default data folder; `config_dir` is the folder relative paths
    in the configuration are taken from (the profile's folder), when the host has one.
    """

    instance_key: InstanceKey
    provenance: SourceProvenance
    configuration: JsonObject
    data_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] | None = None
    config_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] | None = None


class FactsRequest(WireModel):
    """The request a Source's `facts()` receives."""

    instance_key: InstanceKey
    scope: Scope
    scenario: str


class SourceFacts(WireModel):
    """Cheap, read-only facts a Source reports for one request.

    `reason` is a coded, non-sensitive cause (such as `missing-scope` or `damaged-file`)
    for a `degraded` or `unavailable` Source; the core turns it into a diagnostic.
    """

    instance_key: InstanceKey
    type_id: Id
    role: Id
    availability: Availability
    revision: Revision | None = None
    capabilities: tuple[SourceCapability, ...] = ()
    route_ids: tuple[Id, ...] = ()
    action_ids: tuple[Id, ...] = ()
    hints: JsonObject = FrozenDict()
    reason: Id | None = None


class ProjectionRequest(WireModel):
    """The request a selected Source's `project()` receives."""

    instance_key: InstanceKey
    scope: Scope
    scenario: str
    expected_revision: Revision | None
    mode: ProjectionMode
    max_characters: Annotated[StrictInt, Field(ge=0)]


class Fragment(WireModel):
    """A piece of projected memory text, owned by one Source."""

    source_key: InstanceKey
    mode: ProjectionMode
    text: Annotated[str, Strict(), StringConstraints(min_length=1)]


class ReadGrant(WireModel):
    """A Source-owned, opaque snapshot handle that pins what a View may read."""

    source_key: InstanceKey
    value: JsonValue


class ViewContribution(WireModel):
    """What `project()` returns: fragments, a read grant, optional human presentation."""

    fragments: tuple[Fragment, ...] = ()
    grant: ReadGrant | None = None
    presentation: JsonObject | None = None
    revision: Revision | None = None
