"""The contract runner's ingestion checks: a Quivr ingestion plugin certified over the wire.

For a plugin whose manifest declares `ingestion`, `mnemon plugin test` runs Quivr's runner's
ingestion checks (contribution `ingestion` in the report): the normative `article.json` and the
plugin's own ingestion fixtures drive `segment_and_embed` and `embed_query`, every answer is
judged by the functions the host judges it by (this package's wire, then the core's rules),
the same idempotency key must get the same answer, a query must be answered within
`query_timeout_ms`, and invalid requests must be refused with a terminal error envelope.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import anyio
import httpx
from jsonschema import Draft202012Validator
from mnemon_remote import AnswerTooLarge, CheckResult, ContractChecks, timed

from mnemon.sdk import DefinitionError, SegmentRequest, VectorSpace, describe_schema_error
from mnemon.versions import parse_range, parse_version

from ._ingestion import (
    EMBED_QUERY,
    MAX_QUERY_RESPONSE_BYTES,
    SEGMENT_AND_EMBED,
    IngestionContribution,
    answer_segments,
    check_embed_query_request,
    check_segment_request,
    embed_query_body,
    judge_query_vector,
    judge_segment_answer,
    segment_request_from_body,
)
from ._manifest import ManifestReport
from ._plugin import PluginRefused, PluginUnavailable, QuivrPlugin
from ._schemas import (
    ingestion_fixture_validator,
    query_request_validator,
    segment_request_validator,
)
from ._verdicts import first_difference, judge_refusal

__all__ = [
    "INGESTION",
    "INGESTION_CHECKS",
    "IngestionFixture",
    "certify_ingestion",
    "develop_ingestion",
]

INGESTION = "ingestion"
NORMATIVE = "contracts:"
#: the checks of Quivr's runner for an ingestion plugin, in report order, with their titles
INGESTION_CHECKS = ContractChecks(
    INGESTION,
    {
        "fixtures": "ingestion fixtures build valid requests",
        "invoke": "segment_and_embed answers within timeout_ms and keeps every rule",
        "replay": "the same idempotency key with a new invocation id gets the same answer",
        "segments_only": "asked for the segments alone, the same segments come back, no vectors",
        "embed_query": "each query is encoded within query_timeout_ms, the same vector twice",
        "invalid_request": "invalid requests are refused with a terminal error envelope",
        "credentials": "no secret value appears in any answer or in the plugin's output",
    },
)
#: segments alone (`spaces: []`) since this Plugin API version
SEGMENTS_ONLY_SINCE = parse_version("0.8.0")
_UNDECLARED_SPACE = "quivr_contract.undeclared"


@dataclass(frozen=True)
class IngestionFixture:
    """An ingestion fixture as read: its label, exact bytes (the ids derive from them), value."""

    label: str
    raw: bytes
    value: Any


@dataclass
class _Text:
    """One fixture that builds valid requests."""

    label: str
    body: dict[str, Any]
    request: SegmentRequest
    queries: list[str]
    expect: Mapping[str, Any]


class _Ingestion:
    """One certification's ingestion checks, appended to `checks` in report order."""

    def __init__(
        self,
        report: ManifestReport,
        client: httpx.AsyncClient,
        plugin: QuivrPlugin,
        checks: list[CheckResult],
    ) -> None:
        self.manifest: Mapping[str, Any] = report.manifest or {}
        self.contribution = IngestionContribution.from_manifest(self.manifest)
        self.client = client
        self.plugin = plugin
        self.checks = checks

    def add(
        self, check_id: str, title: str | None = None, fixture: str | None = None
    ) -> CheckResult:
        check = INGESTION_CHECKS.result(check_id, title, fixture)
        self.checks.append(check)
        return check

    # fixtures

    def request_body(self, fixture: IngestionFixture, suffix: str = "") -> dict[str, Any]:
        """The `segment_and_embed` request a fixture stands for (Quivr's development ids)."""
        ingestion = fixture.value["ingestion"]
        digest = hashlib.sha256(fixture.raw).hexdigest()[:16]
        body: dict[str, Any] = {
            "invocation_id": f"dev-invocation-{digest}{suffix}",
            "idempotency_key": f"dev:{digest}",
            "contribution": INGESTION,
            "organization_id": "dev-organization",
            "configuration": dict(ingestion.get("configuration") or {}),
            "version": {
                "corpus_id": "dev-corpus",
                "record_id": f"dev-record-{digest}",
                "record_version_id": f"dev-version-{digest}",
            },
            "parts": list(ingestion["parts"]),
            "spaces": list(
                ingestion.get("spaces") or [space.id for space in self.contribution.spaces]
            ),
        }
        if "language" in ingestion:
            body["language"] = ingestion["language"]
        return body

    def problems(self, fixture: IngestionFixture) -> tuple[list[str], list[str]]:
        """A fixture's shape problems, and the ones of its configuration."""
        shape = [
            f"{describe_schema_error(e)} at /{'/'.join(map(str, e.absolute_path))}"
            for e in ingestion_fixture_validator().iter_errors(fixture.value)
        ]
        if shape:
            return shape, []
        ingestion = fixture.value["ingestion"]
        for space in ingestion.get("spaces") or ():
            if self.contribution.space(space) is None:
                shape.append("a space the manifest does not declare at /ingestion/spaces")
        keys = {part["key"] for part in ingestion["parts"]}
        expected = (ingestion.get("expect") or {}).get("segments") or ()
        if not {segment["part_key"] for segment in expected} <= keys:
            shape.append("an expected segment names no Part at /ingestion/expect/segments")
        configuration: list[str] = []
        schema = (self.manifest.get("configuration") or {}).get("schema")
        if schema is not None:
            configuration = [
                f"the plugin's configuration schema: {e.validator} at /ingestion/configuration"
                for e in Draft202012Validator(schema).iter_errors(
                    ingestion.get("configuration", {})
                )
            ]
        if not shape and not configuration:
            body = self.request_body(fixture)
            if check_segment_request(body) or any(
                check_embed_query_request(self.query_body(body, query, space, 0))
                for query in self.queries(fixture)
                for space in body["spaces"]
            ):
                shape.append("the fixture builds a request the schema rejects")
            else:
                try:
                    segment_request_from_body(body)
                except DefinitionError:
                    shape.append("the fixture's Parts exceed what mnemon's host sends")
        return shape, configuration

    @staticmethod
    def queries(fixture: IngestionFixture) -> list[str]:
        """The fixture's queries, or the first 200 code points of its first non-empty Part."""
        ingestion = fixture.value["ingestion"]
        given = ingestion.get("queries")
        if given:
            return list(given)
        first = next((p["text"] for p in ingestion["parts"] if p["text"]), "")
        return [first[:200]] if first else []

    def query_body(
        self, body: Mapping[str, Any], query: str, space: str, attempt: int
    ) -> dict[str, Any]:
        suffix = f"-query-{attempt}"
        return embed_query_body(
            space,
            query,
            invocation_id=f"{body['invocation_id']}{suffix}",
            organization_id=str(body["organization_id"]),
            configuration=body["configuration"],
        )

    def check_fixtures(
        self,
        own: Sequence[IngestionFixture],
        strays: Sequence[tuple[str, str]],
        *,
        normative: bool = True,
    ) -> list[_Text]:
        """The `fixtures` check: Quivr's `article.json` (unless not `normative`), then `own`."""
        check = self.add("fixtures")
        texts: list[_Text] = []
        notes: list[str] = []
        with timed(check):
            for where, message in strays:
                check.issue("invalid_fixture", where, message)
            name = "ingestion/article.json"
            raw = resources.files(__package__).joinpath("contracts", name).read_bytes()
            article = IngestionFixture(NORMATIVE + name, raw, json.loads(raw))
            for fixture in [article, *own] if normative else own:
                shape, configuration = self.problems(fixture)
                if fixture is article and (shape or configuration):
                    notes.append(f"{fixture.label} skipped: {(shape + configuration)[0]}")
                    continue
                for message in shape + configuration:
                    check.issue("invalid_fixture", "/ingestion", f"{fixture.label}: {message}")
                if not shape and not configuration:
                    body = self.request_body(fixture)
                    texts.append(
                        _Text(
                            fixture.label,
                            body,
                            segment_request_from_body(body),
                            self.queries(fixture),
                            fixture.value["ingestion"].get("expect") or {},
                        )
                    )
            if not texts and not check.issues:
                check.issue(
                    "no_fixture",
                    "/fixtures",
                    "no ingestion fixture applies: add fixtures/<name>.json with the Parts of a "
                    "text (Quivr's ingestion-fixture.schema.json)",
                )
        labels = ", ".join(text.label for text in texts) or "no fixture"
        check.note = "; ".join([f"using {labels}", *notes])
        return texts

    # calls

    async def call(
        self, check: CheckResult, route: str, body: dict[str, Any], deadline_ms: int, limit: int
    ) -> bytes | None:
        """The answer's bytes, or None with the reason recorded on `check`."""
        try:
            with anyio.fail_after(deadline_ms / 1000):
                return await self.plugin.post(route, body, max_response_bytes=limit)
        except TimeoutError:
            check.issue(
                "deadline_exceeded", route, f"no answer within the declared {deadline_ms} ms"
            )
        except AnswerTooLarge:
            check.issue("response_too_large", route, f"the answer is larger than {limit} bytes")
        except PluginRefused as refused:
            # the plugin's own message is its text, not a rule: only its code is repeated
            check.issue(
                "plugin_refused",
                route,
                f"a valid request was refused with error code {refused.code} "
                f"(retryable: {str(refused.retryable).lower()})",
            )
        except PluginUnavailable:
            check.issue(
                "plugin_unavailable",
                route,
                "no answer, or a non-2xx answer without a valid error envelope",
            )
        return None

    async def segments(
        self, check: CheckResult, body: dict[str, Any], request: SegmentRequest
    ) -> Any:
        """A judged `segment_and_embed` answer (parsed), or None with its issues recorded."""
        raw = await self.call(
            check,
            SEGMENT_AND_EMBED,
            body,
            self.contribution.timeout_ms,
            self.contribution.max_response_bytes,
        )
        if raw is None:
            return None
        codes, _ = judge_segment_answer(raw, request, self.contribution)
        for code in sorted(codes):
            check.issue(code, "/segments", f"the answer broke the rule {code}")
        return None if codes else json.loads(raw)

    async def check_invoke(self, text: _Text) -> Any:
        title = (
            f"segment_and_embed answers within {self.contribution.timeout_ms} ms and "
            f"{self.contribution.max_response_bytes} bytes, keeping every rule"
        )
        check = self.add("invoke", title, text.label)
        with timed(check):
            answer = await self.segments(check, text.body, text.request)
        if answer is None:
            return None
        found = [(s["part_key"], s["start"], s["end"]) for s in answer["segments"]]
        expected = text.expect.get("segments")
        if expected is not None and found != [
            (s["part_key"], s["start"], s["end"]) for s in expected
        ]:
            check.issue(
                "unexpected_segments",
                "/segments",
                f"{len(found)} segments that are not the {len(expected)} the fixture expects",
            )
        lexical = text.expect.get("lexical_text")
        if lexical is not None:
            carried = ["lexical_text" in segment for segment in answer["segments"]]
            if carried != [lexical] * len(carried):
                check.issue(
                    "unexpected_segments",
                    "/segments",
                    f"the fixture expects {'every' if lexical else 'no'} segment with lexical_text",
                )
        if check.status == "pass":
            check.note = f"{len(found)} segments"
            return answer
        return None

    async def check_replay(self, text: _Text, first: Any) -> None:
        check = self.add("replay", fixture=text.label)
        if first is None:
            check.skip("the fixture's segment_and_embed did not pass")
            return
        body = {**text.body, "invocation_id": f"{text.body['invocation_id']}-replay"}
        with timed(check):
            again = await self.segments(check, body, text.request)
        if again is not None:
            _same(check, first, again, "/segments", "the same idempotency key")

    async def check_segments_only(self, text: _Text, first: Any) -> None:
        check = self.add("segments_only", fixture=text.label)
        declared = parse_range(str(self.manifest["compatibility"]["plugin_api"]))
        if not declared.admits(SEGMENTS_ONLY_SINCE):
            check.skip("the plugin_api range does not admit 0.8, which asks for segments alone")
            return
        if first is None:
            check.skip("the fixture's segment_and_embed did not pass")
            return
        body = {
            **text.body,
            "invocation_id": f"{text.body['invocation_id']}-segments",
            "spaces": [],
        }
        with timed(check):
            alone = await self.segments(check, body, text.request.model_copy(update={"spaces": ()}))
        if alone is not None:
            _same(check, answer_segments(first), answer_segments(alone), "/segments", "spaces []")

    async def check_embed_query(self, text: _Text) -> None:
        for space_id in text.body["spaces"]:
            space = self.contribution.space(space_id)
            assert space is not None  # the fixture names declared spaces only
            title = (
                f"each query is encoded into {space.key} within "
                f"{self.contribution.query_timeout_ms} ms, the same vector twice"
            )
            check = self.add("embed_query", title, text.label)
            with timed(check):
                for number, query in enumerate(text.queries, start=1):
                    if not await self.query_twice(check, text, query, space, number):
                        break
            if check.status == "pass":
                check.note = f"{len(text.queries)} queries"

    async def query_twice(
        self, check: CheckResult, text: _Text, query: str, space: VectorSpace, number: int
    ) -> bool:
        """Encode one query twice; whether both answers kept the rules and agree."""
        vectors = []
        for attempt in (1, 2):
            body = self.query_body(text.body, query, space.id, number * 2 + attempt)
            deadline = self.contribution.query_timeout_ms
            raw = await self.call(check, EMBED_QUERY, body, deadline, MAX_QUERY_RESPONSE_BYTES)
            if raw is None:
                return False
            codes, vector = judge_query_vector(raw, space)
            for code in sorted(codes):
                check.issue(code, "/vector", f"query {number} broke the rule {code}")
            if vector is None or codes:
                return False
            vectors.append(vector.vector)
        if vectors[0] != vectors[1]:
            check.issue(
                "nondeterministic_output",
                "/vector",
                f"query {number} got two different vectors; the same query must be encoded "
                "the same way",
            )
            return False
        return True

    # invalid requests

    def invalid_cases(self, text: _Text) -> list[tuple[str, str, str, bytes]]:
        """(label, route, reason, body) of each request a plugin must refuse."""
        segment = {**text.body, "invocation_id": f"{text.body['invocation_id']}-invalid"}
        query = self.query_body(text.body, text.queries[0], text.body["spaces"][0], 0)
        cases = []
        for name, route, valid in (
            ("segment_and_embed", SEGMENT_AND_EMBED, segment),
            ("embed_query", EMBED_QUERY, query),
        ):
            undeclared: dict[str, Any] = (
                {**valid, "spaces": [_UNDECLARED_SPACE]}
                if route == SEGMENT_AND_EMBED
                else {**valid, "space": _UNDECLARED_SPACE}
            )
            cases += [
                (f"{name}:non-json-body", route, f"{name}: the body is not JSON", b'{"a": '),
                (
                    f"{name}:unknown-field",
                    route,
                    f"{name}: the request carries an unknown top-level field",
                    json.dumps({**valid, "unexpected_field": True}).encode(),
                ),
                (
                    f"{name}:undeclared-space",
                    route,
                    f"{name}: the request names a space the manifest does not declare",
                    json.dumps(undeclared).encode(),
                ),
            ]
        folder = resources.files(__package__).joinpath("contracts", "requests", INGESTION)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".json"):
                continue
            raw = entry.read_bytes()
            query_request = entry.name.startswith("embed-query")
            validator = query_request_validator() if query_request else segment_request_validator()
            if validator.is_valid(json.loads(raw)):
                continue  # only the contract's invalid requests
            route = EMBED_QUERY if query_request else SEGMENT_AND_EMBED
            label = f"{NORMATIVE}requests/{INGESTION}/{entry.name}"
            reason = f"{entry.name}, a normative request the schema refuses"
            cases.append((label, route, reason, raw))
        return cases

    async def check_invalid_requests(self, text: _Text | None) -> None:
        if text is None:
            self.add("invalid_request").skip(
                "no fixture built a valid request to derive the invalid ones from"
            )
            return
        for label, route, reason, body in self.invalid_cases(text):
            deadline = (
                self.contribution.query_timeout_ms
                if route == EMBED_QUERY
                else self.contribution.timeout_ms
            )
            title = f"an invalid request is refused with a terminal error envelope ({reason})"
            check = self.add("invalid_request", title, label)
            with timed(check):
                try:
                    with anyio.fail_after(deadline / 1000):
                        response = await self.client.post(
                            route, content=body, headers={"Content-Type": "application/json"}
                        )
                        answer = await response.aread()
                except (httpx.HTTPError, TimeoutError):
                    check.issue("plugin_unavailable", route, f"no answer within {deadline} ms")
                    continue
            judge_refusal(check, route, response.status_code, answer, reason)


def _same(check: CheckResult, first: Any, second: Any, at: str, how: str) -> None:
    where = first_difference(first, second)
    if where is not None:
        pointer = at + (where if where != "/" else "")
        check.issue(
            "nondeterministic_output",
            pointer,
            f"two answers to {how} differ at {pointer}; they must be the same",
        )


async def certify_ingestion(
    report: ManifestReport,
    client: httpx.AsyncClient,
    plugin: QuivrPlugin,
    checks: list[CheckResult],
    own: Sequence[IngestionFixture] = (),
    strays: Sequence[tuple[str, str]] = (),
) -> None:
    """Run the ingestion checks but `credentials` on a healthy plugin, appending to `checks`.

    Checks, in order: `fixtures`, `invoke`, `replay` and `segments_only` per fixture,
    `embed_query` per fixture and space, then `invalid_request` per probe. `strays` are
    (path, message) of fixture files that belong to no Contribution, reported by `fixtures`.
    """
    ingestion = _Ingestion(report, client, plugin, checks)
    texts = ingestion.check_fixtures(own, strays)
    answers = [await ingestion.check_invoke(text) for text in texts]
    for text, first in zip(texts, answers, strict=True):
        await ingestion.check_replay(text, first)
    for text, first in zip(texts, answers, strict=True):
        await ingestion.check_segments_only(text, first)
    for text in texts:
        await ingestion.check_embed_query(text)
    await ingestion.check_invalid_requests(texts[0] if texts else None)


async def develop_ingestion(
    report: ManifestReport,
    client: httpx.AsyncClient,
    plugin: QuivrPlugin,
    checks: list[CheckResult],
    fixture: IngestionFixture,
) -> Any:
    """Replay one ingestion fixture for `mnemon plugin dev`; return the plugin's answer.

    The checks `mnemon plugin test` runs on a fixture, appended to `checks`: `fixtures`,
    `invoke` (`segment_and_embed`) and `embed_query`. The answer is the judged
    `segment_and_embed` one, or None when it broke a rule or never came.
    """
    ingestion = _Ingestion(report, client, plugin, checks)
    texts = ingestion.check_fixtures([fixture], [], normative=False)
    if not texts:
        return None
    answer = await ingestion.check_invoke(texts[0])
    await ingestion.check_embed_query(texts[0])
    return answer
