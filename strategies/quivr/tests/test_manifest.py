"""The quivr-plugin.yaml inspector and the range grammar against Quivr's normative fixtures."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from mnemon_strategy_quivr import RangeError, inspect_manifest, parse_range, parse_version
from quivr_fixtures import FIXTURES, ROOT, load, rows

RANGES = json.loads((ROOT / "ranges.json").read_text("utf-8"))
# manifests whose Contributions mnemon knows: retrieval, ingestion and the protocol-level rules
KNOWN = {"normalizer", "retrieval", "ingestion", "enricher"}
MANIFESTS = rows("manifests/")


def _outside(row):
    # only the manifests of the subset are vendored; the others declare connector or subscription
    if not (FIXTURES / row["file"]).exists():
        return {"connector or subscription (not vendored)"}
    return set(load(row["file"]).get("contributions") or {}) - KNOWN


@pytest.mark.parametrize("row", MANIFESTS, ids=lambda row: row["file"].removeprefix("manifests/"))
def test_every_manifest_row_yields_exactly_its_codes(row):
    outside = _outside(row)
    if outside:
        pytest.skip(
            f"{sorted(outside)}: outside what mnemon hosts (retrieval, ingestion): not inspected"
        )
    report = inspect_manifest(FIXTURES / row["file"])
    assert report.codes == frozenset(row.get("errors", [])), [i.message for i in report.issues]
    assert report.valid == row["valid"]


def test_the_subset_covers_the_retrieval_ingestion_and_protocol_rows():
    inspected = [row for row in MANIFESTS if not _outside(row)]
    assert len(inspected) == 25
    assert len([row for row in inspected if "/ingestion" in row["file"]]) == 5
    codes = set().union(*(row["errors"] for row in inspected))
    assert codes == {
        "foreign_space",
        "invalid_range",
        "incompatible_plugin_api",
        "incompatible_engine",
        "reserved_contribution",
        "foreign_namespace",
        "invalid_config_schema",
        "invalid_extension_schema",
        "schema_violation",
        "duplicate_secret",
    }


def test_a_valid_manifest_reports_the_spoken_plugin_api_and_digest():
    path = FIXTURES / "manifests/valid/retrieval.yaml"
    report = inspect_manifest(path)
    assert report.plugin_api == "0.7.0"
    import hashlib

    assert report.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert (
        inspect_manifest(FIXTURES / "manifests/valid/profile-candidates.json").plugin_api
        == "0.12.0"
    )


# Quivr ingestion manifests index.json does not list yet: valid or not for Quivr, each needs a
# Plugin API mnemon does not speak (0.17 multi-part segments, 0.18 paging; mnemon speaks 0.14)
NEWER = [
    "valid/ingestion-multi-part.yaml",
    "valid/ingestion-paged.yaml",
    "valid/ingestion-paging-disabled.yaml",
    "invalid/ingestion-pages-old-api.yaml",
]


@pytest.mark.parametrize("name", NEWER)
def test_ingestion_manifests_newer_than_mnemon_are_incompatible_not_malformed(name):
    report = inspect_manifest(FIXTURES / "manifests" / name)
    assert report.codes == {"incompatible_plugin_api"}
    assert report.plugin_api is None


def _ingestion(**changes):
    manifest = load("manifests/valid/ingestion.yaml")
    manifest["compatibility"]["plugin_api"] = ">=0.6.0 <0.15.0"
    manifest["contributions"]["ingestion"].update(changes)
    return yaml.safe_dump(manifest)


def test_paging_needs_a_plugin_api_mnemon_does_not_speak():
    assert inspect_manifest(_ingestion()).plugin_api == "0.14.0"
    assert inspect_manifest(_ingestion(paging=False)).valid
    paged = inspect_manifest(_ingestion(paging=True))
    assert paged.codes == {"incompatible_plugin_api"}
    assert "paging needs Plugin API 0.18.0" in paged.issues[0].message


def test_a_space_price_is_valid_where_the_range_admits_0_9():
    manifest = load("manifests/invalid/ingestion-price-plugin-api-0.8.yaml")
    manifest["compatibility"]["plugin_api"] = ">=0.8.0 <0.10.0"
    assert inspect_manifest(yaml.safe_dump(manifest)).plugin_api == "0.9.0"


def test_a_space_named_like_another_plugin_is_foreign_and_the_message_names_no_value():
    report = inspect_manifest(FIXTURES / "manifests/invalid/ingestion-foreign-space.yaml")
    [issue] = report.issues
    assert issue.path == "/contributions/ingestion/spaces/other.large"
    # the plugin id alone, or a prefix that is not followed by a dot, are checked exactly
    spaces = {"example.words": {}, "example.wordsmith": {}}
    manifest = load("manifests/valid/ingestion.yaml")
    template = manifest["contributions"]["ingestion"]["spaces"]["example.words.small"]
    # a copy each: the same object twice would be written as a YAML alias, which is refused
    manifest["contributions"]["ingestion"]["spaces"] = {k: copy.deepcopy(template) for k in spaces}
    report = inspect_manifest(yaml.safe_dump(manifest))
    assert [i.path for i in report.issues] == ["/contributions/ingestion/spaces/example.wordsmith"]
    assert "wordsmith" not in report.issues[0].message


def test_not_a_mapping_is_a_schema_violation():
    assert inspect_manifest(b"- a list\n").codes == {"schema_violation"}
    assert inspect_manifest(b"key: [unclosed\n").codes == {"schema_violation"}


def test_a_yaml_alias_is_refused_before_anything_walks_the_value():
    reference = (Path(__file__).parent / "rankers" / "quivr-plugin.yaml").read_text("utf-8")
    assert inspect_manifest(reference).valid
    # the same manifest, with one profile written as an alias of the other
    aliased = reference.replace("      default:\n", "      default: &same\n").replace(
        "      hasty:\n        description: The same, within 50 milliseconds.\n"
        "        max_latency_ms: 50\n        max_cost_cents: 0\n",
        "      hasty: *same\n",
    )
    assert "*same" in aliased
    report = inspect_manifest(aliased)
    assert report.codes == {"schema_violation"}
    # the message names the rule, never the file's text
    assert "alias" in report.issues[0].message
    assert "&same" not in report.issues[0].message


def test_messages_never_quote_the_file():
    text = (
        (FIXTURES / "manifests/invalid/bad-range.yaml")
        .read_text("utf-8")
        .replace("^0.1.0", "^0.1.0-SECRETVALUE")
    )
    report = inspect_manifest(text)
    assert report.codes == {"invalid_range"}
    assert all("SECRETVALUE" not in issue.message for issue in report.issues)


@pytest.mark.parametrize(
    "case", RANGES["cases"], ids=lambda c: f"{c['range'].strip()} ? {c['version']}"
)
def test_every_range_case(case):
    assert parse_range(case["range"]).admits(parse_version(case["version"])) is case["satisfied"]


@pytest.mark.parametrize("text", RANGES["invalid"], ids=repr)
def test_every_invalid_range(text):
    with pytest.raises(RangeError):
        parse_range(text)


def test_semver_precedence():
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    versions = [parse_version(v) for v in ordered]
    shuffled = versions[3:] + versions[:3]
    assert sorted(shuffled) == versions
    assert parse_version("1.0.0+build.1") == parse_version("1.0.0")
    with pytest.raises(RangeError):
        parse_version("01.0.0")
