"""The quivr-plugin.yaml inspector and the range grammar against Quivr's normative fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mnemon_strategy_quivr import RangeError, inspect_manifest, parse_range, parse_version
from quivr_fixtures import FIXTURES, ROOT, load, rows

RANGES = json.loads((ROOT / "ranges.json").read_text("utf-8"))
# manifests whose Contributions mnemon knows: the retrieval subset and the protocol-level rules
KNOWN = {"normalizer", "retrieval", "enricher"}
MANIFESTS = rows("manifests/")


def _outside(row):
    # only the manifests of the subset are vendored; the others declare connector, ingestion or subscription
    if not (FIXTURES / row["file"]).exists():
        return {"connector, ingestion or subscription (not vendored)"}
    return set(load(row["file"]).get("contributions") or {}) - KNOWN


@pytest.mark.parametrize("row", MANIFESTS, ids=lambda row: row["file"].removeprefix("manifests/"))
def test_every_manifest_row_yields_exactly_its_codes(row):
    outside = _outside(row)
    if outside:
        pytest.skip(
            f"{sorted(outside)}: outside mnemon's retrieval subset (not hosted, not inspected)"
        )
    report = inspect_manifest(FIXTURES / row["file"])
    assert report.codes == frozenset(row.get("errors", [])), [i.message for i in report.issues]
    assert report.valid == row["valid"]


def test_the_subset_covers_the_retrieval_and_protocol_rows():
    inspected = [row for row in MANIFESTS if not _outside(row)]
    assert len(inspected) == 20
    codes = set().union(*(row["errors"] for row in inspected))
    assert codes == {
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
