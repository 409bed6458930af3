"""The packaging gate's import audit fails a plugin that imports what its wheel does not declare."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def gate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dist_check", ROOT / ".ci" / "dist_check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def installed(site: Path, body: str) -> None:
    """A plugin installed from a wheel: its package and a dist-info declaring mnemon-runtime."""
    (site / "leaky_plugin").mkdir(parents=True)
    (site / "leaky_plugin" / "__init__.py").write_text(body, encoding="utf-8")
    info = site / "leaky_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: leaky-plugin\nVersion: 0.1.0\n"
        "Requires-Dist: mnemon-runtime<0.2,>=0.1\n",
        encoding="utf-8",
    )
    (info / "RECORD").write_text("leaky_plugin/__init__.py,,\n", encoding="utf-8")


def audit(site: Path) -> list[str]:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            gate().IMPORT_AUDIT,
            json.dumps(["leaky-plugin"]),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    problems: list[str] = json.loads(result.stdout)
    return problems


def test_a_declared_public_import_passes(tmp_path: Path) -> None:
    installed(tmp_path, "import json\nimport mnemon\nfrom mnemon import install_memory\n")
    assert audit(tmp_path) == []


def test_an_undeclared_dependency_and_a_private_module_fail(tmp_path: Path) -> None:
    installed(tmp_path, "import jsonschema\nfrom mnemon._engine import engine\n")
    problems = audit(tmp_path)
    assert len(problems) == 2
    assert "imports 'jsonschema', not declared" in problems[0]
    assert "private module mnemon._engine" in problems[1]
