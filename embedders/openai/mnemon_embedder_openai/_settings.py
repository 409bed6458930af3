"""An entry's configuration, checked: where the API is, which model, and the space it fills.

A `mnemon.sdk.Configuration` model read when the entry is applied, with
`mnemon.sdk.read_configuration`, so a bad value refuses the mount with the key's name and never its
value (a value may be a URL with a host name in it, or a variable's name), as every plugin's
configuration does. The API key itself is not configuration: only the name of the environment
variable holding it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, model_validator

from mnemon.sdk import Configuration, DefinitionError, VectorSpace, read_configuration

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_VARIABLE",
    "OpenAIConfiguration",
    "OpenAISettings",
    "default_space_id",
    "read_settings",
]

SUBJECT = "openai-embeddings"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: the variable read for the key when `base_url` is OpenAI's own and `api_key_env` is not given
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
#: the first segment of a space id derived from the model's name
SPACE_PREFIX = "openai"
_SPACE_ID_LENGTH = 64
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# a model name is printable, one line: it goes into every request and into reports
_MODEL = re.compile(r"^[^\x00-\x20\x7f-\x9f]{1,256}$")
# what a key missing from the configuration is, until its own rule says why it is needed
_MISSING = object()


def _required(rule: str) -> BeforeValidator:
    def check(value: object) -> object:
        if value is _MISSING:
            raise ValueError(f"is required: {rule}")
        return value

    return BeforeValidator(check)


def _text(value: object) -> object:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def _whole(low: int, high: int) -> BeforeValidator:
    """Refuses anything but a whole number from `low` to `high`, with one rule naming them."""

    def check(value: object) -> object:
        # bool is an int to Python, never to a profile's author
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be a whole number from {low} to {high}")
        return value

    return BeforeValidator(check)


def _flag(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _metric(value: object) -> object:
    if value not in ("cosine", "dot", "l2"):
        raise ValueError("must be cosine, dot or l2")
    return value


def _url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError("must be an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        # a key in the URL would reach logs and error reports; it belongs in api_key_env
        raise ValueError(
            "must not carry credentials, a query or a fragment (name the key's variable in "
            "api_key_env)"
        )
    return value.rstrip("/")


def _model_name(value: str) -> str:
    if not _MODEL.match(value):
        raise ValueError("must be 1 to 256 printable characters without spaces")
    return value


def _variable(value: str) -> str:
    if not _VARIABLE.match(value):
        raise ValueError("must be an environment variable's name (A-Z, 0-9, _)")
    return value


_Text = Annotated[str, BeforeValidator(_text)]
_Dimensions = Annotated[int, Field(ge=1, le=4_096), _whole(1, 4_096)]
# the core's bounds on an embedder's deadlines
_Timeout = Annotated[int, Field(ge=1_000, le=300_000), _whole(1_000, 300_000)]
_QueryTimeout = Annotated[int, Field(ge=100, le=10_000), _whole(100, 10_000)]
# OpenAI takes at most 2,048 inputs in one request
_Batch = Annotated[int, Field(ge=1, le=2_048), _whole(1, 2_048)]
# OpenAI's models read 8,191 tokens: 8,000 characters stay within that for any text but long
# runs of digits or symbols, which take more than one token a character
_InputCharacters = Annotated[int, Field(ge=32, le=1_000_000), _whole(32, 1_000_000)]
_ResponseBytes = Annotated[int, Field(ge=1_024, le=1 << 30), _whole(1_024, 1 << 30)]
_REQUIRED = {
    "model": "the model's name, as the API knows it",
    "dimensions": "a whole number from 1 to 4096",
}


class OpenAIConfiguration(Configuration):
    """What a profile may say about an OpenAI-compatible embedder (see the README's table)."""

    base_url: Annotated[_Text, AfterValidator(_url)] = Field(
        default=DEFAULT_BASE_URL,
        description="The API's root; requests go to {base_url}/embeddings.",
        json_schema_extra={"pattern": "^https?://"},
    )
    model: Annotated[_Text, _required(_REQUIRED["model"]), AfterValidator(_model_name)] = Field(
        description="The model's name, as the API knows it.",
        json_schema_extra={"minLength": 1, "maxLength": 256},
    )
    dimensions: Annotated[_Dimensions, _required(_REQUIRED["dimensions"])] = Field(
        description="How many numbers each vector holds."
    )
    send_dimensions: Annotated[bool, BeforeValidator(_flag)] = Field(
        default=False,
        description="Ask the API for `dimensions` (models that shorten their vectors).",
    )
    space: _Text | None = Field(
        default=None,
        description="The space's id (default: openai.<the model's name>).",
        json_schema_extra={
            "pattern": "^[a-z][a-z0-9_-]*(?:\\.[a-z][a-z0-9_-]*)*$",
            "maxLength": _SPACE_ID_LENGTH,
        },
    )
    version: _Text = Field(
        default="1",
        description="The space's version; bump it whenever the vectors change.",
        json_schema_extra={"pattern": "^[0-9A-Za-z][0-9A-Za-z._-]{0,31}$"},
    )
    metric: Annotated[Literal["cosine", "dot", "l2"], BeforeValidator(_metric)] = Field(
        default="cosine", description="The distance searches in the space use."
    )
    api_key_env: Annotated[_Text, AfterValidator(_variable)] | None = Field(
        default=None,
        description=(
            "The environment variable holding the API key (default: OPENAI_API_KEY for "
            "OpenAI's own API, none otherwise)."
        ),
        json_schema_extra={"pattern": _VARIABLE.pattern},
    )
    timeout_ms: _Timeout = Field(
        default=60_000,
        description="The deadline of one text's segments, all its requests together.",
    )
    query_timeout_ms: _QueryTimeout = Field(default=5_000, description="The deadline of one query.")
    batch: _Batch = Field(default=64, description="Inputs in one request.")
    max_input_characters: _InputCharacters = Field(
        default=8_000,
        description=(
            "The most characters (code points) of one input; longer parts are cut at whitespace."
        ),
    )
    max_response_bytes: _ResponseBytes = Field(
        default=64 << 20, description="The most bytes read of one answer (64 MiB by default)."
    )

    @model_validator(mode="before")
    @classmethod
    def _name_what_is_missing(cls, data: Any) -> Any:
        # a missing key says why it is needed, not only that a field is required
        if isinstance(data, Mapping):
            return {**dict.fromkeys(_REQUIRED, _MISSING), **data}
        return data


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
    return DefinitionError(f"{SUBJECT} configuration.{key}: {rule}")


def read_settings(configuration: Mapping[str, Any]) -> OpenAISettings:
    """The settings an entry's configuration asks for, defaults filled in.

    Raises:
        DefinitionError: a key is unknown, a required one is missing, or a value breaks its
            rule; the message names the key, never the value.
    """
    read = read_configuration(OpenAIConfiguration, configuration, subject=SUBJECT)
    space_id = read.space
    if space_id is None:
        space_id = default_space_id(read.model)
        if space_id is None:
            raise _fail(
                "space",
                "cannot be derived from the model's name (it starts with no letter, or the id "
                "would pass 64 characters): give one",
            )
    space = _space(space_id, read.version, read.model, read.dimensions, read.metric)
    # OpenAI's own API needs a key; another server gets one only when asked to
    default_variable = DEFAULT_KEY_VARIABLE if read.base_url == DEFAULT_BASE_URL else None
    return OpenAISettings(
        base_url=read.base_url,
        model=read.model,
        space=space,
        key_variable=read.api_key_env if "api_key_env" in configuration else default_variable,
        send_dimensions=read.send_dimensions,
        timeout_ms=read.timeout_ms,
        query_timeout_ms=read.query_timeout_ms,
        batch=read.batch,
        max_input_characters=read.max_input_characters,
        max_response_bytes=read.max_response_bytes,
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
