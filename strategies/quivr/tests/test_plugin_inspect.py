"""`mnemon plugin inspect` on Quivr manifests, from the user's side (the command, in-process).

Every manifest of Quivr's normative fixtures, valid and invalid, under its own file name: the
command judges a manifest by its content. A valid manifest lists each declared Contribution,
hosted or not, with the reason; only an invalid one exits 1.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from quivr_fixtures import FIXTURES, load, rows

click_testing = pytest.importorskip("click.testing")
pytest.importorskip("mnemon_remote")
from mnemon._cli._commands import cli  # noqa: E402 (the command needs the cli extra)

MANIFESTS = FIXTURES / "manifests"
RANKERS = Path(__file__).parent / "rankers"
CODES = {row["file"]: set(row.get("errors") or []) for row in rows("manifests/")}
# valid for Quivr at a later commit, yet the same as the invalid row retrieval-no-default.yaml
# of index.json but for its description and engine range: both cannot hold (docs/quivr.md)
CONTRADICTED = "retrieval-deep-only.yaml"
# the one invalid manifest index.json does not list: its name says what breaks
UNLISTED_INVALID = {"manifests/invalid/ingestion-pages-old-api.yaml": {"incompatible_plugin_api"}}


def inspect(*arguments: str, cwd: Path | None = None) -> tuple[int, str]:
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = click_testing.CliRunner().invoke(cli, ["plugin", "inspect", *arguments])
    finally:
        os.chdir(previous)
    return result.exit_code, result.output


def inspect_json(path: Path) -> tuple[int, dict[str, Any]]:
    status, output = inspect("--json", str(path))
    return status, json.loads(output)


VALID = sorted(p.name for p in (MANIFESTS / "valid").iterdir() if p.name != CONTRADICTED)
INVALID = sorted(p.name for p in (MANIFESTS / "invalid").iterdir())


@pytest.mark.parametrize("name", VALID)
def test_every_valid_manifest_is_valid(name: str) -> None:
    status, value = inspect_json(MANIFESTS / "valid" / name)
    assert (status, value["valid"], value["issues"]) == (0, True, [])
    declared = list(load(f"manifests/valid/{name}")["contributions"])
    assert [c["name"] for c in value["contributions"]] == declared
    assert all(c["reason"] for c in value["contributions"])


@pytest.mark.parametrize("name", INVALID)
def test_every_invalid_manifest_is_invalid_with_the_index_codes(name: str) -> None:
    relative = f"manifests/invalid/{name}"
    status, value = inspect_json(MANIFESTS / "invalid" / name)
    assert status == 1
    assert value["valid"] is False
    expected = CODES.get(relative, UNLISTED_INVALID.get(relative))
    assert {issue["code"] for issue in value["issues"]} == expected
    # an invalid manifest hosts nothing, and says so only through its issues
    assert (value["contributions"], value["hosted"]) == ([], False)


def test_every_manifest_fixture_is_covered() -> None:
    assert len(VALID) + 1 == 21
    assert len(INVALID) == 46
    listed = {row["file"] for row in rows("manifests/")}
    on_disk = {f"manifests/{p.parent.name}/{p.name}" for p in MANIFESTS.glob("*/*")}
    assert listed <= on_disk
    unlisted = on_disk - listed
    assert {f for f in unlisted if "/invalid/" in f} == set(UNLISTED_INVALID)


def test_the_deep_only_retrieval_manifest_contradicts_an_index_row() -> None:
    # the same manifest as an invalid row of index.json: mnemon follows index.json there
    deep_only = load(f"manifests/valid/{CONTRADICTED}")
    no_default = load("manifests/invalid/retrieval-no-default.yaml")
    for manifest in (deep_only, no_default):
        del manifest["description"]
        del manifest["compatibility"]["engine"]
    assert deep_only == no_default
    status, value = inspect_json(MANIFESTS / "valid" / CONTRADICTED)
    assert status == 1
    assert [(i["code"], i["path"]) for i in value["issues"]] == [
        ("schema_violation", "/contributions/retrieval/profiles")
    ]


def _every_contribution() -> dict[str, Any]:
    """One plugin declaring all five Contributions, each as a normative manifest does."""
    manifest = copy.deepcopy(load("manifests/valid/retrieval.yaml"))
    manifest["id"] = "example"
    manifest["compatibility"]["plugin_api"] = ">=0.7.0 <0.15.0"
    contributions = manifest["contributions"]
    ingestion = load("manifests/valid/ingestion.yaml")["contributions"]["ingestion"]
    ingestion["spaces"] = {"example.words": ingestion["spaces"]["example.words.small"]}
    contributions["ingestion"] = ingestion
    for name, fixture in (
        ("normalizer", "full.yaml"),
        ("subscription", "subscription.yaml"),
        ("connector", "connector.yaml"),
    ):
        contributions[name] = load(f"manifests/valid/{fixture}")["contributions"][name]
    return manifest


def test_a_plugin_of_several_contributions_lists_which_mnemon_hosts(tmp_path: Path) -> None:
    path = tmp_path / "quivr-plugin.yaml"
    path.write_text(yaml.safe_dump(_every_contribution(), sort_keys=False), encoding="utf-8")
    status, value = inspect_json(tmp_path)
    assert (status, value["valid"], value["issues"]) == (0, True, [])
    listed = {c["name"]: (c["hosted"], c["reason"]) for c in value["contributions"]}
    assert list(listed) == ["retrieval", "ingestion", "normalizer", "subscription", "connector"]
    assert listed["retrieval"] == (
        True,
        "a ranker of recall and search, the quivr-ranking Strategy; 2 profile(s)",
    )
    assert listed["ingestion"][0] is True
    assert {name for name, (hosted, _) in listed.items() if not hosted} == {
        "normalizer",
        "subscription",
        "connector",
    }
    assert "no such pipeline" in listed["normalizer"][1]
    assert (value["hosted"], value["hosted_plugin_api_version"]) == (True, "0.14.0")
    # Quivr negotiates the highest version of its contract the range admits
    assert value["plugin_api_version"] == "0.14.0"
    status, text = inspect(str(tmp_path))
    assert status == 0
    assert "example 0.1.0: valid" in text
    assert "    normalizer: not hosted (a normalizer turns input files" in text
    assert "    retrieval: hosted (a ranker of recall and search" in text
    assert "mnemon speaks Plugin API 0.14.0 with it" in text


def test_a_plugin_with_nothing_mnemon_hosts_is_valid_and_says_so() -> None:
    status, text = inspect(str(MANIFESTS / "valid" / "full.yaml"))
    assert status == 0
    assert text.splitlines()[0] == "example-pdf 1.2.0-rc.1+build.7: valid"
    assert "    normalizer: not hosted (" in text
    assert "mnemon hosts none of its Contributions" in text
    assert "unsupported_contribution" not in text


def test_a_renamed_quivr_manifest_is_judged_by_its_content(tmp_path: Path) -> None:
    renamed = tmp_path / "my.yaml"
    renamed.write_bytes((RANKERS / "quivr-plugin.yaml").read_bytes())
    status, value = inspect_json(renamed)
    assert (status, value["valid"], value["id"]) == (0, True, "mnemon.bm25")
    assert value["manifest_path"] == str(renamed)
    assert [c["name"] for c in value["contributions"]] == ["retrieval"]
    # as a folder holding the usual name, and as a relative file name
    assert inspect_json(RANKERS)[1]["id"] == "mnemon.bm25"
    status, text = inspect("my.yaml", cwd=tmp_path)
    assert status == 0
    assert text.startswith("mnemon.bm25 0.1.0: valid")
    # a broken Quivr manifest under another name gets Quivr's codes, not mnemon's
    manifest = yaml.safe_load(renamed.read_text(encoding="utf-8"))
    manifest["contributions"]["enricher"] = {}
    renamed.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    status, value = inspect_json(renamed)
    assert status == 1
    assert {i["code"] for i in value["issues"]} == {"reserved_contribution"}
