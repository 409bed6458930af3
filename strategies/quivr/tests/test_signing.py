"""Signed engine requests against every probe of Quivr's authentication cases."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import httpx
import pytest
from mnemon_strategy_quivr import (
    EngineRequestAuth,
    SignatureRejected,
    sign_engine_request,
    verify_engine_request,
)
from quivr_fixtures import load

CASES = load("authentication/cases.json")["cases"]
SECRET = b"engine-signing-key-for-tests-0123456789"
PLUGIN = "plugin"
NOW = 1_800_000_000
TARGET = "/v0/discovery"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _probe_token(case) -> str:
    """The token a probe sends, built from the case's description."""
    iat = NOW - case["issued_seconds_ago"]
    claims = {
        "aud": case["audience"],
        "plugin_id": PLUGIN,
        "contribution": "retrieval",
        "method": "GET",
        "target": TARGET,
        "body_sha256": hashlib.sha256(case["body"].encode()).hexdigest(),
        "iat": iat,
        "exp": iat + case.get("lifetime_seconds", 30),
        **case.get("claims", {}),
    }
    header = {"alg": case.get("algorithm", "HS256"), "typ": "quivr-engine+jwt"}
    encoding = case.get("json_encoding", "utf-8")
    signing_input = ".".join(_b64(json.dumps(part).encode(encoding)) for part in (header, claims))
    if case["name"] in ("unsigned",) or header["alg"] == "none":
        return signing_input + "."
    key = b"another key entirely, not the plugin's" if case["name"] == "forged" else SECRET
    return (
        signing_input + "." + _b64(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())
    )


async def plugin_app(scope, receive, send):
    """A bare ASGI plugin endpoint that answers 200 only to a verified engine request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    target = scope["raw_path"].decode() + (
        ("?" + scope["query_string"].decode()) if scope["query_string"] else ""
    )
    token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
    try:
        verify_engine_request(
            token,
            SECRET,
            audience=PLUGIN,
            plugin_id=PLUGIN,
            contribution="retrieval",
            method=scope["method"],
            target=target,
            body=body,
            now=NOW,
        )
        status = 200
    except SignatureRejected:
        status = 401
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
async def test_every_probe_gets_its_status(case):
    assert len(CASES) == 13
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=plugin_app), base_url="http://plugin"
    ) as client:
        response = await client.request(
            "GET",
            TARGET,
            content=case["sent_body"].encode(),
            headers={"Authorization": f"Bearer {_probe_token(case)}"},
        )
    assert response.status_code == case["expected_status"]


async def test_the_httpx_signer_is_accepted_and_binds_the_body():
    auth = EngineRequestAuth(SECRET, plugin_id=PLUGIN, contribution="retrieval", clock=lambda: NOW)
    transport = httpx.ASGITransport(app=plugin_app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://plugin", auth=auth
    ) as client:
        assert (await client.request("GET", TARGET, content=b"{}")).status_code == 200
        # the target signed is the path with its query
        assert (await client.request("GET", TARGET + "?x=1", content=b"{}")).status_code == 200
        signed = next(auth.auth_flow(client.build_request("GET", TARGET, content=b"{}")))
    async with httpx.AsyncClient(transport=transport, base_url="http://plugin") as replayer:
        header = {"Authorization": signed.headers["Authorization"]}
        assert (
            await replayer.request("GET", TARGET, content=b"{}", headers=header)
        ).status_code == 200
        assert (
            await replayer.request("GET", TARGET, content=b'{"x":1}', headers=header)
        ).status_code == 401
        assert (
            await replayer.request("GET", TARGET + "?x=1", content=b"{}", headers=header)
        ).status_code == 401


def test_one_signer_for_every_contribution_names_each_requests_own():
    # a plugin declaring ingestion and retrieval is reached through one client
    auth = EngineRequestAuth(SECRET, plugin_id=PLUGIN, clock=lambda: NOW)
    for path, contribution in [
        ("/v0/contributions/ingestion/embed_query", "ingestion"),
        ("/v0/contributions/retrieval/search", "retrieval"),
    ]:
        signed = next(auth.auth_flow(httpx.Request("POST", f"http://plugin{path}", content=b"{}")))
        token = signed.headers["Authorization"].removeprefix("Bearer ")
        claims = verify_engine_request(
            token,
            SECRET,
            audience=PLUGIN,
            plugin_id=PLUGIN,
            contribution=contribution,
            method="POST",
            target=path,
            body=b"{}",
            now=NOW,
        )
        assert claims.contribution == contribution
    # a route of no Contribution goes unsigned: a token names what it may call
    health = next(auth.auth_flow(httpx.Request("GET", "http://plugin/v0/health")))
    assert "Authorization" not in health.headers


def test_signed_tokens_carry_exactly_the_eight_claims():
    token = sign_engine_request(
        SECRET,
        audience=PLUGIN,
        plugin_id=PLUGIN,
        contribution="retrieval",
        method="post",
        target="/v0/contributions/retrieval/search",
        body=b"{}",
        issued_at=NOW,
        lifetime_seconds=60,
    )
    header, claims, _ = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {
        "alg": "HS256",
        "typ": "quivr-engine+jwt",
    }
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=="))
    assert set(decoded) == {
        "aud",
        "plugin_id",
        "contribution",
        "method",
        "target",
        "body_sha256",
        "iat",
        "exp",
    }
    assert decoded["method"] == "POST"
    assert decoded["exp"] - decoded["iat"] == 60
    with pytest.raises(ValueError, match="lifetime_seconds"):
        sign_engine_request(
            SECRET,
            audience=PLUGIN,
            plugin_id=PLUGIN,
            contribution="retrieval",
            method="GET",
            target="/",
            body=b"",
            issued_at=NOW,
            lifetime_seconds=61,
        )


def test_an_extra_claim_is_rejected_and_the_message_never_quotes_the_token():
    iat = NOW
    claims = {
        "aud": PLUGIN,
        "plugin_id": PLUGIN,
        "contribution": "retrieval",
        "method": "GET",
        "target": TARGET,
        "body_sha256": hashlib.sha256(b"{}").hexdigest(),
        "iat": iat,
        "exp": iat + 30,
        "sub": "SECRETISH",
    }
    signing_input = ".".join(
        _b64(json.dumps(p).encode()) for p in ({"alg": "HS256", "typ": "quivr-engine+jwt"}, claims)
    )
    token = (
        signing_input
        + "."
        + _b64(hmac.new(SECRET, signing_input.encode(), hashlib.sha256).digest())
    )
    with pytest.raises(SignatureRejected) as caught:
        _verify(token)
    message = str(caught.value)
    assert "eight" in message
    assert "SECRETISH" not in message
    assert token not in message


def _signed(header: str, payload: str) -> str:
    """A token whose MAC covers exactly these encoded parts, as a lax signer could send."""
    signing_input = f"{header}.{payload}"
    return (
        f"{signing_input}.{_b64(hmac.new(SECRET, signing_input.encode(), hashlib.sha256).digest())}"
    )


def _noncanonical(part: str) -> str:
    """`part` with unused low bits set in its last character: the same bytes, another text."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    assert len(part) % 4 in (2, 3)  # the last character carries unused bits
    return part[:-1] + alphabet[alphabet.index(part[-1]) + 1]


def _standard_alphabet(part: str) -> str:
    """The same bytes in base64's standard alphabet (`+`, `/`) instead of the URL-safe one."""
    assert "-" in part or "_" in part  # true of the fixed test token
    return part.translate(str.maketrans("-_", "+/"))


def _valid() -> str:
    return sign_engine_request(
        SECRET,
        audience=PLUGIN,
        plugin_id=PLUGIN,
        contribution="retrieval",
        method="GET",
        target=TARGET,
        body=b"{}",
        issued_at=NOW,
    )


def _verify(token: str) -> None:
    verify_engine_request(
        token,
        SECRET,
        audience=PLUGIN,
        plugin_id=PLUGIN,
        contribution="retrieval",
        method="GET",
        target=TARGET,
        body=b"{}",
        now=NOW,
    )


def _with_signature(change) -> str:
    header, payload, signature = _valid().split(".")
    return f"{header}.{payload}.{change(signature)}"


def _with_header(change) -> str:
    header, payload, _ = _valid().split(".")
    return _signed(change(header), payload)


def _with_payload(change) -> str:
    header, payload, _ = _valid().split(".")
    return _signed(header, change(payload))


def _spaced(payload: str) -> str:
    """The same claims, encoded with trailing JSON whitespace so the last character has spare bits."""
    data = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    while len(data) % 3 == 0:
        data += b" "
    return _b64(data)


def test_claims_with_trailing_whitespace_verify_when_canonically_encoded():
    _verify(_with_payload(_spaced))  # so the unused-bits case below fails on its encoding alone


ALTERED = {
    "junk-after-signature": lambda: _with_signature(lambda s: s + "*!"),
    "junk-inside-signature": lambda: _with_signature(lambda s: s[:10] + " " + s[10:]),
    "signature-standard-alphabet": lambda: _with_signature(_standard_alphabet),
    "signature-padded": lambda: _with_signature(lambda s: s + "="),
    "signature-unused-bits": lambda: _with_signature(_noncanonical),
    "signature-non-ascii": lambda: _with_signature(lambda s: s + "\u00e9"),
    "junk-in-signed-header": lambda: _with_header(lambda h: h + "!"),
    "header-unused-bits": lambda: _with_header(_noncanonical),
    "junk-in-signed-payload": lambda: _with_payload(lambda p: p[:5] + "~" + p[5:]),
    "payload-unused-bits": lambda: _with_payload(lambda p: _noncanonical(_spaced(p))),
    "payload-one-extra-character": lambda: _with_payload(lambda p: p + "A" * (1 - len(p) % 4)),
}


@pytest.mark.parametrize("build", ALTERED.values(), ids=list(ALTERED))
def test_any_altered_encoding_is_refused_naming_the_rule(build):
    _verify(_valid())  # the token as signed verifies
    token = build()
    with pytest.raises(SignatureRejected) as caught:
        _verify(token)
    assert "base64url" in caught.value.reason
    assert token.split(".")[2] not in str(caught.value)
    assert token not in str(caught.value)
