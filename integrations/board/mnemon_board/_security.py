"""Who may use the board: the access token, its cookie, CSRF, the Host header, CSP.

The board prints an address with a random token when it starts (as Jupyter does). Opening it
puts the token in an HttpOnly, SameSite=Strict cookie and sends the browser on to the same
page without it. Every request without that cookie (or the token itself) is refused, the page
assets included. A request that changes anything also carries the page's CSRF token (the
`X-CSRF-Token` header, or a `csrf` form field) and no foreign `Origin`. Only the board's own
host names are answered (a DNS-rebinding page cannot reach it), and every response forbids
inline scripts, framing and third-party content.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "Guard", "create_token"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_BODY = 1 << 20  # a form of the board is a few KB


def create_token() -> str:
    """A fresh access or CSRF token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def _same(given: str | bytes, expected: str) -> bool:
    # constant-time: the token is all that stands between a local process and the memory
    value = given.encode() if isinstance(given, str) else given
    return hmac.compare_digest(value, expected.encode())


class Guard:
    """ASGI middleware in front of the board: every check above, before any page runs.

    Args:
        app: the board's application.
        token: the access token printed at start.
        csrf: the token each state-changing request carries (given to pages, never in a URL).
        hosts: the `Host` header values answered (`127.0.0.1:8766`, `localhost:8766`).
        port: the port, which names the cookie (boards on other ports keep their own).
    """

    def __init__(
        self, app: ASGIApp, *, token: str, csrf: str, hosts: Iterable[str], port: int
    ) -> None:
        self.app = app
        self.token = token
        self.csrf = csrf
        self.hosts = frozenset(host.lower() for host in hosts)
        self.cookie = f"mnemon-board-{port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        headers = {key.lower(): value for key, value in scope.get("headers") or ()}
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            await _answer(send, 421, "This board answers only at the address it printed.")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None:
            if not _same(given, self.token):
                await _answer(send, 401, _UNAUTHORIZED)
                return
            # the token leaves the address bar (and the history) at once
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            target = scope.get("path", "/") + (f"?{rest}" if rest else "")
            cookie = (
                f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                f"{'; Secure' if scope.get('scheme') == 'https' else ''}"
            )
            await _answer(
                send, 303, "", (b"location", target.encode()), (b"set-cookie", cookie.encode())
            )
            return
        if not self._authorized(headers):
            await _answer(send, 401, _UNAUTHORIZED)
            return
        if scope.get("method", "GET") in _UNSAFE:
            origin = headers.get(b"origin")
            if (
                origin is not None
                and origin.decode("latin-1").lower().split("//", 1)[-1] not in self.hosts
            ):
                await _answer(send, 403, "Refused: this request comes from another site.")
                return
            body = await _body(receive)
            if body is None:
                await _answer(send, 413, "Refused: the request is too large.")
                return
            if not self._csrf_ok(headers, body):
                await _answer(
                    send,
                    403,
                    "Refused: the page's CSRF token is missing or wrong; reload the page.",
                )
                return
            receive = _replayed(body)
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        bearer = headers.get(b"authorization", b"")
        if bearer.startswith(b"Bearer ") and _same(bearer[7:], self.token):
            return True
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:  # a malformed Cookie header authorizes nothing
            return False
        morsel = cookies.get(self.cookie)
        return morsel is not None and _same(morsel.value, self.token)

    def _csrf_ok(self, headers: dict[bytes, bytes], body: bytes) -> bool:
        given = headers.get(b"x-csrf-token")
        if given is not None:
            return _same(given, self.csrf)
        kind = headers.get(b"content-type", b"").split(b";")[0].strip()
        if kind == b"application/x-www-form-urlencoded":
            fields = parse_qsl(body.decode("utf-8", errors="replace"))
            value = next((v for k, v in fields if k == "csrf"), None)
            return value is not None and _same(value, self.csrf)
        return False


_UNAUTHORIZED = (
    "This board needs its access token: open the address `mnemon board` printed "
    "(http://HOST:PORT/?token=...)."
)


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {key.lower() for key, _ in message.get("headers", [])}
            extra = [(key, value) for key, value in _HEADERS if key not in present]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def _answer(send: Send, status: int, text: str, *extra: tuple[bytes, bytes]) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode("utf-8")})


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replayed(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive
