"""Launched reference plugins for the tests: a folder per launch, and what the plugin saw.

A launched plugin's environment is the run convention's, not the test's: whatever a test tells
the ranker goes in `run.command`'s arguments, written into a copy of its manifest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

RANKERS = Path(__file__).parent / "rankers"
EMBEDDERS = Path(__file__).parent / "embedders"
MEANING = Path(__file__).parent / "meaning"


def edit_manifest(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply `change` to the folder's quivr-plugin.yaml (as YAML, rewritten)."""
    path = folder / "quivr-plugin.yaml"
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")


def ranker_folder(folder: Path, *arguments: str) -> Path:
    """A copy of the reference ranker in `folder`, launched with `arguments`; its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("quivr-plugin.yaml", "quivr_ranker.py"):
        shutil.copy(RANKERS / name, folder / name)
    if arguments:
        edit_manifest(folder, lambda m: m["run"]["command"].extend(arguments))
    return folder / "quivr-plugin.yaml"


def embedder_folder(folder: Path, *arguments: str) -> Path:
    """A copy of the reference ingestion plugin in `folder`, launched with `arguments`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("quivr-plugin.yaml", "quivr_embedder.py"):
        shutil.copy(EMBEDDERS / name, folder / name)
    shutil.copytree(EMBEDDERS / "fixtures", folder / "fixtures", dirs_exist_ok=True)
    if arguments:
        edit_manifest(folder, lambda m: m["run"]["command"].extend(arguments))
    return folder / "quivr-plugin.yaml"


def with_retrieval(manifest: dict[str, Any]) -> None:
    """Declare a retrieval Contribution beside ingestion, served by the same process."""
    manifest["contributions"]["retrieval"] = {
        "profiles": {
            "default": {
                "description": "Hybrid candidates in its own space, ranked by its own vectors.",
                "max_latency_ms": 5000,
                "max_cost_cents": 0,
            }
        },
        "limits": {"max_rounds": 2, "max_requests": 1, "max_candidates": 20},
    }
    manifest["run"]["command"].append("--retrieval")


def recorded(path: Path) -> dict[str, Any]:
    """What a ranker started with `--record path` wrote: `environment` and `child`."""
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie no one reaped yet has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return False
    # the state follows the parenthesised command name
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def ended_within(pid: int, seconds: float) -> bool:
    """Whether `pid` ends within `seconds` (a SIGKILL lands at once, but not instantly)."""
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def kill(pid: int | None) -> None:
    """SIGKILL `pid` if it still runs: a failed test leaves nothing behind."""
    if pid is not None and running(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
