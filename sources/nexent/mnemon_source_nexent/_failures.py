"""One table from Nexent's failure codes to mnemon's `SourceError`, and back."""

from __future__ import annotations

from typing import Literal

from mnemon import SourceError

from .models import ProviderErrorCode, ProviderErrorSeverity, _ProviderException

__all__ = ["NEXENT_FAILURES", "nexent_code", "source_error"]

SourceErrorKind = Literal["transient", "access", "terminal", "degraded"]

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
_BY_SOURCE_CODE = {code: nexent for nexent, (code, _) in NEXENT_FAILURES.items()}


def source_error(failure: _ProviderException, subject: str) -> SourceError:
    """The `SourceError` for a Nexent exception: mapped code and kind, origin code, retry-after.

    The message is `subject`'s: the provider's text may quote a URL or a token.
    """
    code, kind = NEXENT_FAILURES[failure.code]
    retry_after = failure.retry_after_seconds
    if retry_after is not None and (retry_after < 0 or retry_after != retry_after):
        retry_after = None
    return SourceError(
        code,
        f"{subject} failed ({failure.code.value})",
        kind=kind or _KIND_OF_SEVERITY[failure.severity],
        retry_after=retry_after,
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
