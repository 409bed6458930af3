"""The manifest rules of the Contributions mnemon judges but does not host.

A Quivr plugin may declare a `subscription` (alert rules) or a `connector` (source
collectors) beside what mnemon hosts, or only those. mnemon runs neither, yet `mnemon plugin
inspect` judges their manifest the way Quivr's own inspector does, so a plugin author gets the
same verdict and codes: schemas that compile (`invalid_expression_schema`,
`invalid_config_schema`, `invalid_credential_schema`), a push kind that keeps pull
(`invalid_modes`), a connector kind's API routes (`invalid_connector_api`), and the later Plugin
API features each uses (attachments 0.4, the push mode 0.5, subscription vectors 0.10, API
routes 0.11, instance tokens and signatures 0.12), which the inspector checks against the range.

The rules of API routes are mnemon's reading of the protocol's summary and Quivr's normative
manifests (docs/quivr.md lists what is read into them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mnemon.versions import parse_version

from ._issues import Feature, ManifestIssue, compiles

__all__ = ["connector_rules", "subscription_rules"]

CONNECTOR = "/contributions/connector"
SUBSCRIPTION = "/contributions/subscription"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_PARAMETER = re.compile(r"\{([a-z][a-z0-9_]{0,31})\}")
# a literal path segment: unreserved URL characters, never `.` or `..` on their own
_LITERAL = re.compile(r"[A-Za-z0-9._~-]{1,64}")
# an HTTP header name (a token of RFC 9110)
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
METHODS = frozenset({"GET", "POST"})
#: each route authentication and the Plugin API version that brought it
AUTHS = {
    "quivr_key": parse_version("0.11.0"),
    "instance_token": parse_version("0.12.0"),
    "signature": parse_version("0.12.0"),
}
ROUTE_KEYS = frozenset({"name", "method", "path", "auth", "request_schema", "signature"})
SIGNATURE_KEYS = frozenset({"header", "timestamp_header", "window_seconds"})
MAX_ROUTES = 32
MAX_PATH = 256
MAX_WINDOW_SECONDS = 86_400
# headers a signature cannot live in: the core, a proxy or HTTP itself owns them
RESERVED_HEADERS = frozenset(
    {
        "authorization",
        "connection",
        "content-length",
        "content-type",
        "cookie",
        "forwarded",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "set-cookie",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
    }
)
ATTACHMENTS_SINCE = parse_version("0.4.0")
PUSH_SINCE = parse_version("0.5.0")
VECTORS_SINCE = parse_version("0.10.0")
API_SINCE = parse_version("0.11.0")

Rules = tuple[list[ManifestIssue], list[Feature]]


def subscription_rules(subscription: Any) -> Rules:
    """The broken rules and later features of a `subscription` Contribution."""
    issues: list[ManifestIssue] = []
    features: list[Feature] = []
    if not isinstance(subscription, Mapping):
        return issues, features  # a schema_violation already
    for key, code in (
        ("expression_schema", "invalid_expression_schema"),
        ("configuration_schema", "invalid_config_schema"),
    ):
        if key in subscription and not compiles(subscription[key]):
            issues.append(
                ManifestIssue(code, f"{SUBSCRIPTION}/{key}", "not a valid JSON Schema 2020-12")
            )
    vectors = subscription.get("vectors")
    if isinstance(vectors, Mapping):
        features.append(Feature(f"{SUBSCRIPTION}/vectors", "subscription vectors", VECTORS_SINCE))
        selection = vectors.get("query_expression_schema")
        if selection is not None and not compiles(selection):
            issues.append(
                ManifestIssue(
                    "invalid_expression_schema",
                    f"{SUBSCRIPTION}/vectors/query_expression_schema",
                    "not a valid JSON Schema 2020-12",
                )
            )
    return issues, features


def connector_rules(connector: Any) -> Rules:
    """The broken rules and later features of a `connector` Contribution."""
    issues: list[ManifestIssue] = []
    features: list[Feature] = []
    if not isinstance(connector, Mapping):
        return issues, features
    if "attachments" in connector:
        features.append(
            Feature(f"{CONNECTOR}/attachments", "connector attachments", ATTACHMENTS_SINCE)
        )
    kinds = connector.get("kinds")
    if not isinstance(kinds, Mapping):
        return issues, features
    for name, kind in kinds.items():
        if isinstance(kind, Mapping):
            kind_issues, kind_features = _kind_rules(f"{CONNECTOR}/kinds/{name}", kind)
            issues += kind_issues
            features += kind_features
    return issues, features


def _kind_rules(path: str, kind: Mapping[str, Any]) -> Rules:
    issues: list[ManifestIssue] = []
    features: list[Feature] = []
    for key, code in (
        ("config_schema", "invalid_config_schema"),
        ("credential_schema", "invalid_credential_schema"),
    ):
        if key in kind and not compiles(kind[key]):
            issues.append(ManifestIssue(code, f"{path}/{key}", "not a valid JSON Schema 2020-12"))
    modes = kind.get("modes")
    modes = list(modes) if isinstance(modes, list) else ["pull"]
    if "push" in modes:
        features.append(Feature(f"{path}/modes", "the push mode", PUSH_SINCE))
        if "pull" not in modes:
            issues.append(
                ManifestIssue(
                    "invalid_modes",
                    f"{path}/modes",
                    "a push kind also declares pull: polling is its fallback",
                )
            )
    if "api" in kind:
        features.append(Feature(f"{path}/api", "connector API routes", API_SINCE))
        api_issues = _api_rules(f"{path}/api", kind["api"], push="push" in modes)
        issues += api_issues
        if not api_issues:
            # the routes agree on one authentication (a rule above): its version counts once
            auth = kind["api"]["routes"][0]["auth"]
            if AUTHS[auth] > API_SINCE:
                features.append(Feature(f"{path}/api", f"{auth} API routes", AUTHS[auth]))
    return issues, features


def _api_issue(path: str, message: str) -> ManifestIssue:
    return ManifestIssue("invalid_connector_api", path, message)


def _api_rules(path: str, api: Any, *, push: bool) -> list[ManifestIssue]:
    """`invalid_connector_api`: the API routes a push kind serves through the core."""
    if not isinstance(api, Mapping) or set(api) != {"routes"}:
        return [_api_issue(path, "an api holds exactly its routes")]
    routes = api["routes"]
    if not isinstance(routes, list) or not 1 <= len(routes) <= MAX_ROUTES:
        return [_api_issue(f"{path}/routes", f"1 to {MAX_ROUTES} routes")]
    issues = [] if push else [_api_issue(path, "API routes need the kind's push mode")]
    names: set[str] = set()
    shapes: dict[tuple[str, tuple[str, ...]], int] = {}
    auths: set[Any] = set()
    for index, route in enumerate(routes):
        where = f"{path}/routes/{index}"
        if not isinstance(route, Mapping) or not {"name", "method", "path", "auth"} <= set(route):
            issues.append(_api_issue(where, "a route has a name, a method, a path and an auth"))
            continue
        issues += _route_rules(where, route)
        name = route["name"]
        if isinstance(name, str):
            if name in names:
                issues.append(_api_issue(f"{where}/name", "two routes share a name"))
            names.add(name)
        shape = _shape(route["path"])
        if shape is not None and isinstance(route["method"], str):
            key = (route["method"], shape)
            if key in shapes:
                issues.append(
                    _api_issue(
                        f"{where}/path",
                        f"the path matches the same requests as route {shapes[key]}'s",
                    )
                )
            shapes.setdefault(key, index)
        auths.add(route["auth"] if isinstance(route["auth"], str) else None)
    if len(auths) > 1:
        issues.append(_api_issue(f"{path}/routes", "every route of a kind uses the same auth"))
    return issues


def _route_rules(where: str, route: Mapping[str, Any]) -> list[ManifestIssue]:
    issues = []
    unknown = set(route) - ROUTE_KEYS
    if unknown:
        issues.append(_api_issue(where, "a route field the protocol does not define"))
    if not isinstance(route["name"], str) or not _NAME.fullmatch(route["name"]):
        issues.append(_api_issue(f"{where}/name", "a lowercase name of at most 32 characters"))
    if route["method"] not in METHODS:
        issues.append(_api_issue(f"{where}/method", "GET or POST"))
    if _shape(route["path"]) is None:
        issues.append(
            _api_issue(
                f"{where}/path",
                "a relative path of literal segments and {name} templates, without . or ..",
            )
        )
    auth = route["auth"]
    if auth not in AUTHS:
        issues.append(_api_issue(f"{where}/auth", "quivr_key, instance_token or signature"))
    if "request_schema" in route and not compiles(route["request_schema"]):
        issues.append(_api_issue(f"{where}/request_schema", "not a valid JSON Schema 2020-12"))
    if auth == "signature":
        issues += _signature_rules(f"{where}/signature", route.get("signature"))
    elif "signature" in route:
        issues.append(_api_issue(f"{where}/signature", "signature metadata needs auth: signature"))
    return issues


def _signature_rules(where: str, signature: Any) -> list[ManifestIssue]:
    if not isinstance(signature, Mapping) or "header" not in signature:
        return [_api_issue(where, "a signature route names the header its signature comes in")]
    issues = []
    if set(signature) - SIGNATURE_KEYS:
        issues.append(_api_issue(where, "a signature field the protocol does not define"))
    for key in ("header", "timestamp_header"):
        if key not in signature:
            continue
        header = signature[key]
        if not isinstance(header, str) or not _HEADER.fullmatch(header):
            issues.append(_api_issue(f"{where}/{key}", "not an HTTP header name"))
        elif header.lower() in RESERVED_HEADERS:
            issues.append(_api_issue(f"{where}/{key}", "a header HTTP or the core owns"))
    window = signature.get("window_seconds")
    if "window_seconds" in signature and (
        type(window) is not int or not 1 <= window <= MAX_WINDOW_SECONDS
    ):
        issues.append(
            _api_issue(
                f"{where}/window_seconds",
                f"a replay window of 1 to {MAX_WINDOW_SECONDS} seconds",
            )
        )
    return issues


def _shape(path: Any) -> tuple[str, ...] | None:
    """The segments of a route path with every template as `{}`, or None when it is unsafe.

    Two routes of one method with the same shape match the same requests: a literal segment
    takes precedence over a template, so only templates in the same places are ambiguous.
    """
    if not isinstance(path, str) or not 0 < len(path) <= MAX_PATH:
        return None
    shape = []
    for segment in path.split("/"):
        if _PARAMETER.fullmatch(segment):
            shape.append("{}")
        elif _LITERAL.fullmatch(segment) and segment not in (".", ".."):
            shape.append(segment)
        else:
            return None
    return tuple(shape)
