"""Signed engine requests (Quivr Plugin API 0.14): an HS256 JWS in `Authorization: Bearer`.

The token binds one request: the plugin (`aud`, `plugin_id`), the Contribution, the method,
the target (path and query) and the SHA-256 of the exact body, for at most 60 seconds. Only the
standard library is used: HS256 is one HMAC, and a general JOSE library would bring algorithms
(and `alg` confusion) this profile forbids.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from mnemon.sdk import MnemonError

__all__ = [
    "CLAIMS",
    "MAX_LIFETIME_SECONDS",
    "TOKEN_TYPE",
    "EngineRequestAuth",
    "EngineRequestClaims",
    "SignatureRejected",
    "contribution_of",
    "sign_engine_request",
    "verify_engine_request",
]

TOKEN_TYPE = "quivr-engine+jwt"
CLAIMS = frozenset(
    {"aud", "plugin_id", "contribution", "method", "target", "body_sha256", "iat", "exp"}
)
MAX_LIFETIME_SECONDS = 60


class SignatureRejected(MnemonError):
    """A signed engine request that does not verify; `reason` names the rule, never the token."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"engine request signature rejected: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class EngineRequestClaims:
    """The eight claims of a verified engine request."""

    aud: str
    plugin_id: str
    contribution: str
    method: str
    target: str
    body_sha256: str
    iat: int
    exp: int


# JWS (RFC 7515, section 2): base64url with the URL-safe alphabet and no padding
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str, part: str) -> bytes:
    """`text` decoded as strict, canonical base64url; refused naming `part` otherwise.

    The standard library's decoder skips characters outside its alphabet and ignores the
    unused bits of the last character, so one token could be written many ways: only the one
    encoding the signer produces is accepted.
    """
    # a length of 1 mod 4 leaves fewer than 8 bits: no byte string encodes to it
    if _BASE64URL.fullmatch(text) is None or len(text) % 4 == 1:
        raise SignatureRejected(f"the {part} is not base64url without padding")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise SignatureRejected(f"the {part} is not canonical base64url")
    return data


def _json(data: bytes) -> Any:
    try:
        # JWS JSON is UTF-8; a UTF-16 (or any other) encoding is refused, not guessed
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SignatureRejected("header or claims are not UTF-8 JSON") from None


def _mac(secret: bytes, signing_input: str) -> bytes:
    return hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()


def sign_engine_request(
    secret: bytes,
    *,
    audience: str,
    plugin_id: str,
    contribution: str,
    method: str,
    target: str,
    body: bytes,
    issued_at: int,
    lifetime_seconds: int = 30,
) -> str:
    """The compact HS256 JWS for one engine request.

    Raises:
        ValueError: when the lifetime is not within 1 to 60 seconds.
    """
    if not 0 < lifetime_seconds <= MAX_LIFETIME_SECONDS:
        raise ValueError(f"lifetime_seconds: must be within 1 and {MAX_LIFETIME_SECONDS}")
    header = {"alg": "HS256", "typ": TOKEN_TYPE}
    claims = {
        "aud": audience,
        "plugin_id": plugin_id,
        "contribution": contribution,
        "method": method.upper(),
        "target": target,
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "iat": issued_at,
        "exp": issued_at + lifetime_seconds,
    }
    signing_input = ".".join(
        _b64(json.dumps(part, separators=(",", ":")).encode("utf-8")) for part in (header, claims)
    )
    return f"{signing_input}.{_b64(_mac(secret, signing_input))}"


def _claims(value: Any) -> EngineRequestClaims:
    if not isinstance(value, Mapping) or set(value) != CLAIMS:
        raise SignatureRejected("the claims are not exactly the eight engine claims")
    for name in ("iat", "exp"):
        if type(value[name]) is not int:
            raise SignatureRejected(f"claim {name} is not an integer")
    for name in CLAIMS - {"iat", "exp"}:
        if not isinstance(value[name], str):
            raise SignatureRejected(f"claim {name} is not a string")
    return EngineRequestClaims(**value)


def verify_engine_request(
    token: str,
    secret: bytes,
    *,
    audience: str,
    plugin_id: str,
    contribution: str,
    method: str,
    target: str,
    body: bytes,
    now: int,
) -> EngineRequestClaims:
    """Verify one engine request's token against the request as received.

    Each part must be canonical base64url without padding, so a token verifies only in the
    exact text it was signed as.

    Raises:
        SignatureRejected: naming the rule the token breaks.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise SignatureRejected("malformed token")
    header = _json(_unb64(parts[0], "header"))
    if not isinstance(header, Mapping) or header.get("alg") != "HS256":
        raise SignatureRejected("the algorithm is not HS256")
    if header.get("typ") != TOKEN_TYPE or set(header) - {"alg", "typ"}:
        raise SignatureRejected(f"the header is not a {TOKEN_TYPE} header")
    if not parts[2]:
        raise SignatureRejected("bad signature")  # unsigned
    payload = _unb64(parts[1], "payload")
    signature = _unb64(parts[2], "signature")
    # the signature is checked before any claim is trusted
    if not hmac.compare_digest(signature, _mac(secret, f"{parts[0]}.{parts[1]}")):
        raise SignatureRejected("bad signature")
    claims = _claims(_json(payload))
    if not 0 < claims.exp - claims.iat <= MAX_LIFETIME_SECONDS:
        raise SignatureRejected(f"the lifetime is not within 1 and {MAX_LIFETIME_SECONDS} seconds")
    if claims.iat > now:
        raise SignatureRejected("issued in the future")
    if claims.exp <= now:
        raise SignatureRejected("expired")
    expected = {
        "aud": audience,
        "plugin_id": plugin_id,
        "contribution": contribution,
        "method": method.upper(),
        "target": target,
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }
    for name, wanted in expected.items():
        if not hmac.compare_digest(getattr(claims, name).encode(), wanted.encode()):
            raise SignatureRejected(f"claim {name} does not match the request")
    return claims


def contribution_of(path: str) -> str | None:
    """The Contribution a route belongs to (`/v0/contributions/<name>/...`), or None."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[:3] == ["", "v0", "contributions"] and parts[3]:
        return parts[3]
    return None


class EngineRequestAuth(httpx.Auth):
    """httpx authentication that signs every request to one plugin.

    Args:
        secret: the shared HS256 key.
        plugin_id: the plugin's id (also the audience).
        contribution: the Contribution called (`retrieval`); None for the one each request's
            route names, so one client serves a plugin's every Contribution. A request to a
            route of no Contribution (health, discovery) then goes unsigned: a token names the
            Contribution it may call.
        clock: seconds since the epoch, as an integer.
        lifetime_seconds: each token's lifetime (1 to 60).
    """

    requires_request_body = True

    def __init__(
        self,
        secret: bytes,
        *,
        plugin_id: str,
        contribution: str | None = None,
        clock: Any,
        lifetime_seconds: int = 30,
    ) -> None:
        self._secret = secret
        self._plugin_id = plugin_id
        self._contribution = contribution
        self._clock = clock
        self._lifetime = lifetime_seconds

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add `Authorization: Bearer <JWS>` bound to this request."""
        target = request.url.raw_path.decode("ascii")
        contribution = self._contribution or contribution_of(request.url.path)
        if contribution is None:
            yield request
            return
        token = sign_engine_request(
            self._secret,
            audience=self._plugin_id,
            plugin_id=self._plugin_id,
            contribution=contribution,
            method=request.method,
            target=target,
            body=request.content,
            issued_at=int(self._clock()),
            lifetime_seconds=self._lifetime,
        )
        request.headers["Authorization"] = f"Bearer {token}"
        yield request
