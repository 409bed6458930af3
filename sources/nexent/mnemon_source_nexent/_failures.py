"""One table from Nexent's failure codes to mnemon's `SourceError`, and back.

A provider raises Nexent's exceptions: `RetryableProviderError(message, error)`,
`NonRetryableProviderError(message, error)` or `DegradableProviderError(message, error,
removable_units)`, where `error` is a `ProviderError` carrying the code. They are recognised by
their class name and shape, so this package's declarations, the real Nexent's classes and a
provider's own copies all map the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mnemon.sdk import SourceError, SourceErrorKind

from .models import ProviderErrorCode, ProviderErrorSeverity

__all__ = ["NEXENT_FAILURES", "ProviderFailure", "nexent_code", "provider_failure", "source_error"]

#: Nexent code -> (SourceError code, kind). The Nexent code itself survives as `origin_code`.
NEXENT_FAILURES: dict[ProviderErrorCode, tuple[str, SourceErrorKind | None]] = {
    ProviderErrorCode.TIMEOUT: ("timeout", "transient"),
    ProviderErrorCode.RATE_LIMITED: ("rate_limited", "transient"),
    ProviderErrorCode.PROVIDER_ERROR: ("provider_error", "transient"),
    ProviderErrorCode.UNAUTHORIZED: ("unauthorized", "access"),
    ProviderErrorCode.FORBIDDEN: ("forbidden", "access"),
    ProviderErrorCode.UNSUPPORTED_UNIT_TYPE: ("unsupported_unit_type", "terminal"),
    ProviderErrorCode.PARTIAL_ACCEPTANCE: ("degraded", "degraded"),
    ProviderErrorCode.INVALID_PAYLOAD: ("invalid_payload", "terminal"),
    ProviderErrorCode.SCHEMA_MISMATCH: ("schema_mismatch", "terminal"),
    # no class of its own: the exception's severity decides
    ProviderErrorCode.UNKNOWN: ("unknown", None),
}
_KIND_OF_SEVERITY: dict[ProviderErrorSeverity, SourceErrorKind] = {
    ProviderErrorSeverity.RETRYABLE: "transient",
    ProviderErrorSeverity.NON_RETRYABLE: "terminal",
    ProviderErrorSeverity.DEGRADABLE: "degraded",
}
_SEVERITY_OF_CLASS = {
    "RetryableProviderError": ProviderErrorSeverity.RETRYABLE,
    "NonRetryableProviderError": ProviderErrorSeverity.NON_RETRYABLE,
    "DegradableProviderError": ProviderErrorSeverity.DEGRADABLE,
}
_BY_SOURCE_CODE = {code: nexent for nexent, (code, _) in NEXENT_FAILURES.items()}
_MOST_REMOVABLE = 1_000


@dataclass(frozen=True)
class ProviderFailure:
    """What a provider's Nexent exception says: never its message, which may quote a secret."""

    code: ProviderErrorCode
    severity: ProviderErrorSeverity
    class_name: str
    """The exception's class (`RetryableProviderError`, ...)."""
    retry_after: float | None = None
    removable_units: tuple[str, ...] = ()
    """For a degradable failure: the `event_id`s of the units the provider cannot take."""


def provider_failure(exception: BaseException) -> ProviderFailure | None:
    """The Nexent failure `exception` stands for, or None when it is not one of Nexent's."""
    severity = None
    for klass in type(exception).__mro__:
        severity = _SEVERITY_OF_CLASS.get(klass.__name__)
        if severity is not None:
            break
    if severity is None:
        return None
    error = getattr(exception, "error", None)
    raw = getattr(error, "code", None)
    raw = getattr(raw, "value", raw)
    try:
        code = ProviderErrorCode(str(raw))
    except ValueError:
        code = ProviderErrorCode.UNKNOWN
    retry_after = getattr(error, "retry_after_seconds", None)
    if (
        isinstance(retry_after, bool)
        or not isinstance(retry_after, int | float)
        or not math.isfinite(retry_after)
        or retry_after < 0
    ):
        retry_after = None
    removable = getattr(exception, "removable_units", None)
    units: tuple[str, ...] = ()
    if isinstance(removable, list | tuple):
        units = tuple(
            str(unit) for unit in removable[:_MOST_REMOVABLE] if isinstance(unit, str | int)
        )
    return ProviderFailure(
        code=code,
        severity=severity,
        class_name=type(exception).__name__,
        retry_after=None if retry_after is None else float(retry_after),
        removable_units=units,
    )


def source_error(failure: ProviderFailure, subject: str) -> SourceError:
    """The `SourceError` for a Nexent failure: mapped code and kind, origin code, retry-after.

    The message is `subject`'s: the provider's text may quote a URL or a token.
    """
    code, kind = NEXENT_FAILURES[failure.code]
    return SourceError(
        code,
        f"{subject} failed ({failure.code.value})",
        kind=kind or _KIND_OF_SEVERITY[failure.severity],
        retry_after=failure.retry_after,
        origin_code=failure.code.value,
    )


def nexent_code(error: SourceError) -> ProviderErrorCode:
    """The Nexent code a `SourceError` stands for (its origin code first), else `unknown`."""
    for candidate in (error.origin_code, error.code):
        if candidate is None:
            continue
        try:
            return ProviderErrorCode(candidate)
        except ValueError:
            pass
        if candidate in _BY_SOURCE_CODE:
            return _BY_SOURCE_CODE[candidate]
    return ProviderErrorCode.UNKNOWN
