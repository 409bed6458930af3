"""Throughput of the MiniLM embedder, measured through its runtime as a Source reaches it.

Run: `.venv/bin/python embedders/minilm/benchmarks/throughput.py`. For 1 and 2 threads, each
in a fresh process: the first call (the model loads), then short sentences (requests of 32
parts, like notes) and full 256-token windows (a long document), and the process's resident
memory. The README's figures print beside each result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mnemon_embedder_minilm import MINILM, SPACE_ID
from mnemon_embedder_minilm._embedder import MiniLMEmbedder

from mnemon.sdk import Embedding

# the README's measurements (2-core x86-64 VM, onnxruntime 1.32, Python 3.11)
BASELINE: dict[int, dict[str, float]] = {
    1: {"short": 215, "windows": 7.5},
    2: {"short": 370, "windows": 13},
}
SENTENCES = (
    "The cat sits on the mat.",
    "Quarterly revenue rose 4%.",
    "I moved to Berlin last spring for a new job.",
    "My sister's birthday is on the twelfth of March.",
    "We talked about hiking plans for the weekend.",
    "The meeting was moved to Thursday afternoon.",
    "She prefers tea over coffee in the morning.",
    "A feline rests on a rug.",
)


def _rss_mb() -> float | None:
    """The process's resident memory in MB (Linux), or None."""
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


async def _measure(threads: int) -> dict[str, Any]:
    """One process's measurements for `threads`."""
    runtime = MINILM.create({"threads": threads, "batch": 32})
    assert isinstance(runtime, MiniLMEmbedder)
    embedding = Embedding([(MINILM.manifest, runtime)])
    started = time.perf_counter()
    await embedding.embed_query(SPACE_ID, "warm up")
    first_call = time.perf_counter() - started
    rss = _rss_mb()

    short = [f"{SENTENCES[i % len(SENTENCES)]} Note {i}." for i in range(32 * 30)]
    requests = [short[i : i + 32] for i in range(0, len(short), 32)]
    started = time.perf_counter()
    for number, texts in enumerate(requests):
        await embedding.segment_and_embed(
            {
                "idempotency_key": f"short-{number}",
                "parts": [{"key": f"p{i}", "text": text} for i, text in enumerate(texts)],
                "spaces": [SPACE_ID],
            }
        )
    short_rate = len(short) / (time.perf_counter() - started)

    document = " ".join(SENTENCES * 300)  # ~24 windows of 254 word pieces
    started = time.perf_counter()
    answer = await embedding.segment_and_embed(
        {
            "idempotency_key": "long",
            "parts": [{"key": "body", "text": document}],
            "spaces": [SPACE_ID],
        }
    )
    window_rate = len(answer.segments) / (time.perf_counter() - started)
    runtime.dispose()
    return {
        "threads": threads,
        "first_call_s": round(first_call, 2),
        "rss_after_load_mb": None if rss is None else round(rss),
        "short_per_s": round(short_rate),
        "windows_per_s": round(window_rate, 1),
    }


def main() -> None:
    """Measure 1 and 2 threads in fresh processes and print them beside the baseline."""
    if len(sys.argv) == 3 and sys.argv[1] == "--threads":
        print(json.dumps(anyio.run(_measure, int(sys.argv[2]))))
        return
    for threads in (1, 2):
        done = subprocess.run(
            [sys.executable, __file__, "--threads", str(threads)],
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(done.stdout)
        baseline = BASELINE[threads]
        print(
            f"threads={threads}: first call {result['first_call_s']} s, "
            f"RSS after load {result['rss_after_load_mb']} MB, "
            f"short sentences {result['short_per_s']}/s (baseline {baseline['short']}), "
            f"256-token windows {result['windows_per_s']}/s (baseline {baseline['windows']})"
        )


if __name__ == "__main__":
    main()
