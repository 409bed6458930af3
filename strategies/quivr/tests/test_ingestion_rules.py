"""Quivr's ingestion rows of index.json, judged by the functions the host and the runner use.

A segment_and_embed answer is decoded by this package (Quivr's response schema, then mnemon's
model) and judged by the core's `check_segment_answer`, the rules every embedder's answers
keep; an embed_query answer likewise by `check_query_vector`.
"""

from __future__ import annotations

import json

import pytest
from mnemon_strategy_quivr import (
    IngestionContribution,
    check_embed_query_request,
    check_segment_request,
    inspect_manifest,
    judge_query_vector,
    judge_segment_answer,
    segment_request_body,
    segment_request_from_body,
)
from mnemon_strategy_quivr._schemas import ingestion_fixture_validator
from quivr_fixtures import FIXTURES, load, rows

from mnemon import TextPart
from mnemon.sdk import SegmentRequest

# three answers of 16 KiB and more of one repeated character were not copied, and two files
# index.json names were not found upstream at all (tests/fixtures/quivr/NOTICE says which)
NOT_FOUND = {"requests/ingestion/segment-only.json", "responses/ingestion/no-segments.json"}
ANSWERS = rows("responses/ingestion/")
REQUESTS = rows("requests/ingestion/")


def _present(row):
    files = [row["file"], row.get("request")]
    missing = [f for f in files if f is not None and not (FIXTURES / f).exists()]
    for name in missing:
        if name in NOT_FOUND:
            pytest.skip(f"{name}: not found upstream (see tests/fixtures/quivr/NOTICE)")
        pytest.skip(f"{name}: not copied (too large to copy reliably); the core's tests cover it")


def _contribution(row):
    report = inspect_manifest(FIXTURES / row["manifest"])
    assert report.valid
    return IngestionContribution.from_manifest(report.manifest)


@pytest.mark.parametrize(
    "row",
    [r for r in ANSWERS if r["schema"].startswith("ingestion-segment-and-embed")],
    ids=lambda r: f"{r['file'].rsplit('/', 1)[1]}<-{r['request'].rsplit('/', 1)[1]}",
)
def test_every_segment_and_embed_answer_row_yields_exactly_its_codes(row):
    _present(row)
    request = segment_request_from_body(load(row["request"]))
    raw = (FIXTURES / row["file"]).read_bytes()
    codes, answer = judge_segment_answer(raw, request, _contribution(row))
    assert codes == frozenset(row["errors"])
    assert (answer is not None) == row["schema_valid"]


@pytest.mark.parametrize(
    "row",
    [r for r in ANSWERS if r["schema"].startswith("ingestion-embed-query")],
    ids=lambda r: r["file"].rsplit("/", 1)[1],
)
def test_every_embed_query_answer_row_yields_exactly_its_codes(row):
    _present(row)
    space = _contribution(row).space(load(row["request"])["space"])
    assert space is not None
    codes, vector = judge_query_vector((FIXTURES / row["file"]).read_bytes(), space)
    assert codes == frozenset(row["errors"])
    assert (vector is not None) == row["schema_valid"]


@pytest.mark.parametrize("row", REQUESTS, ids=lambda r: r["file"].rsplit("/", 1)[1])
def test_every_request_row_is_judged_by_its_schema(row):
    _present(row)
    body = load(row["file"])
    check = check_embed_query_request if "embed-query" in row["file"] else check_segment_request
    assert check(body) == frozenset(row["errors"])


def test_the_normative_article_is_a_valid_ingestion_fixture():
    [row] = rows("ingestion/")
    assert row["valid"]
    assert ingestion_fixture_validator().is_valid(load(row["file"]))


def test_an_answer_over_the_declared_size_is_response_too_large():
    contribution = _contribution({"manifest": "manifests/valid/ingestion.yaml"})
    assert contribution.max_response_bytes == 65_536
    request = segment_request_from_body(load("requests/ingestion/segment-and-embed.json"))
    raw = (FIXTURES / "responses/ingestion/valid.json").read_bytes()
    codes, _ = judge_segment_answer(raw + b" " * 65_536, request, contribution)
    assert codes == {"response_too_large"}
    assert judge_segment_answer(b'{"segments": [NaN]}', request, contribution)[0] == {
        "schema_violation"
    }


def test_an_answer_without_segments_is_a_schema_violation():
    # index.json's no-segments row, whose file was not found upstream: at least one segment
    contribution = _contribution({"manifest": "manifests/valid/ingestion.yaml"})
    request = segment_request_from_body(load("requests/ingestion/segment-and-embed.json"))
    assert judge_segment_answer({"segments": []}, request, contribution)[0] == {"schema_violation"}


def test_fields_of_plugin_api_0_17_and_later_are_refused():
    # mnemon speaks Plugin API 0.14 at most: a plugin may not answer with later fields
    contribution = _contribution({"manifest": "manifests/valid/ingestion.yaml"})
    request = segment_request_from_body(load("requests/ingestion/segment-and-embed.json"))
    answer = load("responses/ingestion/valid.json")
    answer["segments"][0]["source_ranges"] = [{"part_key": "body", "start": 0, "end": 29}]
    assert judge_segment_answer(answer, request, contribution)[0] == {"schema_violation"}
    answer = load("responses/ingestion/valid.json")
    answer["next_start"] = 49
    assert judge_segment_answer(answer, request, contribution)[0] == {"schema_violation"}


def test_mnemons_requests_go_out_in_quivrs_shape():
    request = SegmentRequest(
        idempotency_key="k" * 300,
        parts=(TextPart(key="m1", text="Ada drinks chai."),),
        spaces=("example.words.small",),
        language="not a tag",
    )
    body = segment_request_body(request, invocation_id="mnemon-1")
    assert check_segment_request(body) == frozenset()
    # a key over the wire's 256 characters is sent hashed, the same on every retry
    assert (
        body["idempotency_key"]
        == segment_request_body(request, invocation_id="x")["idempotency_key"]
    )
    assert len(body["idempotency_key"]) <= 256
    assert "language" not in body  # a hint the wire's grammar refuses is left out
    assert body["parts"] == [{"key": "m1", "role": "body", "text": "Ada drinks chai."}]
    assert json.loads(json.dumps(body)) == body
