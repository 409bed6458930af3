"""`mnemon plugin inspect` on hostile `mnemon-source.yaml` files: a coded refusal, in bounded time.

An alias bomb (anchors whose aliases expand exponentially) and deep nesting are refused while the
YAML is read, before anything walks the value; the pytest timeout guards the bounded time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parent / "plugins"
MNEMON = str(Path(sys.executable).parent / "mnemon")
NOTES = (PLUGINS / "notes" / "mnemon-source.yaml").read_text(encoding="utf-8")


def with_configuration(block: str) -> str:
    """The notes manifest with its `configuration:` block replaced by `block`."""
    head, _, tail = NOTES.partition("configuration:\n")
    _, _, rest = tail.partition("secrets:\n")
    return f"{head}{block}secrets:\n{rest}"


def alias_bomb() -> str:
    # ten aliases a level, nine levels: 10**9 schemas once expanded, for check_schema to walk
    lines = ["configuration:", "  schema:", "    type: object", "    $defs:"]
    lines.append("      l0: &l0 {type: string}")
    for level in range(1, 10):
        aliases = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"      l{level}: &l{level} {{anyOf: [{aliases}]}}")
    return with_configuration("\n".join(lines) + "\n")


HOSTILE = [
    pytest.param(alias_bomb(), id="alias-bomb"),
    pytest.param(
        with_configuration("configuration:\n  schema: " + "{not: " * 200 + "{}" + "}" * 200 + "\n"),
        id="configuration-schema-nested-200-deep",
    ),
    pytest.param(
        NOTES.replace("description: The notes", "nested: " + "[" * 3000 + "]" * 3000 + "\nx: "),
        id="nested-3000-deep",
    ),
]


def inspect_json(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MNEMON, "plugin", "inspect", "--json", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
        check=False,
    )


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_manifest_is_refused_as_invalid_yaml(tmp_path: Path, text: str) -> None:
    (tmp_path / "mnemon-source.yaml").write_text(text, encoding="utf-8")
    result = inspect_json(tmp_path)
    assert result.returncode == 1, result.stderr
    value = json.loads(result.stdout)
    assert value["valid"] is False
    assert value["manifest_digest"].startswith("sha256:")
    [issue] = value["issues"]
    assert (issue["code"], issue["path"]) == ("invalid_yaml", "(manifest)")
    # the refusal names the rule, never the file's text
    for quoted in ("*l", "&l", "[[", "{not"):
        assert quoted not in issue["message"]


def test_an_anchor_without_an_alias_is_read(tmp_path: Path) -> None:
    # an anchor alone shares nothing: only an alias is refused
    text = NOTES.replace("timeout_ms: 2000", "timeout_ms: &deadline 2000")
    (tmp_path / "mnemon-source.yaml").write_text(text, encoding="utf-8")
    value = json.loads(inspect_json(tmp_path).stdout)
    assert value["id"] == "example.notes"
    assert "invalid_yaml" not in [issue["code"] for issue in value["issues"]]
