"""What plugins declare: Source and Strategy manifests, routes, actions, management forms."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, Strict, field_validator, model_validator

from .._json import unique
from .base import (
    ID_PATTERN,
    Consistency,
    Description,
    Id,
    InputSchema,
    Label,
    PackageName,
    SourceCapability,
    StrictBool,
    StrictInt,
    WireModel,
)


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
