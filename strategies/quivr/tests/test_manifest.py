"""The quivr-plugin.yaml inspector and the range grammar against Quivr's normative fixtures."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from mnemon_strategy_quivr import (
    RangeError,
    inspect_manifest,
    parse_range,
    parse_version,
    plan_hosting,
)
from quivr_fixtures import FIXTURES, ROOT, load, rows

RANGES = json.loads((ROOT / "ranges.json").read_text("utf-8"))
MANIFESTS = rows("manifests/")


@pytest.mark.parametrize("row", MANIFESTS, ids=lambda row: row["file"].removeprefix("manifests/"))
def test_every_manifest_row_yields_exactly_its_codes(row):
    report = inspect_manifest(FIXTURES / row["file"])
    assert report.codes == frozenset(row.get("errors") or []), [i.message for i in report.issues]
    assert report.valid == row["valid"]


def test_every_manifest_row_is_vendored_and_every_contribution_is_judged():
    assert len(MANIFESTS) == 58
    assert all((FIXTURES / row["file"]).is_file() for row in MANIFESTS)
    declared = set()
    for row in MANIFESTS:
        declared |= set(load(row["file"]).get("contributions") or {})
    assert declared == {
        "normalizer",
        "subscription",
        "connector",
        "ingestion",
        "retrieval",
        "enricher",
    }
    codes = set().union(*(row.get("errors") or [] for row in MANIFESTS))
    assert codes == {
        "foreign_space",
        "invalid_range",
        "incompatible_plugin_api",
        "incompatible_engine",
        "reserved_contribution",
        "foreign_namespace",
        "invalid_config_schema",
        "invalid_credential_schema",
        "invalid_expression_schema",
        "invalid_extension_schema",
        "invalid_connector_api",
        "invalid_modes",
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


# Quivr ingestion manifests index.json does not list yet: valid for Quivr, each needs a Plugin
# API mnemon does not speak (0.17 multi-part segments, 0.18 paging; mnemon speaks up to 0.14)
NEWER = [
    "valid/ingestion-multi-part.yaml",
    "valid/ingestion-paged.yaml",
    "valid/ingestion-paging-disabled.yaml",
]


@pytest.mark.parametrize("name", NEWER)
def test_ingestion_manifests_newer_than_mnemon_are_valid_and_not_hosted(name):
    report = inspect_manifest(FIXTURES / "manifests" / name)
    assert report.valid
    [ingestion] = plan_hosting(report).contributions
    assert not ingestion.hosted
    assert "admits none of the versions mnemon speaks, 0.1.0 to 0.14.0" in ingestion.reason
    assert plan_hosting(report).plugin_api is None


def test_paging_in_a_range_before_it_is_incompatible():
    report = inspect_manifest(FIXTURES / "manifests/invalid/ingestion-pages-old-api.yaml")
    assert report.codes == {"incompatible_plugin_api"}
    assert report.issues[0].path == "/contributions/ingestion/paging"


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
    assert "paging: Plugin API 0.18.0 or later" in paged.issues[0].message
    # a range that admits 0.18 makes it valid Quivr, which mnemon still cannot host
    manifest = yaml.safe_load(_ingestion(paging=True))
    manifest["compatibility"]["plugin_api"] = ">=0.6.0 <0.19.0"
    report = inspect_manifest(yaml.safe_dump(manifest))
    assert report.valid
    assert report.plugin_api == "0.18.0"
    [ingestion] = plan_hosting(report).contributions
    assert (ingestion.hosted, ingestion.reason) == (
        False,
        "paging needs Plugin API 0.18.0; mnemon speaks 0.1.0 to 0.14.0",
    )


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
        "      hasty:\n        description: The same, within one second.\n"
        "        max_latency_ms: 1000\n        max_cost_cents: 0\n",
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
