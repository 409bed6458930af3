"""The error family: one root, `MnemonError`, and the subclasses callers catch."""

from __future__ import annotations

import math
import re
from typing import Literal

__all__ = [
    "ActionError",
    "CompositionRejected",
    "CompositionUnavailable",
    "DefinitionError",
    "InstallError",
    "MaintenanceError",
    "ManagementError",
    "MnemonError",
    "RevisionConflict",
    "RouteError",
    "SourceError",
    "SourceErrorKind",
]

SourceErrorKind = Literal["transient", "access", "terminal", "degraded"]
SourceErrorKind.__doc__ = """The class of a `SourceError`: what a caller can do about it.

`transient` (try again later), `access` (credentials or permissions must change), `terminal`
(the same call fails again) or `degraded` (served partially).
"""

_KIND_OF_CODE: dict[str, SourceErrorKind] = {
    "timeout": "transient",
    "rate_limited": "transient",
    "provider_error": "transient",
    "unauthorized": "access",
    "forbidden": "access",
    "invalid_payload": "terminal",
    "schema_mismatch": "terminal",
    "degraded": "degraded",
    "idempotency-conflict": "terminal",
}
_CODE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
# a foreign system's own code (`rate_limited`, `http-429`, `E_QUOTA`): short, no spaces, so it
# can never carry message text into a receipt or telemetry
_ORIGIN_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class MnemonError(Exception):
    """Root of every error mnemon raises on purpose."""


class DefinitionError(MnemonError, ValueError):
    """A definition (manifest, descriptor, configuration field) is invalid; names the field."""


class InstallError(MnemonError):
    """A plugin could not be installed, mounted or unmounted."""


class CompositionUnavailable(MnemonError):
    """No generation is serving, so no View can be composed right now."""


class CompositionRejected(MnemonError):
    """A candidate generation or a View was rejected; the message names the rule broken."""


class _CodedError(MnemonError):
    """An error with a stable `code` hosts can branch on (`released`, `timeout`, ...)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "refused",
        retryable: bool = False,
        kind: SourceErrorKind | None = None,
        retry_after: float | None = None,
        origin_code: str | None = None,
        source_key: str | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        #: the Source whose call failed or timed out, when a Source's call is the cause
        self.source_key = source_key
        #: the failure class of the Source's `SourceError`, when one caused this error
        self.kind = kind
        #: seconds the Source asked to wait before trying again, when it said
        self.retry_after = retry_after
        #: the foreign system's own code behind the Source's error, when it gave one
        self.origin_code = origin_code


class RouteError(_CodedError):
    """A route read could not run or its result broke the contract.

    `code` is one of `released`, `unknown-route`, `invalid-input`, `invalid-budget`,
    `call-budget-exhausted`, `timeout`, `source-failed`, `contract`, or the code of a
    `SourceError` the Source raised; `retryable` tells whether trying later may succeed. For a
    `SourceError`, `kind`, `retry_after` and `origin_code` are the Source's own too; when the
    Source's call failed or timed out, `source_key` names the Source.
    """


class ActionError(_CodedError):
    """A write did not succeed; `receipt` says honestly how far it got.

    `code` is one of `released`, `unknown-offer`, `invalid-input`, `not-authorized`,
    `timeout`, `source-failed`, `contract`, or the code of a `SourceError` the Source raised
    (whose `kind`, `retry_after` and `origin_code` are carried too, and repeated in the
    receipt's `detail`; `source_key` names the Source whose call failed or timed out).
    `receipt` is None when nothing was attempted; otherwise its `completion` is `failed` (the
    Source refused: nothing was written) or `unknown` (the write may or may not have happened).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "refused",
        retryable: bool = False,
        receipt: object | None = None,
        kind: SourceErrorKind | None = None,
        retry_after: float | None = None,
        origin_code: str | None = None,
        source_key: str | None = None,
    ):
        super().__init__(
            message,
            code=code,
            retryable=retryable,
            kind=kind,
            retry_after=retry_after,
            origin_code=origin_code,
            source_key=source_key,
        )
        self.receipt = receipt
        #: the maintenance the host ran after the Source refused this write, when it ran one
        #: and it did not make room: a `MaintenanceError` (its `report` says per entry what
        #: happened) or the `MaintenanceReport` of a run after which the write still failed
        self.maintenance: object | None = None


class ManagementError(_CodedError):
    """A management operation was refused or failed.

    When the Source's own call failed or timed out, `source_key` names it and `kind`,
    `retry_after` and `origin_code` are those of its `SourceError`.
    """


class MaintenanceError(_CodedError):
    """Maintenance was refused or failed; what it did before stopping is in `report`.

    `code` says why: `no-maintenance-policy`, the policy's refusal (`ambiguous-archive`,
    `no-archive-source`, ...), `invalid-plan`, `write-scope-denied`, `write-scope-malformed`,
    `write-scope-mismatch`, `not-authorized`, `plan-changed`, or a failing Source's code.
    A refusal before any write changed nothing; `report` (a `MaintenanceReport`, or None when
    nothing was planned) says per entry what happened otherwise.
    """

    def __init__(self, message: str, *, code: str = "invalid-plan", report: object | None = None):
        super().__init__(message, code=code)
        self.report = report


class RevisionConflict(MnemonError):
    """An expected revision no longer matches the Source's current one."""


class SourceError(MnemonError):
    """An error a Source raises on purpose, with a stable code and a retry class.

    The message is written by the plugin author for the host developer; mnemon never copies
    it into a View, a diagnostic or a log line at INFO or above.

    Args:
        code: a stable code such as `timeout`, `rate_limited`, `provider_error`,
            `unauthorized`, `forbidden`, `invalid_payload`, `schema_mismatch` or `degraded`.
        message: text for the host developer.
        kind: the retry class; derived from well-known codes, otherwise `terminal`.
        nothing_written: for a write, whether the Source knows nothing was written (the
            receipt then says `failed` rather than `unknown`); by default true for the
            `access` and `terminal` classes.
        retry_after: seconds the origin asked to wait before trying again (a `Retry-After`
            header, a provider's hint); finite and not negative.
        origin_code: the foreign system's own code for the failure (a Nexent error code,
            `http-429`), 1 to 64 letters, digits, `_`, `.`, `:` or `-`; never message text.

    Raises:
        ValueError: a code, kind, retry-after or origin code breaks its rule.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        kind: SourceErrorKind | None = None,
        nothing_written: bool | None = None,
        retry_after: float | None = None,
        origin_code: str | None = None,
    ):
        if not _CODE.match(code):
            raise ValueError(f"SourceError code {code!r} must match {_CODE.pattern}")
        if kind is not None and kind not in ("transient", "access", "terminal", "degraded"):
            raise ValueError(f"SourceError kind {kind!r} is not a known class")
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or not math.isfinite(retry_after)
            or retry_after < 0
        ):
            raise ValueError("SourceError retry_after must be a finite number of seconds >= 0")
        if origin_code is not None and (
            not isinstance(origin_code, str) or not _ORIGIN_CODE.fullmatch(origin_code)
        ):
            raise ValueError(f"SourceError origin_code must match {_ORIGIN_CODE.pattern}")
        super().__init__(message or code)
        self.code = code
        self.kind: SourceErrorKind = kind or _KIND_OF_CODE.get(code, "terminal")
        self.nothing_written = (
            self.kind in ("access", "terminal") if nothing_written is None else nothing_written
        )
        self.retry_after: float | None = None if retry_after is None else float(retry_after)
        self.origin_code = origin_code

    @property
    def retryable(self) -> bool:
        """Whether retrying later may succeed (the `transient` class)."""
        return self.kind == "transient"
