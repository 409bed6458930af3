"""Frozen wire models: everything the core and plugins exchange, validated on construction.

JSON-valued fields hold frozen private copies (see `_json`), so a model, once built, cannot be
changed by anyone, including the party that built it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    Strict,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from ._errors import MnemonError
from ._json import FrozenDict, freeze_json, thaw_json, unique

ID_PATTERN = r"^[a-z][a-z0-9-]{0,127}$"
CAPABILITY_PATTERN = r"^[a-z][a-z0-9.-]{0,127}$"
ENTRY_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,299}$"
PACKAGE_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$"
SCENARIO_PATTERN = r"^[a-z][a-z0-9._-]{0,127}$"

SOURCE_CAPABILITIES = (
    "status",
    "project",
    "recall",
    "search",
    "read",
    "browse",
    "write",
    "archive",
    "graph",
    "related",
    "link",
    "forget",
    "maintain",
    "export",
    "import",
)
GUIDANCE_LIMIT = 16_384
MAX_PROJECTION_CHARACTERS = 10_000_000

Id = Annotated[str, Strict(), StringConstraints(pattern=ID_PATTERN)]
CapabilityId = Annotated[str, Strict(), StringConstraints(pattern=CAPABILITY_PATTERN)]
EntryId = Annotated[str, Strict(), StringConstraints(pattern=ENTRY_ID_PATTERN)]
InstanceKey = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=400)]
PackageName = Annotated[str, Strict(), StringConstraints(pattern=PACKAGE_PATTERN)]
Label = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)]
Description = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=2_000)]
Text = Annotated[str, Strict()]
Revision = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
ScopeValue = Annotated[
    str, Strict(), StringConstraints(min_length=1, max_length=300, pattern=r"^[^\x00-\x1f\x7f]+$")
]
StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]
SourceCapability = Literal[
    "status",
    "project",
    "recall",
    "search",
    "read",
    "browse",
    "write",
    "archive",
    "graph",
    "related",
    "link",
    "forget",
    "maintain",
    "export",
    "import",
]
Availability = Literal["ready", "degraded", "unavailable"]
Consistency = Literal["exact-snapshot", "namespace-pinned-live-read"]
ProjectionMode = Literal["eager", "routed"]
Completion = Literal["accepted", "candidate", "committed", "partial", "failed", "unknown"]
ReceiptStatus = Literal["succeeded", "partial", "failed", "cancelled"]


def _json_value(value: object) -> Any:
    return freeze_json(value, what="JSON value")


def _json_object(value: object) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return freeze_json(value, what="JSON value")


KEEP_FROZEN = {"keep_frozen": True}


def _thawed(value: Any, info: SerializationInfo) -> Any:
    # callers get plain, mutable data; the core's own digests skip the copy
    if info.context and info.context.get("keep_frozen"):
        return value
    return thaw_json(value)


JsonValue = Annotated[Any, PlainValidator(_json_value), PlainSerializer(_thawed)]
JsonObject = Annotated[Mapping[str, Any], PlainValidator(_json_object), PlainSerializer(_thawed)]


def _input_schema(value: object) -> Any:
    from ._schema import check_input_schema

    schema = _json_object(value)
    check_input_schema(schema)
    return schema


InputSchema = Annotated[Mapping[str, Any], PlainValidator(_input_schema), PlainSerializer(_thawed)]

_Model = TypeVar("_Model", bound="WireModel")
_NAMED_PROBLEM = re.compile(
    r"^(?P<field>[a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_]+)?): (?P<problem>.+)$"
)


class WireModel(BaseModel):
    """Base of the public wire models: frozen, unknown fields forbidden.

    `model_copy(update=...)` validates the result, so a copy is as trustworthy as the
    original; `model_construct` skips validation and must not be used for data that crosses
    the boundary.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="never")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Return a validated copy with `update` applied (frozen values need no deep copy).

        Raises:
            pydantic.ValidationError: the updated values are invalid.
        """
        if not update:
            return self
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(update)
        return type(self).model_validate(values)


def describe_validation_error(exc: ValidationError, subject: str) -> str:
    """One line naming the first field at fault, e.g. `manifest.routes[0].max_calls: ...`."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        path = subject
        for part in error["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        message = str(error["msg"])
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        named = None if error["loc"] else _NAMED_PROBLEM.match(message)
        if named is not None:
            # a whole-model rule names its field as "field: problem"
            path += named["field"] if named["field"].startswith("[") else f".{named['field']}"
            message = named["problem"]
        problems.append(f"{path}: {message}")
    return "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")


def validate_model(
    model: type[_Model], value: object, *, subject: str, error: type[MnemonError]
) -> _Model:
    """Validate `value` as `model` (instances pass as they are); `error` names the bad field.

    Raises:
        MnemonError: of class `error`, when `value` does not validate.
    """
    if isinstance(value, model):
        return value  # validated when it was built (or copied)
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise error(describe_validation_error(exc, subject)) from None


# ------------------------------------------------------------------------- Source manifests


class RouteDescriptor(WireModel):
    """A read a Source offers: its input schema and its ceilings."""

    id: Id
    description: Description
    capability: SourceCapability
    input_schema: InputSchema
    max_calls: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    max_results: Annotated[StrictInt, Field(ge=1, le=1_000)] | None = None
    max_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None


class ActionDescriptor(WireModel):
    """A write a Source offers; every execution is re-authorized by the host."""

    id: Id
    description: Description
    capability: SourceCapability
    input_schema: InputSchema
    authority: Id | None = None


class ManagementField(WireModel):
    """One input of a Source's management form."""

    id: Id
    label: Label
    input: Literal["text", "number", "boolean", "url", "secret", "select"]
    description: Description | None = None
    required: StrictBool = False
    options: tuple[Label, ...] = ()

    @model_validator(mode="after")
    def _check_options(self) -> ManagementField:
        if self.input == "select" and not self.options:
            raise ValueError("options: a select needs options")
        if self.input != "select" and self.options:
            raise ValueError("options: only a select has options")
        return self


class ManagementOperation(WireModel):
    """One operation of a Source's management plane."""

    id: Id
    kind: Literal["read", "mutate"]
    description: Description
    input_schema: InputSchema


class ManagementDescriptor(WireModel):
    """How humans manage a Source: a label, a form of fields and operations."""

    label: Label
    description: Description
    fields: tuple[ManagementField, ...] = ()
    operations: tuple[ManagementOperation, ...] = ()

    @model_validator(mode="after")
    def _check_unique(self) -> ManagementDescriptor:
        if not unique(field.id for field in self.fields):
            raise ValueError("fields: duplicate field id")
        if not unique(op.id for op in self.operations):
            raise ValueError("operations: duplicate operation id")
        return self


class SourceManifest(WireModel):
    """What a Source type is and may do; facts at run time must agree with it."""

    type_id: Id
    package_name: PackageName
    role: Id
    capabilities: tuple[SourceCapability, ...] = Field(min_length=1)
    consistency: Consistency
    routes: tuple[RouteDescriptor, ...] = ()
    actions: tuple[ActionDescriptor, ...] = ()
    management: ManagementDescriptor | None = None

    @model_validator(mode="after")
    def _check_consistency(self) -> SourceManifest:
        if not unique(self.capabilities):
            raise ValueError("capabilities: duplicate capability")
        if not unique(route.id for route in self.routes):
            raise ValueError("routes: duplicate route id")
        if not unique(action.id for action in self.actions):
            raise ValueError("actions: duplicate action id")
        shared = {route.id for route in self.routes} & {action.id for action in self.actions}
        if shared:
            raise ValueError(f"actions: id {sorted(shared)[0]!r} also names a route")
        needed = [("routes", i, r.capability) for i, r in enumerate(self.routes)]
        needed += [("actions", i, a.capability) for i, a in enumerate(self.actions)]
        for kind, index, capability in needed:
            if capability not in self.capabilities:
                raise ValueError(
                    f"{kind}[{index}].capability: {capability!r} is not among the manifest's "
                    "capabilities"
                )
        return self


# ------------------------------------------------------------------------- requests and facts


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
    """What a Source factory receives; `data_dir` is the host's default data folder."""

    instance_key: InstanceKey
    provenance: SourceProvenance
    configuration: JsonObject
    data_dir: Annotated[str, Strict(), StringConstraints(min_length=1)] | None = None


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


# ------------------------------------------------------------------------- Strategy side


class StrategyManifest(WireModel):
    """What a Strategy type supports and its maxima."""

    type_id: Id
    package_name: PackageName
    supported_source_roles: tuple[Annotated[str, Strict()], ...] = Field(min_length=1)
    max_sources: Annotated[StrictInt, Field(ge=1, le=1_000)]
    max_routes: Annotated[StrictInt, Field(ge=1, le=1_000)]
    max_actions: Annotated[StrictInt, Field(ge=1, le=1_000)]
    extension_slots: tuple[Id, ...] = ()

    @field_validator("supported_source_roles")
    @classmethod
    def _check_roles(cls, roles: tuple[str, ...]) -> tuple[str, ...]:
        if "*" in roles:
            if roles != ("*",):
                raise ValueError('"*" must be the only supported role')
            return roles
        for role in roles:
            if not re.match(ID_PATTERN, role):
                raise ValueError(f"role {role!r} must match {ID_PATTERN}")
        if not unique(roles):
            raise ValueError("duplicate role")
        return roles

    @field_validator("extension_slots")
    @classmethod
    def _check_slots(cls, slots: tuple[str, ...]) -> tuple[str, ...]:
        if not unique(slots):
            raise ValueError("duplicate slot")
        return slots

    def supports_role(self, role: str) -> bool:
        """Whether a Source of `role` may be selected by this Strategy."""
        return self.supported_source_roles == ("*",) or role in self.supported_source_roles


class SourceRoute(WireModel):
    """A route the core derived for one Source (manifest ∩ live facts ∩ ceiling)."""

    source_key: InstanceKey
    id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    max_calls: int
    max_results: int | None
    max_characters: int | None


class SourceAction(WireModel):
    """An action the core derived for one Source (manifest ∩ live facts ∩ ceiling)."""

    source_key: InstanceKey
    id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    authority: str | None


class SourceCandidate(WireModel):
    """One Source as a Strategy sees it: effective facts and derived routes and actions."""

    key: InstanceKey
    package_name: PackageName
    consistency: Consistency
    facts: SourceFacts
    routes: tuple[SourceRoute, ...]
    actions: tuple[SourceAction, ...]


class ExtensionContribution(WireModel):
    """A bounded JSON value an active View extension contributed to one composition."""

    instance_key: InstanceKey
    type_id: Id
    slot: Id
    value: JsonValue


class ProjectionSpec(WireModel):
    """How a selected Source is projected."""

    mode: ProjectionMode
    max_characters: Annotated[StrictInt, Field(ge=0, le=MAX_PROJECTION_CHARACTERS)]


class SourceSelection(WireModel):
    """One Source a Strategy selected, with its projection, routes and actions."""

    source_key: InstanceKey
    required: StrictBool = True
    projection: ProjectionSpec | None = None
    route_ids: tuple[Id, ...] = ()
    action_ids: tuple[Id, ...] = ()


GuidanceText = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=GUIDANCE_LIMIT)]


class Reminders(WireModel):
    """Short reminders shown after memory for reads, writes or both."""

    read: GuidanceText | None = None
    write: GuidanceText | None = None
    both: GuidanceText | None = None


class Guidance(WireModel):
    """Trusted Strategy text, rendered apart from quoted Source data."""

    system: GuidanceText | None = None
    routing: GuidanceText | None = None
    reminders: Reminders | None = None


class ViewSpec(WireModel):
    """A Strategy's proposal for one View, validated by the core against facts and budget."""

    strategy_type_id: Id
    sources: tuple[SourceSelection, ...] = ()
    explanation: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=4_000)]
    guidance: Guidance | None = None


class ComposeRequest(WireModel):
    """The frozen request a Strategy's `compose()` receives."""

    scope: Scope
    scenario: str
    budget: ViewBudget


# ------------------------------------------------------------------------- the View


class Diagnostic(WireModel):
    """A sanitized, coded note about something that degraded; never raw exception text."""

    code: Id
    message: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=500)]
    key: InstanceKey | None = None


class ViewRoute(WireModel):
    """A route pinned in a View, with its effective ceilings."""

    id: Annotated[str, Strict()]
    source_key: InstanceKey
    route_id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    max_calls: int
    max_results: int
    max_characters: int
    max_item_characters: int = Field(
        default=0,
        description=(
            "The longest text one evidence item may have; a longer item is omitted whole, so "
            "a Source returns an excerpt within it (saying so in the item's provenance). "
            "Never more than max_characters; when not given, it is max_characters."
        ),
    )

    @model_validator(mode="after")
    def _item_ceiling(self) -> ViewRoute:
        if not 0 < self.max_item_characters <= self.max_characters:
            object.__setattr__(self, "max_item_characters", self.max_characters)
        return self


class ActionOffer(WireModel):
    """A write the model may request; each execution is re-authorized by the host."""

    id: Annotated[str, Strict()]
    source_key: InstanceKey
    action_id: Id
    description: Description
    capability: SourceCapability
    input_schema: JsonObject
    authority: str | None = None


class GrantRecord(WireModel):
    """The digest of one pinned read grant; the grant's value stays host-side."""

    source_key: InstanceKey
    digest: str


class SourceConsistency(WireModel):
    """Which revision of a Source a View pins, and how strongly."""

    source_key: InstanceKey
    consistency: Consistency
    revision: str | None


class ExtensionRecord(WireModel):
    """The digest of one extension contribution the View was composed with."""

    instance_key: InstanceKey
    slot: Id
    digest: str


class View(WireModel):
    """The frozen result of one composition; `id` is `view:<digest>` of its canonical body."""

    id: str
    digest: str
    generation_id: str
    created_at: str
    request: CompositionRequest
    strategy_key: InstanceKey
    strategy_type_id: Id
    explanation: str
    guidance: Guidance | None
    fragments: tuple[Fragment, ...]
    routes: tuple[ViewRoute, ...]
    offers: tuple[ActionOffer, ...]
    grants: tuple[GrantRecord, ...]
    consistency: tuple[SourceConsistency, ...]
    extensions: tuple[ExtensionRecord, ...]
    diagnostics: tuple[Diagnostic, ...]

    def route(self, route_id: str) -> ViewRoute | None:
        """The pinned route with View-wide id `route_id`, if any."""
        return next((route for route in self.routes if route.id == route_id), None)

    def offer(self, offer_id: str) -> ActionOffer | None:
        """The pinned offer with View-wide id `offer_id`, if any."""
        return next((offer for offer in self.offers if offer.id == offer_id), None)


# ------------------------------------------------------------------------- reads and writes


class ViewRef(WireModel):
    """All a Source learns about the View it serves: its id and scope."""

    id: str
    scope: Scope


class QueryRequest(WireModel):
    """What a Source's `query()` receives for one route read."""

    view: ViewRef
    route: ViewRoute
    grant: ReadGrant
    input: JsonObject


class EvidenceItem(WireModel):
    """One result of a route read, with its provenance."""

    id: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=512)]
    text: Text
    provenance: JsonObject = FrozenDict()
    metadata: JsonObject = FrozenDict()


class Evidence(WireModel):
    """The bounded result of one route read."""

    view_id: str
    route_id: str
    source_key: InstanceKey
    items: tuple[EvidenceItem, ...] = ()
    truncated: StrictBool = False
    output: JsonValue = None


class MutationRequest(WireModel):
    """What a Source's `mutate()` receives for one authorized write."""

    view: ViewRef
    offer: ActionOffer
    grant: ReadGrant | None
    input: JsonObject
    idempotency_key: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=200)] | None
    ) = None


class MutationReceipt(WireModel):
    """The honest result of one write: how far it got, never more."""

    view_id: str
    offer_id: str
    source_key: InstanceKey
    completion: Completion
    status: ReceiptStatus
    committed_at: str | None = None
    revision: Revision | None = None
    idempotency_key: str | None = None
    detail: JsonObject = FrozenDict()

    @field_validator("committed_at")
    @classmethod
    def _check_timestamp(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("committed_at must be an ISO 8601 timestamp") from None
        if moment.tzinfo is None:
            raise ValueError("committed_at must carry a time zone")
        return value

    @model_validator(mode="after")
    def _check_honesty(self) -> MutationReceipt:
        if self.completion == "committed":
            if self.status != "succeeded":
                raise ValueError("status: a committed receipt must have status 'succeeded'")
            if self.committed_at is None:
                raise ValueError("committed_at: a committed receipt must carry committed_at")
        elif self.committed_at is not None:
            raise ValueError("committed_at: only a committed receipt may carry committed_at")
        if self.status == "succeeded" and self.completion not in (
            "accepted",
            "candidate",
            "committed",
        ):
            raise ValueError(f"status: 'succeeded' contradicts completion {self.completion!r}")
        if self.completion == "failed" and self.status not in ("failed", "cancelled"):
            raise ValueError(f"status: {self.status!r} contradicts completion 'failed'")
        if self.completion == "partial" and self.status != "partial":
            raise ValueError(f"status: {self.status!r} contradicts completion 'partial'")
        return self


# ------------------------------------------------------------------------- registry snapshots


class InstalledContribution(WireModel):
    """One installed contribution as listeners see it."""

    instance_key: InstanceKey
    kind: Literal["source", "strategy", "strategy-extension"]
    type_id: Id
    entry_id: EntryId
    package_name: PackageName


class RegistrySnapshot(WireModel):
    """A frozen picture of the registry after one change."""

    revision: int
    contributions: tuple[InstalledContribution, ...]


# ------------------------------------------------------------------------- execution


class EvidenceLimits(WireModel):
    """Ceilings for one route read; they can only narrow what the View pinned."""

    max_results: Annotated[StrictInt, Field(ge=1, le=1_000)] | None = None
    max_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    max_item_characters: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None


class PolicyRequest(WireModel):
    """What a turn policy's `query()` receives for one route execution."""

    view: ViewRef
    route: ViewRoute
    input: JsonObject


# ------------------------------------------------------------------------- management


class ManagementRequest(WireModel):
    """A human's management operation on one Source."""

    source_key: InstanceKey
    operation: Id
    input: JsonObject = FrozenDict()
    scope: Scope = Scope()
    confirmed: StrictBool = False
    expected_revision: Revision | None = None


class ManageRequest(WireModel):
    """What a Source's `manage()` receives; a mutation is confirmed and revision-fenced."""

    instance_key: InstanceKey
    scope: Scope
    operation: ManagementOperation
    input: JsonObject
    expected_revision: Revision | None = None


class ManagementResult(WireModel):
    """The JSON outcome of one management operation."""

    source_key: InstanceKey
    operation: Id
    output: JsonValue = None
    revision: Revision | None = None


class ManagementEntry(WireModel):
    """One manageable Source in the catalog: its form and operations, never its data."""

    source_key: InstanceKey
    type_id: Id
    role: Id
    package_name: PackageName
    label: Label
    description: Description
    fields: tuple[ManagementField, ...]
    operations: tuple[ManagementOperation, ...]
