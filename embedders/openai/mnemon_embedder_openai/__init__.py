"""An embedder for any OpenAI-compatible `/v1/embeddings` API: OpenAI, Ollama, vLLM, LM Studio.

Each entry fills one vector space with the model its configuration names, so the embedder is
defined per entry, in `apply(ctx)`, from that configuration: two entries with two models own
two spaces (`openai.<model>` by default). Texts are cut into segments of at most
`max_input_characters` here, and their vectors asked for over HTTP, `batch` inputs a request.
The API key is read from the environment variable `api_key_env` names and sent as a Bearer
token; it never appears in the configuration, the manifest, an error or a log.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mnemon.sdk import (
    DefinitionError,
    EmbedderDefinition,
    PluginContext,
    define_embedder,
    define_memory_plugin,
    install_memory,
)

from ._embedder import MAX_SEGMENTS, OpenAIEmbedder
from ._settings import OpenAISettings, default_space_id, read_settings

__all__ = ["apply", "default_space_id", "define_openai_embedder", "memory_plugin"]

TYPE_ID = "openai-embeddings"
PACKAGE = "mnemon-embedder-openai"
#: the core's ceiling on how many texts a Source sends one embedder together
_MAX_BATCH = 1_024

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="OpenAI-compatible embedder",
    description="Embeds text through an OpenAI-compatible /v1/embeddings API.",
    roles=["embedder"],
    provides=["embedding"],
)


def _api_key(settings: OpenAISettings) -> str | None:
    """The key, read when a runtime is made: a changed variable counts from the next one."""
    variable = settings.key_variable
    if variable is None:
        return None
    # a key read from a file often ends in a newline, which no header may hold
    key = os.environ.get(variable, "").strip()
    if not key:
        # the variable's name is no secret, and the only way to tell which one is missing
        raise DefinitionError(
            f"openai-embeddings configuration.api_key_env: {variable} holds no API key; set "
            "it, or name another variable in api_key_env"
        )
    return key


def define_openai_embedder(configuration: Mapping[str, Any]) -> EmbedderDefinition:
    """The embedder definition one entry's configuration asks for: its space, its runtime.

    The runtime is made from this configuration whatever configuration the host passes the
    factory, so a plugin of your own may install it with settings of its choosing.

    Raises:
        DefinitionError: a configuration key is unknown, missing or invalid (named, never its
            value). Making the runtime raises it too when the key's variable is empty.
    """
    settings = read_settings(configuration)

    def create(_: Mapping[str, Any]) -> OpenAIEmbedder:
        return OpenAIEmbedder(settings, _api_key(settings))

    return define_embedder(
        {
            "type_id": TYPE_ID,
            "package_name": PACKAGE,
            "spaces": [settings.space.model_dump(exclude_none=True)],
            "timeout_ms": settings.timeout_ms,
            "query_timeout_ms": settings.query_timeout_ms,
            "max_segments": MAX_SEGMENTS,
            "max_batch": min(settings.batch, _MAX_BATCH),
        },
        create,
    )


def apply(ctx: PluginContext) -> None:
    """Install the embedder this entry's configuration describes.

    Raises:
        DefinitionError: the configuration is invalid (see `define_openai_embedder`).
    """
    install_memory(ctx, plugin=memory_plugin, embedders=[define_openai_embedder(ctx.configuration)])
