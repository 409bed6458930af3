"""The identity a page is for: the scope picker's fields, read from the page's address.

Every page that reads memory or a Source's state does it for one identity (user, agent,
session, workspace, tenant), which the person picks in the scope picker. The values travel
in the page's query string (`?user=ada&workspace=w`), so every link and form of the page
keeps them. A Source says which of them it cannot serve without (its `partition_keys`): the
picker asks for those first, and a page names the ones missing instead of reading nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from pydantic import ValidationError
from starlette.requests import Request

from mnemon import Scope

__all__ = ["FLAGS", "SCOPE_FIELDS", "Identity", "identity_of", "scope_of"]

# the identity a page is for: query parameter -> Scope field
SCOPE_FIELDS = {
    "user": "user_id",
    "agent": "agent_id",
    "session": "session_id",
    "workspace": "workspace",
    "tenant": "tenant_id",
}
# Scope field -> query parameter
FLAGS = {scope_field: flag for flag, scope_field in SCOPE_FIELDS.items()}


def scope_of(request: Request) -> tuple[Scope, dict[str, str], str | None]:
    """The identity the page's query names, the values as given, and why it is invalid."""
    given = {
        name: value
        for name in SCOPE_FIELDS
        if (value := request.query_params.get(name, "").strip())
    }
    try:
        return Scope.model_validate({SCOPE_FIELDS[k]: v for k, v in given.items()}), given, None
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = str(error["loc"][0]) if error["loc"] else "identity"
        flag = FLAGS.get(where, where)
        return Scope(), given, f"{flag}: {str(error['msg']).removeprefix('Value error, ')}"


@dataclass(frozen=True, slots=True)
class Identity:
    """The identity a page is for: the scope, the values as given, and why it is invalid."""

    scope: Scope
    given: Mapping[str, str] = field(default_factory=dict)
    """The picker's values by flag (`user`, `workspace`), as the address gave them."""
    invalid: str | None = None
    """Why the values are not a scope (`user: ...`), or None."""

    def query(self, **more: str | int | None) -> str:
        """The query string that keeps this identity, with `more` parameters (None: left out)."""
        pairs = [*self.given.items()]
        pairs += [(key, str(value)) for key, value in more.items() if value is not None]
        return urlencode(pairs)

    def missing(self, partition_keys: Iterable[str]) -> list[str]:
        """The flags of the scope ids a Source partitions by that this identity lacks."""
        return [
            FLAGS.get(key, key)
            for key in partition_keys
            if getattr(self.scope, key, None) in (None, "")
        ]


def identity_of(request: Request) -> Identity:
    """The identity the request's address names."""
    scope, given, invalid = scope_of(request)
    return Identity(scope, given, invalid)
