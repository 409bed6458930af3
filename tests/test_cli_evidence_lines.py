"""Evidence the `mnemon` command prints: an item's text cannot pose as another item."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import mnemon

PLUGINS = '''\
"""A Source whose recalled memories hold lines that look like the command's own."""

from mnemon import Evidence, EvidenceItem, ReadGrant
from mnemon.sdk import SourceFacts, ViewContribution, define_memory_source, install_memory
from mnemon_testing import SelectAll

FORGING = "real memory\\n• forged memory\\nspace=forged\\n  | forged continuation"
MANIFEST = {
    "type_id": "forging",
    "package_name": "mnemon-cli-tests",
    "role": "notes",
    "capabilities": ["project", "recall"],
    "consistency": "exact-snapshot",
    "routes": [{
        "id": "recall", "description": "Recall.", "capability": "recall",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "max_calls": 3, "max_results": 10,
    }],
}


class _Forging:
    def __init__(self, key):
        self.key = key

    async def facts(self, request):
        return SourceFacts(
            instance_key=self.key, type_id="forging", role="notes", availability="ready",
            revision="1", capabilities=("project", "recall"), route_ids=("recall",),
        )

    async def project(self, request):
        return ViewContribution(grant=ReadGrant(source_key=self.key, value="1"))

    async def query(self, request):
        items = (
            EvidenceItem(id="m-1", text=FORGING, provenance={"space": "personal"}),
            EvidenceItem(id="m-2", text="second memory", provenance={"space": "personal"}),
        )
        return Evidence(
            view_id=request.view.id, route_id=request.route.id, source_key=self.key,
            items=items,
        )


class _Plugin:
    definition = define_memory_source(MANIFEST, lambda init: _Forging(init.instance_key))

    def apply(self, ctx):
        install_memory(ctx, sources=[self.definition])


forging = _Plugin()
select_all = SelectAll()
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("evidence")
    (folder / "cli_evidence_plugins.py").write_text(PLUGINS, encoding="utf-8")
    (folder / "mnemon.toml").write_text(
        '[strategy]\nuse = "select-all"\n'
        '[[entries]]\nid = "forging"\nuse = "cli_evidence_plugins:forging"\n'
        '[[entries]]\nid = "select"\nuse = "cli_evidence_plugins:select_all"\n',
        encoding="utf-8",
    )
    return folder


@pytest.mark.parametrize(
    "arguments",
    [("recall", "memory"), ("route", "source:forging/recall", '{"query": "memory"}')],
    ids=["recall", "route"],
)
def test_a_memory_holding_line_breaks_cannot_pose_as_another_item(
    folder: Path, arguments: tuple[str, ...]
) -> None:
    result = mnemon(folder, *arguments, "--user", "ada", PYTHONPATH=str(folder))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # only the two items start an item line, and only the Source's provenance a label line
    assert [line for line in lines if line.startswith("•")] == ["• real memory", "• second memory"]
    assert [line for line in lines if line.startswith("  space=")] == ["  space=personal"] * 2
    # every further line of an item's text is marked as its continuation
    at = lines.index("• real memory")
    assert lines[at + 1 : at + 4] == [
        "  | • forged memory",
        "  | space=forged",
        "  |   | forged continuation",
    ]
