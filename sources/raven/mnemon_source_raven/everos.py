"""The `everos` backend: a Raven `MemoryBackend` speaking EverOS's HTTP API with httpx.

Importing this module needs the `everos` extra (`pip install 'mnemon-source-raven[everos]'`);
the package itself never imports it, and `backend = "everos"` imports it only when an entry
is built. It never imports the `everos` package: it speaks the wire contract.

Wire contract (EverOS's own API reference): `GET /health`, and under `/api/v1` (or `/api/v2`,
the canonical prefix of newer servers) `POST memory/search`, `memory/add` and `memory/flush`;
successes wrap the payload as `{request_id, data}`, failures as `{request_id, error: {code,
message, ...}}`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from mnemon.sdk import DefinitionError, SourceError, SourceErrorKind

from ._contract import BackendContext, Memory

__all__ = ["EverosBackend", "EverosSettings", "make_backend", "owner_id", "tenant_owner"]

_log = logging.getLogger("mnemon.sources.raven.everos")

# EverOS's identifiers become folder names on its side: this is the character set it accepts
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.@+-]+$")
_ESCAPED = re.compile(r"[^A-Za-z0-9_.@-]")
_SCOPE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ORIGIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_SESSION_MAX = 128
_PROFILE_MAX = 2_000
# EverOS's server failures that need an operator, not a retry (its own error table)
_SERVER_TERMINAL = {"CAPABILITY_UNAVAILABLE", "CONFIGURATION_ERROR", "INTERNAL_ERROR"}


def tenant_owner(tenant_id: str | None, track: str, identity: str) -> str:
    """The EverOS owner id of `identity` on `track`, kept apart per tenant on a shared server.

    Without a tenant it is `owner_id(identity)`, so memory EverOS already holds stays
    reachable; with one it is `owner_id("tenant=<tenant>;<track>=<id>")` (both
    percent-encoded), so the same user in two tenants never shares memory.
    """
    if tenant_id is None:
        return owner_id(identity)
    return owner_id(f"tenant={quote(tenant_id, safe='')};{track}={quote(identity, safe='')}")


def owner_id(identity: str) -> str:
    """The EverOS owner id for an identity: unchanged when EverOS accepts it as is.

    Otherwise every character outside EverOS's set (and `+`, the escape) becomes `+XX` per
    UTF-8 byte, so the mapping is one-to-one: a tenant's `tenant=acme;user=ada` is
    `tenant+3Dacme+3Buser+3Dada` and can never equal another person's plain id.
    """
    if identity not in (".", "..") and _SAFE_ID.fullmatch(identity) and "+" not in identity:
        return identity
    pattern = re.compile(r"[^A-Za-z0-9_@-]") if set(identity) <= {"."} else _ESCAPED
    return pattern.sub(
        lambda match: "".join(f"+{byte:02X}" for byte in match.group().encode()), identity
    )


class EverosSettings(BaseModel):
    """The `everos` backend's `backend_config`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = "http://127.0.0.1:8000"
    """The EverOS server (EverOS listens on loopback port 8000 by default)."""
    api_version: Literal["v1", "v2"] = "v1"
    """`v1` works with every EverOS server; `v2` is the canonical prefix of newer ones."""
    api_key: SecretStr | None = None
    """Sent as `Authorization: Bearer` (EverOS has no auth of its own; a gateway may)."""
    api_key_env: str | None = None
    """The environment variable holding the API key, so the profile need not."""
    app_id: str | None = None
    """The EverOS app scope for recall and for writes that do not name one."""
    project_id: str | None = None
    """The EverOS project scope, likewise."""
    method: Literal["keyword", "vector", "hybrid", "agentic"] | None = None
    """The search method; by default the server's, or `keyword` when it has no embeddings."""
    include_profile: bool = False
    """Recall the user's profile too (user track), as one more memory."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=300)
    """The limit of a health check or a search."""
    store_timeout_seconds: float = Field(default=360.0, gt=0, le=3600)
    """The limit of an add or a flush (a flush runs the server's extraction model)."""
    user_sender_id: str = "user"
    """The sender of user messages stored on the agent track."""
    assistant_sender_id: str = "assistant"
    """The sender of assistant messages stored on the user track."""
    flush_after_store: bool = False
    """Ask EverOS to extract each stored batch at once (`memory/flush`) instead of waiting
    for its own boundary detection."""
    user_id: str | None = Field(default=None, min_length=1, max_length=512)
    """Whose memory this backend serves: set by the host for each identity."""
    agent_id: str | None = Field(default=None, min_length=1, max_length=512)
    """The agent whose memory this backend serves: set by the host for each identity."""

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except (httpx.InvalidURL, TypeError):
            raise ValueError("must be an http or https URL") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an http or https URL")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must be an environment variable name")
        return value

    @field_validator("app_id", "project_id")
    @classmethod
    def _scope(cls, value: str | None) -> str | None:
        if value is not None and (not _SCOPE_ID.fullmatch(value) or value in (".", "..")):
            raise ValueError("must be 1 to 128 letters, digits, '_', '.' or '-'")
        return value

    @field_validator("user_sender_id", "assistant_sender_id")
    @classmethod
    def _sender(cls, value: str) -> str:
        if value in (".", "..") or not _SAFE_ID.fullmatch(value):
            raise ValueError("must be letters, digits, '_', '.', '@', '+' or '-'")
        return value

    @classmethod
    def read(cls, config: Mapping[str, Any]) -> EverosSettings:
        """Validate `backend_config`.

        Raises:
            DefinitionError: naming the key at fault, never its value.
        """
        try:
            return cls.model_validate(dict(config))
        except ValidationError as exc:
            error = exc.errors(include_url=False, include_input=False)[0]
        # raised outside the handler, so the validation error (which quotes the value) is not
        # kept as this error's context
        key = ".".join(str(part) for part in error["loc"]) or "backend_config"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown key (the keys are {', '.join(cls.model_fields)})"
        raise DefinitionError(f"everos backend_config.{key}: {message}")

    def key(self) -> str | None:
        """The API key: `api_key`, else the variable `api_key_env` names, else None."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env is not None:
            return os.environ.get(self.api_key_env) or None
        return None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - time.time()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _error_code(response: httpx.Response) -> str | None:
    """EverOS's `error.code` from a failure envelope, when it is a well-formed code."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and _ORIGIN.fullmatch(code) else None


def failure(response: httpx.Response, subject: str, *, write: bool) -> SourceError:
    """The `SourceError` for a non-2xx EverOS answer; never the answer's own text."""
    status = response.status_code
    origin = _error_code(response) or f"http-{status}"
    said = f"{subject} was refused (HTTP {status})"
    if status == 401:
        return SourceError("unauthorized", said, origin_code=origin)
    if status == 403:
        return SourceError("forbidden", said, origin_code=origin)
    if status == 429:
        return SourceError(
            "rate_limited",
            said,
            retry_after=_retry_after(response.headers.get("Retry-After")),
            origin_code=origin,
        )
    if status >= 500:
        # a server failure proves nothing about whether a write landed; EverOS marks the
        # failures an operator must fix (not a retry) with their own codes
        kind: SourceErrorKind = "terminal" if origin in _SERVER_TERMINAL else "transient"
        return SourceError(
            "provider_error",
            f"{subject} failed (HTTP {status})",
            kind=kind,
            nothing_written=False if write else None,
            origin_code=origin,
        )
    # EverOS validates a request before it writes anything: a refused write stored nothing
    return SourceError("invalid_payload", said, origin_code=origin)


def _schema_mismatch(subject: str, *, write: bool = False) -> SourceError:
    # a write the server answered with 2xx may well have landed, whatever the answer says
    return SourceError(
        "schema_mismatch",
        f"{subject}: the answer is not EverOS's shape",
        nothing_written=False if write else None,
    )


class EverosBackend:
    """A Raven `MemoryBackend` over one EverOS server; `start()` checks its health."""

    def __init__(
        self,
        settings: EverosSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        tenant_id: str | None = None,
    ) -> None:
        """Prepare (nothing is opened until `start()`).

        Args:
            settings: the validated `backend_config`, with the identity it serves.
            transport: an httpx transport to use instead of the network (tests pass
                `httpx.MockTransport`).
            tenant_id: the tenant of that identity, kept apart from others on the server.
        """
        self._settings = settings
        self._transport = transport
        self._tenant = tenant_id
        self._client: httpx.AsyncClient | None = None
        self._tuning: dict[str, dict[str, Any]] = {"user": {}, "agent": {}}
        self._prefix = f"/api/{settings.api_version}/memory"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the client and check `GET /health`.

        Raises:
            SourceError: the server cannot be reached or is not healthy.
        """
        if self._client is not None:
            return
        headers = {"Accept": "application/json"}
        key = self._settings.key()
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        client = httpx.AsyncClient(
            base_url=self._settings.base_url,
            headers=headers,
            timeout=self._settings.timeout_seconds,
            transport=self._transport,
            follow_redirects=False,
        )
        try:
            body = await self._call(client, "GET", "/health", None, "the EverOS health check")
            if not isinstance(body, dict) or body.get("status") != "ok":
                raise SourceError(
                    "provider_error",
                    "the EverOS health check did not say ok",
                    origin_code="health-not-ok",
                )
        except BaseException:
            # shielded: a cancelled start must still close what it opened
            with anyio.CancelScope(shield=True):
                await client.aclose()
            raise
        self._client = client
        self._tuning = _tuning(body.get("capabilities"))

    async def stop(self) -> None:
        """Close the client; idempotent, and harmless without or after a failed start."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # ------------------------------------------------------------------ calls

    async def _call(
        self,
        client: httpx.AsyncClient,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        subject: str,
        *,
        limit: float | None = None,
        write: bool = False,
    ) -> Any:
        """One request; the answer's JSON, or the failure by the taxonomy."""
        try:
            response = await client.request(
                method,
                path,
                json=body,
                timeout=limit if limit is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TimeoutException:
            raise SourceError(
                "timeout",
                f"{subject} timed out",
                nothing_written=False if write else None,
                origin_code="timeout",
            ) from None
        except httpx.HTTPError:
            # nothing reached the server, or the answer was lost on the way back
            raise SourceError(
                "provider_error",
                f"{subject} could not reach EverOS",
                nothing_written=False if write else None,
                origin_code="connection",
            ) from None
        if not response.is_success:
            raise failure(response, subject, write=write)
        try:
            return response.json()
        except ValueError:
            raise _schema_mismatch(subject, write=write) from None

    def _client_or_fail(self) -> httpx.AsyncClient:
        if self._client is None:
            raise SourceError("provider_error", "the EverOS backend is not started")
        return self._client

    async def _post(
        self, path: str, body: dict[str, Any], subject: str, *, write: bool
    ) -> dict[str, Any]:
        limit = self._settings.store_timeout_seconds if write else None
        answer = await self._call(
            self._client_or_fail(), "POST", f"{self._prefix}/{path}", body, subject,
            limit=limit, write=write,
        )  # fmt: skip
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            raise _schema_mismatch(subject, write=write)
        return data

    def _scope(self, body: dict[str, Any]) -> None:
        for name in ("app_id", "project_id"):
            value = getattr(self._settings, name)
            if value is not None:
                body[name] = value

    def _owner(self, track: str, identity: str) -> str:
        return tenant_owner(self._tenant, track, identity)

    # ------------------------------------------------------------------ MemoryBackend

    async def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        top_k: int,
    ) -> list[Memory]:
        """Search one track of EverOS; the memories best first, at most `top_k`.

        Raises:
            SourceError: EverOS refused or failed, or answered in another shape.
        """
        if (user_id is None) == (agent_id is None):
            _log.debug("EverOS recall called with neither or both ids: nothing recalled")
            return []  # the contract: a caller's mistake finds nothing
        track = "user" if user_id is not None else "agent"
        owner = self._owner(track, user_id if user_id is not None else str(agent_id))
        body: dict[str, Any] = {"query": query, "top_k": max(1, min(int(top_k), 100))}
        body[f"{track}_id"] = owner
        self._scope(body)
        body.update(self._tuning[track])
        if self._settings.method is not None:
            body["method"] = self._settings.method
        if track == "user" and self._settings.include_profile:
            body["include_profile"] = True
        data = await self._post("search", body, "the EverOS search", write=False)
        try:
            found = _memories(data, track, profiles=body.get("include_profile") is True)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise _schema_mismatch("the EverOS search") from None
        found.sort(key=lambda memory: memory.score, reverse=True)
        return found[: body["top_k"]]

    async def store(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Add the messages to the session's buffer, under the identity this backend serves.

        User messages are sent as the user's, assistant messages as the agent's (EverOS
        learns its agent memory from them); the side without an id gets the configured
        sender. System and tool messages are not sent: EverOS keeps no system turns, and a
        tool turn needs the id of the call it answers, which these messages do not carry.
        With `flush_after_store` the buffer is then flushed.

        Raises:
            SourceError: no identity is configured, or EverOS refused or failed the add (a
                failed flush is not an error: the added messages are kept and extracted
                later).
        """
        user, agent = self._settings.user_id, self._settings.agent_id
        if user is None and agent is None:
            raise SourceError(
                "invalid_payload",
                "the everos backend stores for the identity in its configuration: "
                "user_id or agent_id",
                nothing_written=True,
            )
        senders = {
            "user": self._owner("user", user) if user else self._settings.user_sender_id,
            "assistant": (
                self._owner("agent", agent) if agent else self._settings.assistant_sender_id
            ),
        }
        now = int(time.time() * 1000)
        payload = [
            {
                "sender_id": senders[str(message["role"])],
                "role": message["role"],
                # one millisecond apart, so the server keeps their order
                "timestamp": now + index,
                "content": str(message["content"]),
            }
            for index, message in enumerate(messages)
            if message.get("role") in senders and str(message.get("content", ""))
        ]
        if not payload:
            return
        # EverOS buffers by session only; prefixing the owner keeps two people apart
        owner = senders["user"] if user else senders["assistant"]
        body: dict[str, Any] = {"session_id": _session(owner, session_id), "messages": payload}
        self._scope(body)
        await self._post("add", body, "the EverOS add", write=True)
        if self._settings.flush_after_store:
            flush: dict[str, Any] = {
                key: body[key] for key in ("session_id", "app_id", "project_id") if key in body
            }
            try:
                await self._post("flush", flush, "the EverOS flush", write=True)
            except SourceError:
                # the messages are in EverOS's durable buffer; they are extracted later
                return

    async def feedback(self, signals: dict[str, Any]) -> None:
        """Accepted and dropped: EverOS's HTTP API has no feedback endpoint."""


def _session(owner: str, session_id: str) -> str:
    joined = f"{owner}.{session_id}"
    if len(joined) <= _SESSION_MAX:
        return joined
    return "s-" + hashlib.sha256(f"{owner}\0{session_id}".encode()).hexdigest()[:48]


def _tuning(capabilities: Any) -> dict[str, dict[str, Any]]:
    """Search parameters a server's reported capabilities call for, per track.

    Without embeddings EverOS refuses its default hybrid search, so recall asks for keyword
    search; without a rerank model it refuses agent-track hybrid search unless an LLM reranks.
    A server that reports nothing is left alone.
    """
    caps = capabilities if isinstance(capabilities, dict) else {}
    if caps.get("embed") is False:
        return {"user": {"method": "keyword"}, "agent": {"method": "keyword"}}
    if caps.get("rerank") is False:
        return {"user": {}, "agent": {"enable_llm_rerank": True}}
    return {"user": {}, "agent": {}}


def _score(value: Any, default: float = 0.0) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("score")
    return float(value)


def _items(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    items = data.get(name) or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError(name)
    return items


def _text(item: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = item.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _memories(data: Mapping[str, Any], track: str, *, profiles: bool) -> list[Memory]:
    """EverOS's search data as `Memory` objects of one track; empty texts are skipped.

    Profiles count only when they were asked for (`include_profile`).
    """
    found: list[Memory] = []

    def add(text: str, score: float, kind: str, item: Mapping[str, Any], **more: Any) -> None:
        if not text:
            return
        metadata = {"id": str(item["id"]), "type": kind, "owner_type": track}
        metadata.update({k: v for k, v in more.items() if isinstance(v, str) and v})
        found.append(Memory(text=text, score=score, metadata=metadata))

    if track == "user":
        for episode in _items(data, "episodes"):
            add(
                _text(episode, "summary", "episode"), _score(episode.get("score")), "episode",
                episode, session_id=episode.get("session_id"), subject=episode.get("subject"),
                timestamp=episode.get("timestamp"),
            )  # fmt: skip
        for profile in _items(data, "profiles") if profiles else ():
            # a profile is fetched, not ranked (its score is null): it goes first
            add(_profile_text(profile.get("profile_data")), _score(profile.get("score"), 1.0),
                "profile", profile)  # fmt: skip
    else:
        for skill in _items(data, "agent_skills"):
            add(_text(skill, "content", "description"), _score(skill.get("score")), "skill",
                skill, name=skill.get("name"))  # fmt: skip
        for case in _items(data, "agent_cases"):
            parts = (_text(case, "task_intent"), _text(case, "key_insight"))
            text = "\n\n".join(part for part in parts if part)
            add(text, _score(case.get("score")), "case", case, session_id=case.get("session_id"))
    return found


def _profile_text(data: Any) -> str:
    """A profile's fields as `key: value` lines (nested values compactly), capped."""
    if not isinstance(data, dict):
        return ""
    lines = []
    for key, value in data.items():
        if str(key).endswith("_ms") or value in (None, "", [], {}):
            continue  # bookkeeping timestamps and empty fields say nothing about the person
        if isinstance(value, list):
            shown = "; ".join(
                str(item.get("description") or item.get("trait") or item)
                if isinstance(item, dict)
                else str(item)
                for item in value
            )
        else:
            shown = str(value)
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)[:_PROFILE_MAX]


def make_backend(
    ctx: BackendContext, *, transport: httpx.AsyncBaseTransport | None = None
) -> EverosBackend:
    """Raven's factory for the `everos` backend: `ctx.config` is its `backend_config`.

    The identity comes in `ctx.config` (`user_id`, `agent_id`) and the tenant, mnemon's
    addition, in `ctx.services.tenant_id`.

    Raises:
        DefinitionError: a `backend_config` key is invalid (named, never its value).
    """
    tenant = getattr(ctx.services, "tenant_id", None)
    return EverosBackend(
        EverosSettings.read(ctx.config),
        transport=transport,
        tenant_id=tenant if isinstance(tenant, str) else None,
    )
