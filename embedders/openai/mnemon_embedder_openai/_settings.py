"""An entry's configuration, checked: where the API is, which model, and the space it fills.

Read when the entry is applied, so a bad value refuses the mount with the key's name and never
its value (a value may be a URL with a host name in it, or a variable's name). The API key
itself is not configuration: only the name of the environment variable holding it is.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from mnemon.sdk import DefinitionError, VectorSpace

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_VARIABLE",
    "OpenAISettings",
    "default_space_id",
    "read_settings",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the variable read for the key when `base_url` is OpenAI's own and `api_key_env` is not given
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
#: the first segment of a space id derived from the model's name
SPACE_PREFIX = "openai"
_SPACE_ID_LENGTH = 64
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# a model name is printable, one line: it goes into every request and into reports
_MODEL = re.compile(r"^[^\x00-\x20\x7f-\x9f]{1,256}$")

#: the inclusive range of each whole-number key, and its default (None: required)
_WHOLE: dict[str, tuple[int, int, int | None]] = {
    "dimensions": (1, 4_096, None),
    # the core's bounds on an embedder's deadlines
    "timeout_ms": (1_000, 300_000, 60_000),
    "query_timeout_ms": (100, 10_000, 5_000),
    # OpenAI takes at most 2,048 inputs in one request
    "batch": (1, 2_048, 64),
    # OpenAI's models read 8,191 tokens: 8,000 characters stay within that for any text but
    # long runs of digits or symbols, which take more than one token a character
    "max_input_characters": (32, 1_000_000, 8_000),
    "max_response_bytes": (1_024, 1 << 30, 64 << 20),
}
_TEXT = ("base_url", "model", "space", "version", "metric", "api_key_env")
_KEYS = (*_TEXT, *_WHOLE, "send_dimensions")


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    """What an entry asked for, defaults filled in; holds no secret (only a variable's name)."""

    base_url: str
    """The API's root, without a trailing slash; requests go to `{base_url}/embeddings`."""
    model: str
    """The model's name, sent in every request."""
    space: VectorSpace
    """The one space this entry's embedder owns."""
    key_variable: str | None
    """The environment variable holding the API key; None sends no `Authorization` header."""
    send_dimensions: bool
    """Whether requests ask for `dimensions` (models that shorten their vectors)."""
    timeout_ms: int
    """The deadline of one `segment_and_embed`, all its requests together."""
    query_timeout_ms: int
    """The deadline of one `embed_query`."""
    batch: int
    """The most inputs in one request."""
    max_input_characters: int
    """The most code points of one input: longer parts are cut into segments."""
    max_response_bytes: int
    """The most bytes read of one answer."""

    @property
    def embeddings_url(self) -> str:
        """Where requests go."""
        return f"{self.base_url}/embeddings"


def default_space_id(model: str) -> str | None:
    """The space id derived from a model's name, or None when no valid id can be derived.

    The name is lowercased and cut at every character outside `a-z 0-9 _ -`; the pieces are
    joined by dots after `openai`. A piece that does not start with a letter (the `5` of
    `v1.5`) is joined to the one before it by `_`, since each segment of a space id must:
    `BAAI/bge-base-en-v1.5` gives `openai.baai.bge-base-en-v1_5`. A name whose first piece
    does not start with a letter, or whose id would pass 64 characters, gives None.
    """
    segments = [SPACE_PREFIX]
    for piece in re.split(r"[^a-z0-9_-]+", model.lower()):
        if not piece:
            continue
        if "a" <= piece[0] <= "z":
            segments.append(piece)
        elif len(segments) > 1:
            segments[-1] += f"_{piece}"
        else:
            return None
    space = ".".join(segments)
    return space if len(segments) > 1 and len(space) <= _SPACE_ID_LENGTH else None


def _fail(key: str, rule: str) -> DefinitionError:
    return DefinitionError(f"openai-embeddings configuration.{key}: {rule}")


def _text(configuration: Mapping[str, Any], key: str, default: str | None) -> str | None:
    if key not in configuration:
        return default
    value = configuration[key]
    if not isinstance(value, str) or not value:
        raise _fail(key, "must be a non-empty string")
    return value


def _base_url(configuration: Mapping[str, Any]) -> str:
    value = _text(configuration, "base_url", None) or DEFAULT_BASE_URL
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise _fail("base_url", "must be an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail("base_url", "must be an http(s) URL")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        # a key in the URL would reach logs and error reports; it belongs in api_key_env
        raise _fail(
            "base_url",
            "must not carry credentials, a query or a fragment (name the key's variable in "
            "api_key_env)",
        )
    return value.rstrip("/")


def read_settings(configuration: Mapping[str, Any]) -> OpenAISettings:
    """The settings an entry's configuration asks for, defaults filled in.

    Raises:
        DefinitionError: a key is unknown, a required one is missing, or a value breaks its
            rule; the message names the key, never the value.
    """
    for key in configuration:
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), _KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise _fail(str(key), f"unknown key{hint}")
    base_url = _base_url(configuration)
    model = _text(configuration, "model", None)
    if model is None:
        raise _fail("model", "is required: the model's name, as the API knows it")
    if not _MODEL.match(model):
        raise _fail("model", "must be 1 to 256 printable characters without spaces")
    whole: dict[str, int] = {}
    for key, (low, high, default) in _WHOLE.items():
        if key not in configuration and default is None:
            raise _fail(key, f"is required: a whole number from {low} to {high}")
        value = configuration.get(key, default)
        # bool is an int to Python, never to a profile's author
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _fail(key, f"must be a whole number from {low} to {high}")
        whole[key] = value
    send_dimensions = configuration.get("send_dimensions", False)
    if not isinstance(send_dimensions, bool):
        raise _fail("send_dimensions", "must be true or false")
    space_id = _text(configuration, "space", None)
    if space_id is None:
        space_id = default_space_id(model)
        if space_id is None:
            raise _fail(
                "space",
                "cannot be derived from the model's name (it starts with no letter, or the id "
                "would pass 64 characters): give one",
            )
    metric = _text(configuration, "metric", None) or "cosine"
    if metric not in ("cosine", "dot", "l2"):
        raise _fail("metric", "must be cosine, dot or l2")
    version = _text(configuration, "version", None) or "1"
    space = _space(space_id, version, model, whole["dimensions"], metric)
    # OpenAI's own API needs a key; another server gets one only when asked to
    default_variable = DEFAULT_KEY_VARIABLE if base_url == DEFAULT_BASE_URL else None
    key_variable = _text(configuration, "api_key_env", default_variable)
    if key_variable is not None and not _VARIABLE.match(key_variable):
        raise _fail("api_key_env", "must be an environment variable's name (A-Z, 0-9, _)")
    return OpenAISettings(
        base_url=base_url,
        model=model,
        space=space,
        key_variable=key_variable,
        send_dimensions=send_dimensions,
        timeout_ms=whole["timeout_ms"],
        query_timeout_ms=whole["query_timeout_ms"],
        batch=whole["batch"],
        max_input_characters=whole["max_input_characters"],
        max_response_bytes=whole["max_response_bytes"],
    )


def _space(space_id: str, version: str, model: str, dimensions: int, metric: str) -> VectorSpace:
    """The space, checked by the core's own model (its id and version rules)."""
    try:
        return VectorSpace.model_validate(
            {
                "id": space_id,
                "version": version,
                "model": model,
                "dimensions": dimensions,
                "metric": metric,
            }
        )
    except ValidationError as exc:
        field = str(exc.errors(include_url=False, include_input=False)[0]["loc"][0])
        rules = {
            "id": ("space", "must be lowercase segments of a-z 0-9 _ - joined by dots, each "
                   "starting with a letter, at most 64 characters"),
            "version": ("version", "must be 1 to 32 of A-Z a-z 0-9 . _ -, starting with a "
                        "letter or digit"),
        }  # fmt: skip
        key, rule = rules.get(field, (field, "is not valid"))
        raise _fail(key, rule) from None
