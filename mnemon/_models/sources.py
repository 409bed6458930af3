"""What a Source sees and returns while a View is composed: scope, facts, projections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

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
    """The tenant (organization) the View is for; when present it is always part of a Source's
    partition."""
    user_id: ScopeValue | None = None
    """The user the View is for."""
    agent_id: ScopeValue | None = None
    """The agent the View is for; data described to an agent as its own is partitioned by it."""
    session_id: ScopeValue | None = None
    """The conversation or session the View is for."""
    workspace: ScopeValue | None = None
    """The workspace or project the View is for; data about its work is partitioned by it."""


#: The names of `Scope`'s ids, in its order: what a Source may partition by.
SCOPE_FIELDS: tuple[str, ...] = tuple(Scope.model_fields)


def partition_keys_problem(keys: object) -> str | None:
    """What is wrong with `keys` as the scope ids a Source partitions by, or None.

    They must be a list of distinct names of `Scope`'s fields. The problem reads as the rest
    of a sentence about the list, `[1]: 'team' is not a scope id (...)`, or `: must be...`.
    """
    if isinstance(keys, str) or not isinstance(keys, list | tuple):
        return f": must be a list of scope ids ({', '.join(SCOPE_FIELDS)})"
    for index, key in enumerate(keys):
        if not isinstance(key, str) or key not in SCOPE_FIELDS:
            shown = repr(key) if isinstance(key, str) and len(key) <= 64 else "the value"
            return f"[{index}]: {shown} is not a scope id (one of {', '.join(SCOPE_FIELDS)})"
        if key in keys[:index]:
            return f"[{index}]: {key!r} is listed twice"
    return None


class ViewBudget(WireModel):
    """How much a View may hold: projected characters and evidence per route read."""

    max_projection_characters: Annotated[StrictInt, Field(ge=0, le=MAX_PROJECTION_CHARACTERS)] = (
        16_000
    )
    """The most characters of memory text the whole View may project (0 to 10,000,000)."""
    max_evidence_results: Annotated[StrictInt, Field(ge=1, le=1_000)] = 8
    """The most items one route read may return (1 to 1,000)."""
    max_evidence_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] = 12_000
    """The most characters of item text one route read may return (1 to 1,000,000)."""


class CompositionRequest(WireModel):
    """What a turn asks for: whose View, in which scenario, within which budget."""

    scope: Scope = Scope()
    """Whose View this is: the identity every Source partitions by."""
    scenario: Annotated[str, Strict(), StringConstraints(pattern=SCENARIO_PATTERN)] = "agent.turn"
    """What kind of turn this is, such as `agent.turn` or `agent.root-turn`; Strategies may adapt to
    it."""
    budget: ViewBudget = ViewBudget()
    """How much the View may hold."""


class SourceProvenance(WireModel):
    """Where a Source instance comes from; never carries configuration or secrets."""

    entry_id: EntryId
    """The profile entry that mounted the Source (`work`, `personal`)."""
    package_name: PackageName
    """The distribution that defines the Source type."""
    type_id: Id
    """The Source type, from its manifest."""


class SourceInit(WireModel):
    """What a Source factory receives: its key, provenance, configuration and the host's folders.

    `data_dir` is the host's default data folder; `config_dir` is the folder relative paths
    in the configuration are taken from (the profile's folder), when the host has one.
    """

    instance_key: InstanceKey
    """The Source instance's key, `source:<entry>` (plus `/<type id>` when one entry installs
    several)."""
    provenance: SourceProvenance
    """Where the instance comes from (entry, package, type)."""
    configuration: JsonObject
    """The entry's frozen configuration for this Source, secrets included; never echo it."""
    data_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] | None = None
    """The host's default data folder, or None; `source_data_directory()` derives the instance's own
    folder."""
    config_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] | None = None
    """The folder relative paths in the configuration are taken from (the profile's), or None;
    `read_configuration` resolves `ConfigPath` values against it."""
    switches: Mapping[str, bool] = Field(default_factory=dict)
    """The host's deployment-wide switches (`HostSettings.switches`), by name; a Source honours
    the ones it documents (`external-memory.search`: false switches its reads off)."""
    embedding: Any = Field(default=None, exclude=True)
    """The embedders installed beside the Source (an `mnemon.sdk.Embedding`: their vector spaces,
    `segment_and_embed`, `embed_query`, every answer checked), or None when there is none.
    Not part of the JSON form: it is a live service of this host."""
    telemetry: Any = Field(default=None, exclude=True)
    """An `mnemon.sdk.SourceTelemetry`: where the Source reports its own calls to the system behind
    it (a span name, an outcome, counts) to the host's observers; None outside a host."""


class FactsRequest(WireModel):
    """The request a Source's `facts()` receives."""

    instance_key: InstanceKey
    """The key of the Source asked."""
    scope: Scope
    """The identity of the View being composed."""
    scenario: str
    """The turn's scenario."""


class SourceUsage(WireModel):
    """How full a Source with a cap is: `used` of `limit`, in `unit`."""

    used: Annotated[StrictInt, Field(ge=0)]
    """How much is in use now."""
    limit: Annotated[StrictInt, Field(ge=1)]
    """The cap a write past which is refused."""
    unit: Literal["bytes", "characters", "records"]
    """What `used` and `limit` count."""

    @property
    def percent(self) -> int:
        """`used` as a whole percentage of `limit` (at most 100)."""
        return min(100, self.used * 100 // self.limit)


class SourceFacts(WireModel):
    """Cheap, read-only facts a Source reports for one request.

    `reason` is a coded, non-sensitive cause (such as `missing-scope` or `damaged-file`)
    for a `degraded` or `unavailable` Source; the core turns it into a diagnostic.
    """

    instance_key: InstanceKey
    """The Source's own instance key (must match the request)."""
    type_id: Id
    """The Source type (must match the manifest)."""
    role: Id
    """The Source's role (must match the manifest), such as `working-context` or `notes`."""
    availability: Availability
    """`ready`, `degraded` (serving partially) or `unavailable` (left out of the View)."""
    revision: Revision | None = None
    """The revision of the data this scope would see now; a View pins it."""
    capabilities: tuple[SourceCapability, ...] = ()
    """The capabilities available now; a subset of the manifest's."""
    route_ids: tuple[Id, ...] = ()
    """The routes available now; a subset of the manifest's."""
    action_ids: tuple[Id, ...] = ()
    """The actions available now; a subset of the manifest's."""
    hints: JsonObject = FrozenDict()
    """Coarse, non-sensitive JSON a Strategy may use (counts, sizes); never memory text or secrets.
    """
    reason: Id | None = None
    """A coded cause for `degraded` or `unavailable`, such as `missing-scope`; it becomes a
    diagnostic."""
    usage: SourceUsage | None = None
    """How full the scope's memory is, for a Source with a cap (working memory's bytes): a
    Strategy may warn the model, and `mnemon maintain` shows it."""


class ProjectionRequest(WireModel):
    """The request a selected Source's `project()` receives."""

    instance_key: InstanceKey
    """The key of the Source asked."""
    scope: Scope
    """The identity of the View being composed."""
    scenario: str
    """The turn's scenario."""
    expected_revision: Revision | None
    """The revision the Source reported in its facts for this composition."""
    mode: ProjectionMode
    """`eager` (memory text shown in full) or `routed` (a short cover; the model reads through
    routes)."""
    max_characters: Annotated[StrictInt, Field(ge=0)]
    """The most characters all fragments of this Source may hold together."""


class Fragment(WireModel):
    """A piece of projected memory text, owned by one Source."""

    source_key: InstanceKey
    """The Source that owns the text."""
    mode: ProjectionMode
    """The projection mode it was requested in."""
    text: Annotated[str, Strict(), StringConstraints(min_length=1)]
    """The projected memory text: quoted, untrusted data in the Wake."""


class ReadGrant(WireModel):
    """A Source-owned, opaque snapshot handle that pins what a View may read."""

    source_key: InstanceKey
    """The Source that issued and alone receives the grant."""
    value: JsonValue
    """Opaque JSON pinning what this View may read (a snapshot or its handle); it stays host-side.
    """


class ViewContribution(WireModel):
    """What `project()` returns: fragments, a read grant, optional human presentation."""

    fragments: tuple[Fragment, ...] = ()
    """The projected text, within the characters allotted, in the requested mode."""
    grant: ReadGrant | None = None
    """The read grant for this View; required when any of the Source's routes is selected."""
    presentation: JsonObject | None = None
    """Optional JSON for human interfaces; the model never sees it."""
    revision: Revision | None = None
    """The revision actually projected, when the Source knows it."""
